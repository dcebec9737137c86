// The simulator: the engine and the policies on virtual workers. Runs are
// deterministic (same inputs, same bytes), the decisions are the engine's
// (the seed-000 stacking of test_engine.cpp, set up as a workload, ends the
// same way), and bad workloads and costs are one-line errors.
#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "schbench_model.hpp"
#include "simulator.hpp"
#include "workload.hpp"
#include "engine_test_access.hpp"

namespace {

using test_access = usched::detail::engine_test_access;

using usched::sim::simulator;

usched::sim::sim_config config(const std::string& topology, const std::string& policy, std::uint64_t seed = 1) {
  usched::sim::sim_config c;
  c.topology = topology;
  c.policy = policy;
  c.seed = seed;
  return c;
}

// The same, with the kernel's settings (options::kernel_experiment()), as
// usched_sim and the seeds' experiments run.
usched::sim::sim_config kernel_config(const std::string& topology, const std::string& policy,
                                      std::uint64_t seed = 1) {
  usched::sim::sim_config c = config(topology, policy, seed);
  c.options = usched::options::kernel_experiment();
  return c;
}

usched::schbench::cli_options schbench_args(std::initializer_list<std::string> args) {
  return usched::schbench::parse_cli(std::vector<std::string>(args));
}

struct run_result {
  std::string out;
  std::string stats;
  usched::schbench::run_summary summary;
};

run_result run_schbench(const usched::sim::sim_config& c, std::initializer_list<std::string> args) {
  simulator sim(c);
  std::ostringstream out;
  run_result r;
  r.summary = usched::sim::run_schbench_model(sim, schbench_args(args), out);
  r.out = out.str();
  r.stats = sim.stats().to_json();
  return r;
}

usched::sim::workload parse(const std::string& text);

// A workload run to its end in a simulator of its own, for its counters.
std::unique_ptr<simulator> run_file(const usched::sim::sim_config& c, const usched::sim::workload& w) {
  auto sim = std::make_unique<simulator>(c);
  std::ostringstream out;
  usched::sim::run_workload(*sim, w, out);
  return sim;
}

usched::sim::workload parse(const std::string& text) {
  std::istringstream in(text);
  return usched::sim::parse_workload(in, "w.txt");
}

std::uint64_t p99(const usched::schbench::run_summary& s) { return usched::schbench::percentile_value(s, 99.0); }

}  // namespace

TEST_CASE("sim: the same seed and inputs give the same bytes, another seed other ones", "[sim]") {
  const auto a = run_schbench(config("pack:1 l3:1 core:4 pu:2", "cfs", 7), {"-m", "2", "-t", "4", "-r", "3", "-w", "1", "-c", "5000", "-s", "2000"});
  const auto b = run_schbench(config("pack:1 l3:1 core:4 pu:2", "cfs", 7), {"-m", "2", "-t", "4", "-r", "3", "-w", "1", "-c", "5000", "-s", "2000"});
  CHECK(a.out == b.out);
  CHECK(a.stats == b.stats);
  CHECK(a.summary.samples > 300);
  CHECK_THAT(a.out, Catch::Contains("warmup done, zeroing stats") && Catch::Contains("Latency percentiles (usec) runtime 3 (s)"));
  const auto c = run_schbench(config("pack:1 l3:1 core:4 pu:2", "cfs", 8), {"-m", "2", "-t", "4", "-r", "3", "-w", "1", "-c", "5000", "-s", "2000"});
  CHECK(a.stats != c.stats);  // the jitter of the sleeps moved
  CHECK(a.summary.mode == "sim");
  CHECK(a.summary.workers == 8);
}

TEST_CASE("sim: seed 000's stacking ends as the engine test says, through the simulator", "[sim][cfs]") {
  // tests/test_engine.cpp "cfs spreads fibers stacked in an LLC, cfs-v5.9
  // leaves them stacked", as a workload: three warm workers, a fiber
  // woken onto worker 0 while every worker is busy, then worker 1 goes
  // idle with its fiber's util still on it (it blocks, it does not exit).
  const auto w = parse(
      "runtime 1s\n"
      "fiber a on=0\n  run 2s\n"
      "fiber b on=0\n  sleep 499ms\n  run 2s\n"
      "fiber c on=2\n  run 2s\n"
      "fiber d on=1\n  run 500ms\n  sleep 10s\n");
  const auto task = static_cast<std::size_t>(usched::migration_type::migrate_task);
  const auto util = static_cast<std::size_t>(usched::migration_type::migrate_util);
  {
    const auto sim = run_file(kernel_config("pack:1 l3:1 core:3 pu:1", "cfs"), w);
    // The newly-idle pass itself moves the waiting fiber (migrate_task).
    const auto& llc = sim->eng().counters(1, 0);
    CHECK(llc.moved[task] == 1);
    CHECK(llc.moved[util] == 0);
    CHECK(llc.failures == 0);
    CHECK(sim->eng().counters(1).newidle_pulls == 1);
  }
  {
    const auto sim = run_file(kernel_config("pack:1 l3:1 core:3 pu:1", "cfs-v5.9"), w);
    // migrate_util: worker 1's spare capacity stays below either hog's
    // util, and every pass fails; the simulated fibers reach preempt points,
    // so after cache_nice_tries + 2 failed periodic passes worker 1 asks for
    // an active balance and worker 0 gives it the fiber that ran least
    // recently (the engine test's third case).
    const auto& llc = sim->eng().counters(1, 0);
    CHECK(llc.moved[task] == 0);
    CHECK(llc.moved[util] == 0);
    CHECK(llc.failures >= 3);
    CHECK(sim->eng().counters(0).active_pushes == 1);
    CHECK(test_access::rq(sim->eng(), 1).nr_running == 1);
  }
}

TEST_CASE("sim: a workload file runs its fibers' steps, spawns and joins", "[sim]") {
  const auto w = parse(
      "# a parent forks four children and joins them, ten times\n"
      "runtime 2s\n"
      "fiber parent\n  spawn child x4\n  join\n  repeat 10\n"
      "fiber child x0\n  run 1ms\n  sleep 2ms\n  run 1ms\n");
  SECTION("a joiner woken like any waiter (the seed experiments' setting)") {
    const usched::sim::sim_config c = kernel_config("pack:1 core:2 pu:1", "steal");
    simulator sim(c);
    std::ostringstream out;
    const auto s = usched::sim::run_workload(sim, w, out);
    // 40 children: each wakes once from its sleep. The parent joins its
    // children newest first right after spawning them, so it blocks at
    // least once a round and at most once per child.
    CHECK(s.samples >= 40 + 10);
    CHECK(s.samples <= 40 + 40);
    const auto st = sim.stats();
    std::uint64_t runs = 0;
    for (const auto& wk : st.workers) runs += wk.fibers_run;
    CHECK(runs >= 41 + 40);  // every child started and resumed after its sleep
    CHECK(sim.eng().counters(0).handoffs + sim.eng().counters(1).handoffs == 0);
    CHECK_THAT(out.str(), Catch::StartsWith("Latency percentiles (usec) runtime 2 (s)"));
  }
  SECTION("with the join hand-off") {
    simulator sim(config("pack:1 core:2 pu:1", "steal"));
    std::ostringstream out;
    const auto s = usched::sim::run_workload(sim, w, out);
    // The children's 40 wake-ups from their sleeps are still there; the
    // parent's, handed the worker by an exiting child, take no time: each
    // is a sample of 0 us, one per join that blocked.
    CHECK(s.samples >= 40);
    CHECK(s.samples <= 40 + 40);
    const auto st = sim.stats();
    std::uint64_t runs = 0;
    for (const auto& wk : st.workers) runs += wk.fibers_run;
    CHECK(runs >= 41 + 40);
    // Every round the parent joins its newest child, still queued beside
    // it: at least one hand-off a round.
    CHECK(sim.eng().counters(0).handoffs + sim.eng().counters(1).handoffs >= 10);
  }
}

// A workload that wakes fibers for every reason the simulator has: spawns,
// sleeps' timers, a posted event, a join (the wake-up counts' test says
// how many of each).
constexpr const char* every_reason_workload =
    "runtime 1s\n"
    "fiber sleeper\n  sleep 1ms\n  sleep 1ms\n  sleep 1ms\n"
    "fiber waiter\n  wait go\n"
    "fiber poster\n  sleep 2ms\n  post go\n"
    "fiber parent\n  spawn child\n  join\n"
    "fiber child x0\n  sleep 1ms\n"
    "fiber starter on=0\n  run 1ms\n";

TEST_CASE("sim: wake-ups are counted by reason: spawns, timers, posts, joins", "[sim][stats]") {
  // Every count is fixed by the workload, whatever the policy and the
  // number of workers (which only moves counts between workers): five
  // fibers start (four placed by the policy, one queued on worker 0 as a
  // starting state) and the parent spawns a child: spawn 6. Three sleeps,
  // the poster's sleep and the child's: timer 5. The waiter waits from its
  // first run, the post comes 2 ms later: sync 1 (the simulated event is
  // a futex word). The parent joins its child while the child sleeps:
  // join 1.
  const auto w = parse(every_reason_workload);
  const std::string policy = GENERATE(from_range(usched::policy_names()));
  const std::string topology = GENERATE(as<std::string>{}, "pack:1 core:1 pu:1", "pack:1 core:2 pu:1");
  CAPTURE(policy, topology);
  simulator sim(config(topology, policy));
  std::ostringstream out;
  (void)usched::sim::run_workload(sim, w, out);
  usched::wake_counts got;
  for (const auto& wk : sim.stats().workers) {
    for (std::size_t r = 0; r < usched::wake_reason_count; ++r) got.n[r] += wk.wakeups.n[r];
  }
  usched::wake_counts want;
  want[usched::wake_reason::spawn] = 6;
  want[usched::wake_reason::timer] = 5;
  want[usched::wake_reason::sync] = 1;
  want[usched::wake_reason::join] = 1;
  for (std::size_t r = 0; r < usched::wake_reason_count; ++r) {
    const auto why = static_cast<usched::wake_reason>(r);
    CAPTURE(to_string(why));
    CHECK(got[why] == want[why]);
  }
}

TEST_CASE("sim: workload files with mistakes are one-line errors naming the line", "[sim]") {
  const auto error_of = [](const std::string& text) {
    try {
      parse(text);
    } catch (const usched::sim::workload_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(error_of("fiber a\n  run 5 ms\n") == "w.txt:2: expected 'run DURATION'");
  CHECK(error_of("fiber a\n  run 5min\n") ==
        "w.txt:2: '5min' is not a duration; expected a whole number with ns, us, ms or s");
  CHECK(error_of("run 1ms\n") == "w.txt:1: 'run' outside a fiber; a step follows a 'fiber NAME' line");
  CHECK(error_of("fiber a\n  hop\n") ==
        "w.txt:2: unknown statement 'hop'; expected runtime, fiber, run, sleep, wait, post, spawn, join or repeat");
  CHECK(error_of("fiber a\n  repeat\n  run 1ms\n") ==
        "w.txt:3: 'run' after 'repeat': repeat must be the fiber's last step");
  CHECK(error_of("fiber a\n  spawn b\n") == "w.txt:2: spawn of 'b', which no 'fiber' line defines");
  CHECK(error_of("fiber a x\n") == "w.txt:1: 'x' is not a count; expected x0..x100000");
  CHECK(error_of("fiber a\nfiber a\n") == "w.txt:2: fiber 'a' is defined twice (line 1)");
  CHECK(error_of("# nothing\n") == "w.txt: no 'fiber' line: nothing to run");
  CHECK(error_of("fiber a\n  post e\n  repeat\n") ==
        "w.txt:1: fiber 'a' repeats steps that take no time (a run of 0, posts, spawns); it needs a run, "
        "sleep, wait or join");
}

TEST_CASE("sim: costs are named, and a wrong name or a negative value is refused", "[sim]") {
  usched::sim::costs c;
  usched::sim::set_cost(c, "wake_parked", 7000);
  CHECK(c.wake_parked_ns == 7000);
  CHECK(usched::sim::get_cost(c, "wake_parked") == 7000);
  CHECK_THROWS_WITH(usched::sim::set_cost(c, "wake", 1),
                    "--cost wake: unknown cost; accepted: switch, wake_spinning, wake_parked, migrate_llc, "
                    "migrate_cross_llc, migrate_numa, preempt_point, waker, waker_futex, spin_poll, balance_pass");
  CHECK_THROWS_WITH(usched::sim::set_cost(c, "switch", -1),
                    "--cost switch=-1: a cost is a whole number of ns, 0 or more");
}

TEST_CASE("sim: a bad topology is the runtime's one-line error", "[sim]") {
  CHECK_THROWS_WITH(simulator(config("pack:x", "cfs")), Catch::StartsWith("--topology 'pack:x'"));
}

TEST_CASE("sim: seed 000 on its 40-CPU box: cfs-v5.9's p99 is at least 10x cfs's", "[sim][cfs][seed000]") {
  // The thread's command line (20 workers per message thread, one-second
  // thinks, 1 ms sleeps) on the thread's VM, 20 cores of 2 threads.
  const std::initializer_list<std::string> args = {"-m", "2", "-t", "20", "-r", "30", "-c", "1000000", "-s", "1000"};
  const auto good = run_schbench(kernel_config("pack:1 core:20 pu:2", "cfs", 1), args);
  const auto bad = run_schbench(kernel_config("pack:1 core:20 pu:2", "cfs-v5.9", 1), args);
  INFO("cfs p99 " << p99(good.summary) << " us, cfs-v5.9 p99 " << p99(bad.summary) << " us");
  CHECK(good.summary.samples > 500);
  CHECK(p99(bad.summary) >= 10 * p99(good.summary));
}

TEST_CASE("sim: with fork balancing off, a fork-join batch queued behind its spawner keeps the idle worker busy",
          "[sim][cfs]") {
  // The embedder's defaults (fork balancing off, the join hand-off): each
  // spawn stays on the spawner's worker and kicks an idle one to pull
  // (wake_result::pull). The kicked worker balances whatever its short idle
  // periods would ration; before, worker 1 sat idle for about 40% of this
  // run and parked hundreds of times.
  const auto w = parse(
      "runtime 200ms\n"
      "fiber parent\n  spawn child x1000\n  join\n  repeat\n"
      "fiber child x0\n  run 1us\n");
  usched::sim::sim_config c = config("pack:1 core:2 pu:1", "cfs");
  c.options.fork_balance = false;
  c.options.join_handoff = true;
  simulator sim(c);
  std::ostringstream out;
  usched::sim::run_workload(sim, w, out);
  const auto st = sim.stats();
  REQUIRE(st.workers.size() == 2);
  const auto& other = st.workers[1];
  INFO("worker 1: busy " << other.busy_ns << " ns, idle " << other.idle_ns << " ns, " << other.parks << " parks");
  CHECK(other.idle_ns * 20 < other.busy_ns);  // idle under 5% of its time
  CHECK(other.parks < 20);
  CHECK(sim.eng().counters(1).newidle_pulls > 1000);
}

TEST_CASE("sim: every counted wake-up that ran has its wake-to-run delay, on the worker that ran it",
          "[sim][stats]") {
  // The workload of the wake-up counts above: every fiber it wakes runs
  // before the end, so each reason's histogram holds exactly as many
  // delays as wake-ups were counted, whatever the policy.
  const auto w = parse(every_reason_workload);
  const std::string policy = GENERATE(from_range(usched::policy_names()));
  const std::string topology = GENERATE(as<std::string>{}, "pack:1 core:1 pu:1", "pack:1 core:2 pu:1");
  CAPTURE(policy, topology);
  simulator sim(config(topology, policy));
  std::ostringstream out;
  (void)usched::sim::run_workload(sim, w, out);
  const usched::runtime_stats st = sim.stats();
  for (std::size_t r = 0; r < usched::wake_reason_count; ++r) {
    const auto why = static_cast<usched::wake_reason>(r);
    CAPTURE(to_string(why));
    std::uint64_t woken = 0;
    for (const auto& wk : st.workers) woken += wk.wakeups[why];
    CHECK(st.wake_latency(why).count == woken);
  }
  // The 1 ms run of the starter, queued on worker 0 first, holds back
  // whatever lands behind it there; no delay is longer than the run.
  CHECK(st.wake_latency().max_ns <= 1'000'000 + 10'000);
  // The JSON carries the histograms: the runtime's total and each worker's.
  const std::string json = st.to_json();
  CHECK(json.find("],\"wake_latency\":{\"total\":{\"count\":" + std::to_string(st.wake_latency().count)) !=
        std::string::npos);
}

// The wake-ups a workload file's block can hold: every one but the
// spawns (a spawn is a start, not a wake-up from a sleep, wait or join),
// counted by the stats when the woken fiber ran.
std::uint64_t sampled_wakeups(const usched::runtime_stats& st) {
  return st.wake_latency().count - st.wake_latency(usched::wake_reason::spawn).count;
}

TEST_CASE("sim: a workload file's block counts every wake-up, those served within the microsecond too",
          "[sim][stats]") {
  // A hog and a sleeper on one worker under `none`: the sleeper's timer
  // wake-ups get the worker at once, so nearly all of them take under a
  // microsecond. Each is still a sample: the block counts the sleeper's
  // wake-ups, exactly, and its median is 0 us.
  const auto w = parse(
      "runtime 7s\n"
      "fiber hog pin=0\n  run 1s\n  repeat\n"
      "fiber sleeper pin=0\n  sleep 10ms\n  repeat\n");
  simulator sim(kernel_config("pack:1 core:1 pu:1", "none"));
  std::ostringstream out;
  const auto s = usched::sim::run_workload(sim, w, out);
  const usched::runtime_stats st = sim.stats();
  const std::uint64_t timer_wakeups = st.workers.at(0).wakeups[usched::wake_reason::timer];
  REQUIRE(timer_wakeups > 600);  // about one per 10 ms of the 7 s
  CHECK(st.wake_latency(usched::wake_reason::timer).count == timer_wakeups);  // every one ran
  CHECK(sampled_wakeups(st) == timer_wakeups);
  CHECK(s.samples == timer_wakeups);
  CHECK(usched::schbench::percentile_value(s, 50.0) == 0);
  CHECK(s.min_us == 0);
  CHECK_THAT(out.str(), Catch::StartsWith("Latency percentiles (usec) runtime 7 (s) (" +
                                          std::to_string(timer_wakeups) + " total samples)"));
}

TEST_CASE("sim: a wait whose post is already there wakes nothing and leaves no sample", "[sim][stats]") {
  // The poster posts every millisecond; the waiter, busy 5 ms between
  // waits, finds the post there each time and goes on at once. Only the
  // poster's timer wake-ups are wake-ups: a sample is not the time since
  // the waiter last really woke (its start, up to seconds ago).
  const auto w = parse(
      "runtime 2s\n"
      "fiber poster pin=0\n  post go\n  sleep 1ms\n  repeat\n"
      "fiber waiter pin=0\n  run 5ms\n  wait go\n  repeat\n");
  simulator sim(kernel_config("pack:1 core:1 pu:1", "none"));
  std::ostringstream out;
  const auto s = usched::sim::run_workload(sim, w, out);
  const usched::runtime_stats st = sim.stats();
  REQUIRE(st.wake_latency(usched::wake_reason::timer).count > 300);
  CHECK(st.wake_latency(usched::wake_reason::sync).count == 0);
  CHECK(s.samples == sampled_wakeups(st));
  // Queued behind the waiter's 5 ms runs, never longer.
  CHECK(s.max_us <= 5'000 + 10);
}

TEST_CASE("sim: a workload file's block holds one sample per wake-up from a sleep, a wait or a join, whatever the policy",
          "[sim][stats]") {
  // The workload of the wake-up counts above: five timer wake-ups, one
  // post, one join, every one run before the end.
  const auto w = parse(every_reason_workload);
  const std::string policy = GENERATE(from_range(usched::policy_names()));
  const std::string topology = GENERATE(as<std::string>{}, "pack:1 core:1 pu:1", "pack:1 core:2 pu:1");
  CAPTURE(policy, topology);
  simulator sim(config(topology, policy));
  std::ostringstream out;
  const auto s = usched::sim::run_workload(sim, w, out);
  CHECK(sampled_wakeups(sim.stats()) == 5 + 1 + 1);
  CHECK(s.samples == 5 + 1 + 1);
}

TEST_CASE("sim: the stats' wake-to-run delays agree with the trace and with the schbench clone's own",
          "[sim][stats][schbench]") {
  // With the switch, the migrations and the waker's own time costing
  // nothing, the clone's worker measures what the stats do: its message
  // thread takes one timestamp and posts every worker at that instant, and
  // the worker reads the clock as soon as it is picked. The trace gives
  // every wake-up and every switch, so the delays can be recomputed from it.
  const std::string policy = GENERATE(as<std::string>{}, "cfs", "steal", "cfs-v5.9");
  CAPTURE(policy);
  usched::sim::sim_config c = kernel_config("pack:1 core:4 pu:1", policy);
  for (const char* cost : {"switch", "migrate_llc", "migrate_cross_llc", "migrate_numa", "waker", "waker_futex"}) {
    usched::sim::set_cost(c.cost, cost, 0);
  }
  usched::detail::tracer trace({});
  c.trace = &trace;
  simulator sim(c);
  std::ostringstream out;
  const auto summary = usched::sim::run_schbench_model(sim, schbench_args({"-m", "1", "-t", "6", "-r", "2", "-w", "0"}), out);
  const usched::runtime_stats st = sim.stats();

  // From the trace: each wake-up or spawn that queued a fiber, and the
  // switch that next ran it. Fiber 1 is the message thread (spawned from
  // outside); the others are its workers.
  using usched::detail::trace_event;
  std::map<std::uint64_t, std::pair<std::int64_t, bool>> queued_at;  // when, and whether a wake-up (not a spawn)
  usched::latency_histogram all;
  std::vector<std::int64_t> clone_deltas_us;  // the workers', in the clone's arithmetic
  for (const auto& e : trace.collect().records) {
    if (e.type == trace_event::wakeup) {
      if (!(e.flags & usched::detail::wake_flag_running)) {
        queued_at[e.fiber] = {e.time, !(e.flags & usched::detail::wake_flag_new)};
      }
    } else if (e.type == trace_event::switch_to && e.other != 0) {
      const auto it = queued_at.find(e.other);
      if (it == queued_at.end()) continue;
      const auto [at, woken] = it->second;
      all.record(static_cast<std::uint64_t>(e.time - at));
      if (e.other != 1 && woken) clone_deltas_us.push_back(e.time / 1000 - at / 1000);
      queued_at.erase(it);
    }
  }
  // Exactly the trace's delays.
  const usched::latency_histogram got = st.wake_latency();
  REQUIRE(all.count > 100);
  CHECK(got.count == all.count);
  CHECK(got.sum_ns == all.sum_ns);
  CHECK(got.max_ns == all.max_ns);
  CHECK(got.buckets == all.buckets);

  // The clone's: it records each worker wake-up of more than 0 us (its
  // workers' spawns are not wake-ups it times: they have no timestamp).
  std::size_t timed = 0;
  for (const std::int64_t d : clone_deltas_us) timed += d > 0 ? 1 : 0;
  // Spawns aside, a worker is only ever woken by its message thread's post.
  const std::uint64_t worker_wakes = clone_deltas_us.size();
  CHECK(summary.samples == timed);
  // The stats' sync histogram holds those wake-ups and the message
  // thread's by its workers' posts (one a round, its sleep's timer ending
  // the other): the same wake-ups, and as many more as the message thread
  // had timer wake-ups, give or take the round the run ends in.
  const usched::latency_histogram sync = st.wake_latency(usched::wake_reason::sync);
  const usched::latency_histogram timer = st.wake_latency(usched::wake_reason::timer);
  CHECK(sync.count >= worker_wakes + timer.count);
  CHECK(sync.count <= worker_wakes + timer.count + 1);
  // Its percentiles agree with the clone's within a bucket's width (and
  // the microsecond the clone's arithmetic may add).
  for (const double p : {50.0, 99.0}) {
    CAPTURE(p);
    const std::uint64_t clone_ns = usched::schbench::percentile_value(summary, p) * 1000;
    const std::uint64_t stats_ns = sync.percentile(p);
    const std::uint64_t width = usched::latency_histogram::bucket_width(usched::latency_histogram::bucket_of(stats_ns));
    CAPTURE(clone_ns, stats_ns, width);
    CHECK(stats_ns + width + 1000 >= clone_ns);
    CHECK(clone_ns + width + 1000 >= stats_ns);
  }
}
