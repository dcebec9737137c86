// The runtime's scheduling claims, checked in the simulator: the slice and
// preempt_point(), wake-up preemption under cfs, steal moving queued fibers
// to idle workers, none never moving a fiber, a preferred NUMA node's fibers
// staying on its workers. The simulator runs the same engine and policies as
// the real backend, on a virtual clock, so each claim is checked exactly
// (which worker ran which fiber, when, how often) and nothing sleeps.
// test_runtime.cpp keeps what only the real backend can show: that its
// preempt points, wake-ups and steals are carried out on real workers.
#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "simulator.hpp"
#include "test_support.hpp"
#include "workload.hpp"

using namespace std::chrono_literals;

namespace {

using usched::sim::simulator;

// One line of the simulator's trace that says a worker ran a fiber.
struct run_event {
  std::int64_t t;
  int cpu;
  int fiber;
};

// One line that says a fiber was made runnable: a spawn or a wake-up, from
// worker `from` (-1: outside any worker) onto worker `to`.
struct wake_event {
  std::int64_t t;
  bool spawn;
  int fiber;
  int from;
  int to;
};

struct traced_run {
  std::vector<run_event> runs;
  std::vector<wake_event> wakes;
  usched::runtime_stats stats;
  std::uint64_t migrations = 0;
  std::uint64_t numa_migrations = 0;

  // The workers that ran fiber `f`, once per run, in order.
  std::vector<int> cpus_of(int f) const {
    std::vector<int> out;
    for (const auto& r : runs) {
      if (r.fiber == f) out.push_back(r.cpu);
    }
    return out;
  }
};

// run_traced() runs workload `text` on `topology` under `policy`, with the
// options the runtime tests make (test_support.hpp: the embedder's defaults,
// a 20 us spin) as `adjust` changes them, to its end, and reads the trace.
// Fibers are numbered from 1 in the order they are made: a workload's fibers
// in the order of their lines, then its spawns as they happen.
template <class Adjust>
traced_run run_traced(const std::string& topology, const std::string& policy, const std::string& text,
                      Adjust adjust) {
  usched::sim::sim_config c;
  c.topology = topology;
  c.policy = policy;
  c.options = usched::test::make_options(policy, 1);
  adjust(c.options);
  usched::detail::tracer trace({});
  c.trace = &trace;
  simulator sim(c);
  std::istringstream in(text);
  const auto w = usched::sim::parse_workload(in, "w.txt");
  std::ostringstream out;
  usched::sim::run_workload(sim, w, out);

  traced_run r;
  using usched::detail::trace_event;
  for (const auto& e : trace.collect().records) {
    if (e.type == trace_event::switch_to && e.other != 0) {
      r.runs.push_back({e.time, e.cpu, static_cast<int>(e.other)});
    } else if (e.type == trace_event::wakeup && !(e.flags & usched::detail::wake_flag_running)) {
      // A fiber a workload queues at the start (spawn_on) is placed by no
      // one: it has neither a waker's worker nor a previous one.
      const bool is_new = (e.flags & usched::detail::wake_flag_new) != 0;
      if (is_new && e.aux < 0 && e.from < 0 && e.time == 0) continue;
      r.wakes.push_back({e.time, is_new, static_cast<int>(e.fiber), e.aux, e.cpu});
    }
  }
  r.stats = sim.stats();
  r.migrations = sim.migrations();
  r.numa_migrations = sim.numa_migrations();
  return r;
}

traced_run run_traced(const std::string& topology, const std::string& policy, const std::string& text) {
  return run_traced(topology, policy, text, [](usched::options&) {});
}

// The default costs (simulator.hpp): what a switch and a preempt point take.
const usched::sim::costs default_costs{};

}  // namespace

TEST_CASE("sim: preempt_point yields once the slice is used up, and the two fibers take exact turns",
          "[sim][runtime]") {
  // test_runtime.cpp's case on one worker under none: two CPU-bound fibers
  // of 30 ms each with a 1 ms slice. Each preempt point past the slice
  // lets the other run, so they alternate a slice at a time until both end.
  const auto r = run_traced("pack:1 core:1 pu:1", "none",
                            "runtime 100ms\n"
                            "fiber a\n  run 30ms\n"
                            "fiber b\n  run 30ms\n",
                            [](usched::options& o) { o.slice = 1000us; });
  constexpr std::int64_t slice_ns = 1'000'000;
  // 30 slices each: 60 runs, strictly alternating, every one a full slice
  // after the switch into the previous one.
  REQUIRE(r.runs.size() == 60);
  for (std::size_t i = 0; i < r.runs.size(); ++i) {
    INFO("run " << i);
    CHECK(r.runs[i].cpu == 0);
    CHECK(r.runs[i].fiber == (i % 2 == 0 ? 1 : 2));
    CHECK(r.runs[i].t == static_cast<std::int64_t>(i) * (slice_ns + default_costs.switch_ns));
  }
  // The slice's end is a yield at a preempt point, not a tick's preemption.
  CHECK(r.stats.workers[0].fibers_run == 60);
  CHECK(r.stats.workers[0].tick_preemptions == 0);
}

TEST_CASE("sim: cfs: a fiber woken from another worker preempts a CPU-bound one at its next preempt point",
          "[sim][runtime][cfs]") {
  // test_runtime.cpp's case: the sleeper (fiber 1) spawns the spinner
  // (fiber 3) onto its own worker and waits; the waker (fiber 2), on the
  // other worker, posts once the spinner has run 10 ms, five wake-up
  // granularities on two workers.
  const auto r = run_traced("pack:1 core:2 pu:1", "cfs",
                            "runtime 100ms\n"
                            "fiber sleeper pin=0\n  spawn spinner\n  wait msg\n  run 1ms\n"
                            "fiber waker pin=1\n  sleep 10ms\n  post msg\n"
                            "fiber spinner x0 pin=0\n  run 50ms\n");
  // The sleeper's wake-up, from worker 1, queued on its worker 0 while the
  // spinner runs there.
  const wake_event* woken = nullptr;
  for (const auto& w : r.wakes) {
    if (!w.spawn && w.fiber == 1) woken = &w;
  }
  REQUIRE(woken != nullptr);
  CHECK(woken->from == 1);
  CHECK(woken->to == 0);
  // Worker 0 ran the spinner, then the sleeper from the spinner's first
  // preempt point after the wake-up (one preempt point's time later, not at
  // the next tick or the slice's end), then the spinner again, unfinished.
  std::vector<run_event> on0;
  for (const auto& e : r.runs) {
    if (e.cpu == 0) on0.push_back(e);
  }
  REQUIRE(on0.size() == 4);
  CHECK(on0[0].fiber == 1);
  CHECK(on0[1].fiber == 3);
  CHECK(on0[1].t < woken->t);
  CHECK(on0[2].fiber == 1);
  CHECK(on0[2].t == woken->t + default_costs.preempt_point_ns);
  CHECK(on0[3].fiber == 3);
  CHECK(r.stats.workers[0].wakeup_preemptions == 1);
  CHECK(r.stats.workers[0].tick_preemptions == 0);
}

TEST_CASE("sim: steal moves queued fibers to idle workers, which share them evenly", "[sim][runtime][steal]") {
  // test_runtime.cpp's case on its four workers (two cores of two PUs):
  // one fiber spawns 64 CPU-bound children of 2 ms on its own worker
  // (steal places locally), and the idle workers take them.
  const auto r = run_traced("pack:1 l3:1 core:2 pu:2", "steal",
                            "runtime 1s\n"
                            "fiber parent\n  spawn child x64\n  join\n"
                            "fiber child x0\n  run 2ms\n");
  // Every child was queued on the parent's worker 0...
  int spawns = 0;
  for (const auto& w : r.wakes) {
    if (w.spawn && w.fiber >= 2) {
      ++spawns;
      CHECK(w.to == 0);
    }
  }
  CHECK(spawns == 64);
  // ...and ran once, never preempted; each worker ran 16 of them, so the
  // 48 that ran elsewhere were moved there by balancing.
  std::map<int, int> children_on;
  for (int f = 2; f <= 65; ++f) {
    const auto cpus = r.cpus_of(f);
    INFO("fiber " << f);
    REQUIRE(cpus.size() == 1);
    ++children_on[cpus[0]];
  }
  CHECK(children_on == std::map<int, int>{{0, 16}, {1, 16}, {2, 16}, {3, 16}});
  std::uint64_t pulled_elsewhere = 0;
  for (std::size_t w = 1; w < 4; ++w) {
    INFO("worker " << w);
    CHECK(r.stats.workers[w].fibers_pulled > 0);
    pulled_elsewhere += r.stats.workers[w].fibers_pulled;
  }
  CHECK(pulled_elsewhere >= 48);
  // The batch took the 32 ms of four workers sharing it, not the 128 ms of
  // one: the parent's last run, after its last join, came before 33 ms.
  const auto parent = r.cpus_of(1);
  REQUIRE_FALSE(parent.empty());
  std::int64_t parent_last = 0;
  for (const auto& e : r.runs) {
    if (e.fiber == 1) parent_last = e.t;
  }
  CHECK(parent_last > 32'000'000);
  CHECK(parent_last < 33'000'000);
}

TEST_CASE("sim: none never moves a fiber", "[sim][runtime][none]") {
  // test_runtime.cpp's case: 64 fibers spawned on one of four workers, each
  // sleeping 100 us twenty times, under the policy that neither places
  // elsewhere nor balances.
  const auto r = run_traced("pack:1 l3:1 core:2 pu:2", "none",
                            "runtime 1s\n"
                            "fiber parent\n  spawn child x64\n  join\n"
                            "fiber child x0\n  sleep 100us\n  run 1us\n  repeat 20\n");
  // Every run of every fiber was on worker 0, where the parent started...
  for (const auto& e : r.runs) {
    INFO("fiber " << e.fiber << " at " << e.t);
    CHECK(e.cpu == 0);
  }
  // ...including each child's twenty wake-ups, each from the timer of the
  // worker it slept on and placed on the worker it last ran on.
  std::map<int, int> child_wakes;
  for (const auto& w : r.wakes) {
    CHECK(w.to == 0);
    if (!w.spawn && w.fiber >= 2) ++child_wakes[w.fiber];
  }
  REQUIRE(child_wakes.size() == 64);
  for (const auto& [f, n] : child_wakes) {
    INFO("fiber " << f);
    CHECK(n == 20);
  }
  CHECK(r.migrations == 0);
  for (const auto& w : r.stats.workers) {
    CHECK(w.fibers_pulled == 0);
    CHECK(w.wake_idle_sibling + w.wake_other == 0);
  }
}

TEST_CASE("sim: a fiber with a preferred NUMA node runs on that node's workers", "[sim][runtime][numa]") {
  // test_runtime.cpp's case: two fibers preferring node 1 (workers 2-3),
  // spawned from worker 0 on node 0, each running and sleeping 200 us five
  // times.
  const std::string policy = GENERATE(as<std::string>{}, "cfs", "cfs-numa-mel");
  INFO("policy=" << policy);
  const auto r = run_traced("pack:2 [numa] core:2 pu:1", policy,
                            "runtime 1s\n"
                            "fiber parent pin=0\n  spawn child x2\n  join\n"
                            "fiber child x0 node=1\n  run 1us\n  sleep 200us\n  repeat 5\n");
  // Each ran six times (its start and five wake-ups), every time on node 1.
  for (int f = 2; f <= 3; ++f) {
    INFO("fiber " << f);
    const auto cpus = r.cpus_of(f);
    CHECK(cpus.size() == 6);
    for (const int c : cpus) CHECK(c >= 2);
  }
  // Each was placed on node 1 at its spawn, from worker 0, so no run of
  // theirs crossed a node after it.
  int spawns = 0;
  for (const auto& w : r.wakes) {
    if (w.spawn && w.fiber >= 2) {
      ++spawns;
      CHECK(w.from == 0);
      CHECK(w.to >= 2);
    }
  }
  CHECK(spawns == 2);
  CHECK(r.numa_migrations == 0);
}
