// shared_mutex: shared_mutex_fibers fibers (threads), 95% lock_shared / 5%
// lock (task_api.hpp): ns per operation. Boost.Fiber has no shared mutex.
#include <shared_mutex>

#include "../task_api.hpp"
#include "../workloads.hpp"

namespace micro::shared_mutex {

void measure_usched(benchmark::State& state, const env& e) {
  const long ops = e.cfg.ops;
  auto rt = make_runtime(e.cfg, e.cfg.workers);
  for (auto _ : state) {
    const double ns = rt->run([ops] {
      usched::shared_mutex m;
      shared_mutex_mix mix{shared_mutex_fibers, ops / shared_mutex_fibers};
      const double t = us_sides(mix.fibers, [&](long i) { mix.side(m, i); });
      mix.check();
      return t / static_cast<double>(mix.operations());
    });
    state.counters["ns"] = ns;
  }
}

void measure_thread(benchmark::State& state, const env& e) {
  for (auto _ : state) {
    std::shared_mutex m;
    shared_mutex_mix mix{shared_mutex_fibers, e.cfg.ops / shared_mutex_fibers};
    const double t = th_sides(mix.fibers, [&](long i) { mix.side(m, i); });
    mix.check();
    state.counters["ns"] = t / static_cast<double>(mix.operations());
  }
}

}  // namespace micro::shared_mutex
