// Bad input: every rejected setting is a config_error with a one-line message
// naming the value and what is accepted.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <string>

#include <usched/usched.hpp>

#include "test_support.hpp"

namespace {

// Sets an environment variable for one scope.
class scoped_env {
 public:
  scoped_env(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    setenv(name, value, 1);
  }
  ~scoped_env() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == std::string::npos; }

std::string env_error(const char* name, const char* value) {
  scoped_env e(name, value);
  try {
    usched::options::from_env();
  } catch (const usched::config_error& err) {
    return err.what();
  }
  return "";
}

}  // namespace

TEST_CASE("options: defaults", "[options]") {
  const usched::options o;
  CHECK(o.policy == "cfs");
  CHECK(o.workers == 0);
  CHECK(o.unit == usched::worker_unit::pu);
  CHECK(o.slice == std::chrono::microseconds(3000));
  CHECK(o.stack_size == usched::default_stack_size);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  CHECK(o.stack_size == 64 * 1024);
#endif
  CHECK(o.topology.empty());
  // An embedder's defaults: the join hand-off on, fork balancing off,
  // guard regions where the kernel has them.
  CHECK(o.join_handoff);
  CHECK_FALSE(o.fork_balance);
  CHECK(o.stack_guard == usched::options::guard_pages::automatic);
  CHECK(o.stall == std::chrono::milliseconds(50));
}

TEST_CASE("options: the kernel's preset differs from the defaults in fork balancing and the join hand-off",
          "[options]") {
  usched::options k = usched::options::kernel_experiment();
  CHECK(k.fork_balance);
  CHECK_FALSE(k.join_handoff);
  k.fork_balance = false;
  k.join_handoff = true;
  CHECK(k == usched::options{});
}

TEST_CASE("options: from_env(base) puts the environment on top of the options it is given", "[options]") {
  const usched::options preset = usched::options::kernel_experiment();
  // Set to empty: unset, as for from_env(). (Any other USCHED_* variable
  // the suite runs under applies to both sides alike.)
  scoped_env f("USCHED_FORK_BALANCE", "");
  scoped_env j("USCHED_JOIN_HANDOFF", "");
  scoped_env p("USCHED_POLICY", "");
  {
    const usched::options o = usched::options::from_env(preset);
    CHECK(o.fork_balance);
    CHECK_FALSE(o.join_handoff);
    usched::options plain = usched::options::from_env();
    CHECK_FALSE(plain.fork_balance);
    CHECK(plain.join_handoff);
    plain.fork_balance = true;
    plain.join_handoff = false;
    CHECK(o == plain);
  }
  {
    scoped_env policy("USCHED_POLICY", "steal");
    const usched::options o = usched::options::from_env(preset);
    CHECK(o.policy == "steal");
    CHECK(o.fork_balance);
    CHECK_FALSE(o.join_handoff);
  }
  {
    scoped_env fork("USCHED_FORK_BALANCE", "0");
    scoped_env join("USCHED_JOIN_HANDOFF", "1");
    const usched::options o = usched::options::from_env(preset);
    CHECK_FALSE(o.fork_balance);
    CHECK(o.join_handoff);
    CHECK(o == usched::options::from_env());
  }
  {
    scoped_env bad("USCHED_FORK_BALANCE", "yes");
    try {
      usched::options::from_env(preset);
      FAIL("USCHED_FORK_BALANCE='yes' was accepted");
    } catch (const usched::config_error& err) {
      CHECK(std::string(err.what()) == "USCHED_FORK_BALANCE='yes' is not valid: expected 0 (off) or 1 (on)");
    }
  }
}

TEST_CASE("options: the environment fills the struct", "[options]") {
  scoped_env p("USCHED_POLICY", "none");
  scoped_env w("USCHED_WORKERS", "3");
  scoped_env t("USCHED_TOPOLOGY", "pack:1 core:4 pu:1");
  scoped_env s("USCHED_SLICE_US", "500");
  scoped_env k("USCHED_STACK_KB", "128");
  scoped_env l("USCHED_LOG", "error");
  scoped_env j("USCHED_JOIN_HANDOFF", "0");
  scoped_env f("USCHED_FORK_BALANCE", "1");
  scoped_env g("USCHED_GUARD_PAGES", "mprotect");
  scoped_env m("USCHED_STALL_MS", "0");
  const auto o = usched::options::from_env();
  CHECK(o.stall == std::chrono::milliseconds(0));
  CHECK_FALSE(o.join_handoff);
  CHECK(o.fork_balance);
  CHECK(o.stack_guard == usched::options::guard_pages::mprotect);
  CHECK(o.policy == "none");
  CHECK(o.workers == 3);
  CHECK(o.topology == "pack:1 core:4 pu:1");
  CHECK(o.slice == std::chrono::microseconds(500));
  CHECK(o.stack_size == 128 * 1024);
  CHECK(o.log_level == "error");
  usched::runtime rt(o);
  CHECK(rt.workers() == 3);
  {
    scoped_env c("USCHED_WORKERS", "cores");
    CHECK(usched::options::from_env().unit == usched::worker_unit::core);
  }
}

std::string code_error(const usched::options& o) {
  try {
    usched::runtime rt(o);
  } catch (const usched::config_error& err) {
    return err.what();
  }
  return "";
}

TEST_CASE("options: an unknown policy names the value and lists the registry", "[options][bad-input]") {
  const std::string names =
      "cfs, cfs-v5.9, cfs-v5.9-weight1, cfs-v5.9-idle, cfs-v5.9-failshift, cfs-blocked-load, "
      "cfs-runnable-load, cfs-no-idlest-util, cfs-numa-mel, cfs-numa-v4.19-rc1, none, steal, steal-lifo, eevdf";
  const auto msg = env_error("USCHED_POLICY", "fifo");
  CHECK(one_line(msg));
  CHECK(msg == "USCHED_POLICY='fifo' is not a registered policy; choose one of: " + names);
  // Set in code, it is named as the field.
  usched::options o;
  o.policy = "fifo";
  CHECK(code_error(o) == "options::policy='fifo' is not a registered policy; choose one of: " + names);
  // ... unless the field holds what the variable gave it.
  scoped_env e("USCHED_POLICY", "fifo");
  CHECK(code_error(o) == msg);
}

TEST_CASE("options: bad worker counts", "[options][bad-input]") {
  for (const char* v : {"0", "-1", "abc", "2x", "99999999999999999999", "4097", " 2"}) {
    INFO(v);
    const auto msg = env_error("USCHED_WORKERS", v);
    CHECK(one_line(msg));
    CHECK(msg == std::string("USCHED_WORKERS='") + v +
                     "' is not valid: expected a number of workers, 1..4096, 'pus' (one per PU) or "
                     "'cores' (one per core)");
  }
  usched::options o = usched::test::make_options("steal", 5000);
  CHECK(code_error(o) ==
        "options::workers=5000 is not valid: expected 0 (one per unit) or a number of workers, 1..4096");
}

TEST_CASE("options: more workers than the topology has units is an oversubscribed run", "[options]") {
  for (const char* policy : {"cfs", "steal-lifo"}) {
    INFO(policy);
    usched::options o;
    o.policy = policy;
    o.topology = "pack:1 core:2 pu:1";
    o.workers = 5;
    o.log_level = "error";
    usched::runtime rt(o);
    CHECK(rt.workers() == 5);
    CHECK_THAT(rt.describe(), Catch::Contains("5 workers (unpinned)"));
    // Every worker runs fibers: each of five pinned fibers reports its own.
    std::vector<usched::join_handle<int>> hs;
    for (int w = 0; w < 5; ++w) {
      hs.push_back(rt.spawn(usched::spawn_options{w}, [] { return usched::this_fiber::worker_index(); }));
    }
    for (int w = 0; w < 5; ++w) CHECK(hs[static_cast<std::size_t>(w)].join() == w);
  }
}

// marl's and Boost.Fiber's own suites run at 4, 8 and 64 workers on any host.
TEST_CASE("options: 64 workers on two PUs run every fiber once", "[options]") {
  for (const std::string& policy : usched::policy_names()) {
    INFO(policy);
    usched::options o;
    o.policy = policy;
    o.topology = "pack:1 core:2 pu:1";
    o.workers = 64;
    o.spin = std::chrono::microseconds(0);
    o.log_level = "error";  // the oversubscription warning, once per policy
    usched::runtime rt(o);
    REQUIRE(rt.workers() == 64);
    std::atomic<int> ran{0};
    const long sum = rt.run([&] {
      std::vector<usched::join_handle<long>> hs;
      for (long i = 0; i < 2000; ++i) {
        hs.push_back(usched::spawn([&, i] {
          ran.fetch_add(1, std::memory_order_relaxed);
          usched::this_fiber::yield();
          return i;
        }));
      }
      long total = 0;
      for (auto& h : hs) total += h.join();
      return total;
    });
    CHECK(sum == 2000L * 1999 / 2);
    CHECK(ran.load() == 2000);
  }
}

TEST_CASE("options: a malformed topology gives hwloc's reason", "[options][bad-input]") {
  usched::options o;
  o.topology = "pack:two core:";
  const auto msg = code_error(o);
  CHECK(one_line(msg));
  CHECK(msg == "options::topology='pack:two core:': not a valid hwloc synthetic description (Invalid argument)");
  scoped_env e("USCHED_TOPOLOGY", "pack:two core:");
  CHECK_THAT(code_error(o), Catch::StartsWith("USCHED_TOPOLOGY='pack:two core:': not a valid"));
  CHECK_THAT(code_error(usched::options::from_env()), Catch::StartsWith("USCHED_TOPOLOGY='pack:two core:'"));
}

TEST_CASE("options: other bad values", "[options][bad-input]") {
  struct bad {
    const char* name;
    const char* value;
    const char* accepted;
  };
  for (const bad& b : {bad{"USCHED_SLICE_US", "0", "a slice in microseconds, 1..10000000"},
                       bad{"USCHED_SLICE_US", "fast", "a slice in microseconds, 1..10000000"},
                       bad{"USCHED_STACK_KB", "4", "a stack size in KiB, 16..1048576"},
                       bad{"USCHED_STALL_MS", "-1", "a stall threshold in milliseconds, 0..3600000"},
                       bad{"USCHED_STALL_MS", "soon", "a stall threshold in milliseconds, 0..3600000"},
                       bad{"USCHED_STALL_MS", "3600001", "a stall threshold in milliseconds, 0..3600000"},
                       bad{"USCHED_SPIN_US", "-5", "a spin time in microseconds, 0..1000000"},
                       bad{"USCHED_SPIN_US", "3600000000", "a spin time in microseconds, 0..1000000"},
                       bad{"USCHED_CFS_LATENCY_US", "99", "a period in microseconds, 100..10000000"},
                       bad{"USCHED_PIN", "yes", "0 (do not pin workers) or 1 (pin)"},
                       bad{"USCHED_PIN", "01", "0 (do not pin workers) or 1 (pin)"},
                       bad{"USCHED_LOAD_TRACKING", "2", "0 (off) or 1 (on)"},
                       bad{"USCHED_JOIN_HANDOFF", "on", "0 (off) or 1 (on)"},
                       bad{"USCHED_FORK_BALANCE", "true", "0 (off) or 1 (on)"},
                       bad{"USCHED_GUARD_PAGES", "madvise", "auto or mprotect"},
                       bad{"USCHED_GUARD_PAGES", "AUTO", "auto or mprotect"},
                       bad{"USCHED_STATS", "01", "0, 1 (a table) or json"},
                       bad{"USCHED_BLOCKING_THREADS", "0", "a number of threads, 1..4096"},
                       bad{"USCHED_BLOCKING_THREADS", "5000", "a number of threads, 1..4096"},
                       bad{"USCHED_BLOCKING_THREADS", "many", "a number of threads, 1..4096"},
                       bad{"USCHED_TRACE_FLIGHT", "abc", "events kept per worker (0: the whole run), 0..16777216"},
                       bad{"USCHED_TRACE_FLIGHT", "99999999",
                           "events kept per worker (0: the whole run), 0..16777216"},
                       bad{"USCHED_TRACE_LIMIT_MB", "0", "a whole run's trace memory in MiB, 1..65536"}}) {
    INFO(b.name << "=" << b.value);
    CHECK(env_error(b.name, b.value) ==
          std::string(b.name) + "='" + b.value + "' is not valid: expected " + b.accepted);
  }
  for (const char* level : {"loud", "warning", "err", "WARN"}) {
    INFO(level);
    CHECK(env_error("USCHED_LOG", level) ==
          std::string("USCHED_LOG='") + level +
              "' is not a log level; choose one of: trace, debug, info, warn, error, critical, off");
  }
  usched::options o;
  o.log_level = "loud";
  CHECK(code_error(o) ==
        "options::log_level='loud' is not a log level; choose one of: trace, debug, info, warn, "
        "error, critical, off");
}

TEST_CASE("options: an empty variable counts as unset", "[options]") {
  for (const char* name : {"USCHED_POLICY", "USCHED_WORKERS", "USCHED_SPIN_US", "USCHED_PIN", "USCHED_LOG",
                           "USCHED_STATS", "USCHED_TOPOLOGY", "USCHED_STACK_KB"}) {
    INFO(name);
    scoped_env e(name, "");
    const usched::options o = usched::options::from_env();
    const usched::options d;
    CHECK(o.policy == d.policy);
    CHECK(o.workers == d.workers);
    CHECK(o.spin == d.spin);
    CHECK(o.pin == d.pin);
    CHECK(o.log_level == d.log_level);
    CHECK(o.stats == d.stats);
    CHECK(o.topology == d.topology);
    CHECK(o.stack_size == d.stack_size);
  }
}

// Fields set from code go through the same checks as the environment: the
// runtime refuses them when it is built, naming the field and the value.
TEST_CASE("options: fields set in code are validated as the environment is", "[options][bad-input]") {
  using us = std::chrono::microseconds;
  struct bad {
    void (*set)(usched::options&);
    const char* message;
  };
  const bad cases[] = {
      {[](usched::options& o) { o.cfs_latency = us(-1000); },
       "options::cfs_latency=-1000us is not valid: expected a period in microseconds, 100..10000000 us"},
      {[](usched::options& o) { o.cfs_latency = us(0); },
       "options::cfs_latency=0us is not valid: expected a period in microseconds, 100..10000000 us"},
      {[](usched::options& o) { o.cfs_min_granularity = us(-1); },
       "options::cfs_min_granularity=-1us is not valid: expected a time in microseconds, 10..10000000 us"},
      {[](usched::options& o) { o.cfs_wakeup_granularity = us(-1); },
       "options::cfs_wakeup_granularity=-1us is not valid: expected a time in microseconds, 0..10000000 us"},
      {[](usched::options& o) { o.spin = std::chrono::hours(1); },
       "options::spin=3600000000us is not valid: expected a spin time in microseconds, 0..1000000 us"},
      {[](usched::options& o) { o.stall = std::chrono::hours(2); },
       "options::stall=7200000ms is not valid: expected a stall threshold in milliseconds, 0..3600000 ms"},
      {[](usched::options& o) { o.stall = std::chrono::milliseconds(-1); },
       "options::stall=-1ms is not valid: expected a stall threshold in milliseconds, 0..3600000 ms"},
      {[](usched::options& o) { o.slice = us(0); },
       "options::slice=0us is not valid: expected a slice in microseconds, 1..10000000 us"},
      {[](usched::options& o) { o.stack_size = 1; },
       "options::stack_size=1 is not valid: expected a stack size in bytes, 16384..1073741824 (16 KiB..1 GiB)"},
      {[](usched::options& o) { o.unit = static_cast<usched::worker_unit>(7); },
       "options::unit=7 is not valid: expected worker_unit::pu or worker_unit::core"},
      {[](usched::options& o) { o.stats = static_cast<usched::options::stats_output>(9); },
       "options::stats=9 is not valid: expected stats_output::none, table or json"},
  };
  for (const bad& b : cases) {
    INFO(b.message);
    usched::options o;
    b.set(o);
    CHECK_THROWS_WITH(o.validate(), b.message);
    CHECK(code_error(o) == b.message);
  }
  CHECK_NOTHROW(usched::options{}.validate());
}

TEST_CASE("options: a value from the environment changed in code is named as the field", "[options][bad-input]") {
  scoped_env e("USCHED_SPIN_US", "100");
  usched::options o = usched::options::from_env();
  CHECK(o.spin == std::chrono::microseconds(100));
  o.spin = std::chrono::microseconds(2'000'000);
  CHECK(code_error(o) ==
        "options::spin=2000000us is not valid: expected a spin time in microseconds, 0..1000000 us");
}

TEST_CASE("options: EEVDF's base slice and switches from the environment, and their one-line errors",
          "[options][eevdf]") {
  {
    scoped_env s("USCHED_SCHED_FEATURES", "NO_RUN_TO_PARITY,NO_DELAY_DEQUEUE");
    scoped_env b("USCHED_EEVDF_BASE_SLICE_US", "3000");
    const usched::options o = usched::options::from_env();
    CHECK(o.eevdf_features == (usched::options{}.eevdf_features & ~(1u << 3) & ~(1u << 5)));
    CHECK(o.eevdf_base_slice == std::chrono::microseconds(3000));
  }
  const std::string bad = env_error("USCHED_SCHED_FEATURES", "NO_SUCH_FEATURE");
  CHECK(one_line(bad));
  CHECK_THAT(bad, Catch::Contains("USCHED_SCHED_FEATURES") && Catch::Contains("NO_SUCH_FEATURE") &&
                      Catch::Contains("PLACE_LAG, PLACE_DEADLINE_INITIAL"));
  const std::string slice = env_error("USCHED_EEVDF_BASE_SLICE_US", "50");
  CHECK(one_line(slice));
  CHECK_THAT(slice, Catch::Contains("USCHED_EEVDF_BASE_SLICE_US") && Catch::Contains("100..100000"));
}
