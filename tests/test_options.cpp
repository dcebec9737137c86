// Bad input: every rejected setting is a config_error with a one-line message
// naming the value and what is accepted.
#include <catch2/catch.hpp>

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
}

TEST_CASE("options: the environment fills the struct", "[options]") {
  scoped_env p("USCHED_POLICY", "none");
  scoped_env w("USCHED_WORKERS", "3");
  scoped_env t("USCHED_TOPOLOGY", "pack:1 core:4 pu:1");
  scoped_env s("USCHED_SLICE_US", "500");
  scoped_env k("USCHED_STACK_KB", "128");
  scoped_env l("USCHED_LOG", "error");
  const auto o = usched::options::from_env();
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

TEST_CASE("options: an unknown policy names the value and lists the registry", "[options][bad-input]") {
  const auto msg = env_error("USCHED_POLICY", "fifo");
  CHECK(one_line(msg));
  CHECK(msg ==
        "USCHED_POLICY='fifo' is not a registered policy; choose one of: cfs, cfs-v5.9, "
        "cfs-v5.9-weight1, cfs-v5.9-idle, cfs-v5.9-failshift, cfs-blocked-load, cfs-numa-mel, none, steal, steal-lifo");
  usched::options o;
  o.policy = "fifo";
  CHECK_THROWS_WITH(usched::runtime(o), msg);
}

TEST_CASE("options: bad worker counts", "[options][bad-input]") {
  for (const char* v : {"0", "-1", "abc", "2x", "99999999999999999999"}) {
    INFO(v);
    const auto msg = env_error("USCHED_WORKERS", v);
    CHECK(one_line(msg));
    CHECK_THAT(msg, Catch::StartsWith(std::string("USCHED_WORKERS='") + v + "' is not valid"));
    CHECK_THAT(msg, Catch::Contains("'pus'") && Catch::Contains("'cores'"));
  }
  usched::options o = usched::test::make_options("steal", 9);
  try {
    usched::runtime rt(o);
    FAIL("9 workers on 8 PUs was accepted");
  } catch (const usched::config_error& e) {
    CHECK(one_line(e.what()));
    CHECK_THAT(e.what(), Catch::Contains("9") && Catch::Contains("1..8"));
  }
}

TEST_CASE("options: a malformed topology gives hwloc's reason", "[options][bad-input]") {
  usched::options o;
  o.topology = "pack:two core:";
  try {
    usched::runtime rt(o);
    FAIL("malformed topology accepted");
  } catch (const usched::config_error& e) {
    CHECK(one_line(e.what()));
    CHECK_THAT(e.what(), Catch::Contains("pack:two core:"));
  }
}

TEST_CASE("options: other bad values", "[options][bad-input]") {
  struct bad {
    const char* name;
    const char* value;
    const char* accepted;
  };
  for (const bad& b : {bad{"USCHED_SLICE_US", "0", "1..10000000"},
                       bad{"USCHED_SLICE_US", "fast", "1..10000000"},
                       bad{"USCHED_STACK_KB", "4", "16..1048576"},
                       bad{"USCHED_SPIN_US", "-5", "0..1000000"},
                       bad{"USCHED_PIN", "yes", "0 (do not pin workers) or 1"}}) {
    INFO(b.name << "=" << b.value);
    const auto msg = env_error(b.name, b.value);
    CHECK(one_line(msg));
    CHECK_THAT(msg, Catch::Contains(b.value) && Catch::Contains(b.accepted));
  }
  usched::options o;
  o.log_level = "loud";
  CHECK_THROWS_WITH(usched::runtime(o), Catch::Contains("USCHED_LOG='loud'") &&
                                           Catch::Contains("trace, debug, info"));
}
