// fanout: one fiber spawns --fanout-tasks tasks of --task-us each (a spin on
// the clock, so a task's length does not depend on what else the CPU runs)
// and joins them: ms of the first run (which also maps and faults in the
// stacks) and of a warm one, and the warm run's efficiency, tasks x task-us
// / workers over its ms. For scaling runs (usched_micro_compare --scaling).
#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "../workloads.hpp"

namespace micro::fanout {

namespace {

// Spawns every task, then joins them in spawn order. Returns ms and checks
// that every task ran exactly once.
template <class Spawn, class Join>
double run_once(const config& cfg, Spawn spawn, Join join) {
  using handle = decltype(spawn(std::declval<std::atomic<long>&>(), std::int64_t{}));
  const auto n = static_cast<std::size_t>(cfg.fanout_tasks);
  const std::int64_t task_ns = cfg.task_us * 1000;
  std::vector<handle> hs;
  hs.reserve(n);
  std::atomic<long> ran{0};
  const std::int64_t t0 = now_ns();
  for (std::size_t i = 0; i < n; ++i) hs.push_back(spawn(ran, task_ns));
  for (auto& h : hs) join(h);
  const std::int64_t t1 = now_ns();
  if (ran.load() != cfg.fanout_tasks) throw std::runtime_error("fanout: tasks lost or run twice");
  return static_cast<double>(t1 - t0) / 1e6;
}

void report(benchmark::State& state, const config& cfg, double ms_first, double ms) {
  state.counters["ms_first"] = ms_first;
  state.counters["ms"] = ms;
  const double ideal_ms =
      static_cast<double>(cfg.fanout_tasks) * static_cast<double>(cfg.task_us) / 1000.0 / cfg.workers;
  state.counters["efficiency"] = ms > 0 ? ideal_ms / ms : 0;
}

}  // namespace

void measure_usched(benchmark::State& state, const env& e) {
  auto rt = make_runtime(e.cfg, e.cfg.workers);
  const config& cfg = e.cfg;
  const auto once = [&cfg] {
    return run_once(
        cfg,
        [](std::atomic<long>& ran, std::int64_t ns) {
          return usched::spawn([&ran, ns] {
            spin_for(ns);
            ran.fetch_add(1, std::memory_order_relaxed);
          });
        },
        [](usched::join_handle<void>& h) { h.join(); });
  };
  for (auto _ : state) {
    const double first = rt->run(once);
    report(state, cfg, first, rt->run(once));
  }
}

void measure_boost(benchmark::State& state, const env& e) {
  boost_pool& pool = *e.pool;
  const auto once = [&e, &pool] {
    return run_once(
        e.cfg,
        [&pool](std::atomic<long>& ran, std::int64_t ns) {
          return pool.spawn([&ran, ns] {
            spin_for(ns);
            ran.fetch_add(1, std::memory_order_relaxed);
          });
        },
        [](boost::fibers::fiber& f) { f.join(); });
  };
  for (auto _ : state) {
    const double first = once();
    report(state, e.cfg, first, once());
  }
}

}  // namespace micro::fanout
