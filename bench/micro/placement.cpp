// usched_placement: what placing one spawned fiber costs the engine as the
// machine grows, with and without the fork balance (options::fork_balance),
// on synthetic topologies of 2 to 256 workers. No threads: the engine alone,
// the spawning worker's view, every other worker running a fiber with two
// more queued, so that the fork balance walks every level and every group
// (find_idlest_group, then find_idlest_group_cpu) as it would on a loaded
// machine of that size. ns per placement.
//
// The wake rows place a wake-up the same way: the waker's worker runs a
// fiber too, and the woken fiber last ran on the next worker, in the
// waker's LLC, so the placement weighs the two (wake_affine) and scans that
// LLC for an idle worker and finds none (select_idle_sibling), as on a
// loaded machine.
//
//   usched_placement                       # every size, every setting
//   usched_placement --benchmark_filter=cfs/wake/3
#include <benchmark/benchmark.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "engine.hpp"
#include "random.hpp"
#include "topology.hpp"

namespace {

using usched::detail::engine;
using usched::detail::engine_config;
using usched::detail::enqueue_kind;
using usched::detail::sched_entity;

struct machine {
  const char* topology;
  unsigned workers;
};

// Packages of cores, one PU each, as the seeds' machines are laid out.
constexpr machine machines[] = {
    {"pack:1 core:2 pu:1", 2},
    {"pack:2 core:8 pu:1", 16},
    {"pack:4 core:16 pu:1", 64},
    {"pack:8 core:32 pu:1", 256},
};

enum class what { spawn, spawn_local, wake };

void place(benchmark::State& state, const char* policy, what w) {
  const machine& m = machines[static_cast<std::size_t>(state.range(0))];
  engine_config cfg;
  cfg.fork_balance = w != what::spawn_local;
  const auto topo = usched::detail::topology::load(m.topology);
  engine e(usched::build_domains(topo.place_workers(m.workers, usched::worker_unit::pu)),
           usched::make_policy(policy), cfg);
  std::deque<sched_entity> load;
  const std::int64_t now = 1'000'000'000;
  for (unsigned c = w == what::wake ? 0 : 1; c < m.workers; ++c) {
    for (int i = 0; i < 3; ++i) {
      e.enqueue(static_cast<int>(c), &load.emplace_back(), enqueue_kind::spawn, now);
    }
    // The first of them runs.
    e.pick_next(static_cast<int>(c), nullptr, usched::detail::prev_action::requeue, now);
  }
  sched_entity child;
  const usched::placement_kind kind = w == what::wake ? usched::placement_kind::wake : usched::placement_kind::spawn;
  std::vector<usched::cpu_snapshot> scratch;
  std::uint64_t random = 1;
  for (auto _ : state) {
    random = usched::detail::lcg_next(random);
    // The woken fiber's previous worker, each time (a placement may move
    // the fiber's recent_used_cpu, never its cpu).
    if (w == what::wake) child.cpu.store(1, std::memory_order_relaxed);
    const int cpu = e.select_cpu(kind, child, 0, random, scratch, now);
    benchmark::DoNotOptimize(cpu);
  }
  state.counters["workers"] = m.workers;
}

}  // namespace

int main(int argc, char** argv) {
  struct row {
    const char* name;
    const char* policy;
    what w;
  };
  // A work stealer places a spawn locally with fork balancing on or off.
  constexpr row rows[] = {
      {"cfs/fork_balance", "cfs", what::spawn}, {"cfs/local", "cfs", what::spawn_local},
      {"steal/policy", "steal", what::spawn},   {"cfs/wake", "cfs", what::wake},
      {"steal/wake", "steal", what::wake},
  };
  for (const row& r : rows) {
    auto* b = benchmark::RegisterBenchmark(r.name, [r](benchmark::State& s) { place(s, r.policy, r.w); });
    b->DenseRange(0, static_cast<int>(std::size(machines)) - 1)->Unit(benchmark::kNanosecond);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
