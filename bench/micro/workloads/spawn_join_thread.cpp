// spawn_join_thread: spawn_join's batches spawned and joined from a thread
// that is not a fiber (runtime::spawn from outside): ns per fiber.
#include <atomic>

#include "../workloads.hpp"

namespace micro::spawn_join_thread {

void measure_usched(benchmark::State& state, const env& e) {
  auto rt = make_runtime(e.cfg, e.cfg.workers);
  auto spawn = [&rt](std::atomic<long>& c) {
    return rt->spawn([&c] { c.fetch_add(1, std::memory_order_relaxed); });
  };
  auto join = [](usched::join_handle<void>& h) { h.join(); };
  for (auto _ : state) {
    const double first = spawn_join_run(e.cfg.fibers, spawn, join);
    const double warm = spawn_join_run(e.cfg.fibers, spawn, join);
    state.counters["ns_first"] = first;
    state.counters["ns"] = warm;
  }
}

}  // namespace micro::spawn_join_thread
