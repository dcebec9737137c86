// spawn_all: half of --fibers spawned from one fiber with their handles
// kept (a parallel map), then joined in order: ns per fiber and the peak
// RSS of the run. A finished fiber's stack goes back to the pool before
// its handle is joined, and the spawner cannot run ahead of its children
// by more than the spawn backlog, so the peak is the join states and the
// handles, not a stack per fiber.
#include <stdexcept>
#include <vector>

#include <oneapi/tbb/task_group.h>

#include "../workloads.hpp"

namespace micro::spawn_all {

void measure_usched(benchmark::State& state, const env& e) {
  auto rt = make_runtime(e.cfg, e.cfg.workers);
  const long n = e.cfg.fibers / 2;
  const auto run = [n] {
    std::vector<usched::join_handle<long>> hs;
    hs.reserve(static_cast<std::size_t>(n));
    const std::int64_t t0 = now_ns();
    for (long i = 0; i < n; ++i) hs.push_back(usched::spawn([i] { return i; }));
    long sum = 0;
    for (auto& h : hs) sum += h.join();
    const std::int64_t t1 = now_ns();
    if (sum != n * (n - 1) / 2) throw std::runtime_error("spawn_all: wrong sum");
    return static_cast<double>(t1 - t0) / static_cast<double>(n);
  };
  for (auto _ : state) {
    reset_peak_rss();
    const double first = rt->run(run);
    state.counters["peak_rss_mib"] = peak_rss_since_reset_mib();
    state.counters["ns_first"] = first;
    state.counters["ns"] = rt->run(run);
  }
}

// oneTBB has no handle per task: task_group::run() returns nothing, and
// the one way to wait for a task is to wait for its group. What a oneTBB
// user writes for a parallel map with its results kept is one task_group
// running all n tasks, each storing its result into its own slot of a
// vector made beforehand, then one wait() and a pass over the vector. The
// slot is the equivalent of the handle's join state (where the result
// waits to be taken), the wait() of the n joins. A task_group per task,
// to keep something that can be waited on one by one, would be the handle
// made literally and not what anyone writes. The vector is made before the
// clock starts, as usched's vector of handles is reserved before it; a
// task's own storage (the task object run() allocates around the functor)
// is made inside the timing, as spawn() makes a join state. Nothing holds
// the spawner back, so all n tasks can be queued at once: the peak RSS is
// the queued tasks and the slots, with no stacks.
void measure_tbb(benchmark::State& state, const env& e) {
  tbb_arena arena(e.cfg.workers);
  const long n = e.cfg.fibers / 2;
  const auto run = [n] {
    std::vector<long> results(static_cast<std::size_t>(n));
    oneapi::tbb::task_group g;
    const std::int64_t t0 = now_ns();
    for (long i = 0; i < n; ++i) g.run([&results, i] { results[static_cast<std::size_t>(i)] = i; });
    g.wait();
    long sum = 0;
    for (const long r : results) sum += r;
    const std::int64_t t1 = now_ns();
    if (sum != n * (n - 1) / 2) throw std::runtime_error("spawn_all: wrong sum");
    return static_cast<double>(t1 - t0) / static_cast<double>(n);
  };
  for (auto _ : state) {
    reset_peak_rss();
    const double first = arena.execute(run);
    state.counters["peak_rss_mib"] = peak_rss_since_reset_mib();
    state.counters["ns_first"] = first;
    state.counters["ns"] = arena.execute(run);
  }
}

}  // namespace micro::spawn_all
