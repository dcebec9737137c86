// barrier: barrier_parties fibers (threads) arrive and wait at a barrier,
// --ops / barrier_ops_per_phase phases (task_api.hpp): ns per phase.
#include <barrier>

#include "../task_api.hpp"
#include "../workloads.hpp"

namespace micro::barrier {

void measure_usched(benchmark::State& state, const env& e) {
  const long ops = e.cfg.ops;
  auto rt = make_runtime(e.cfg, e.cfg.workers);
  for (auto _ : state) {
    const double ns = rt->run([ops] {
      barrier_phases b{barrier_parties, ops / barrier_ops_per_phase};
      const auto completion = [&b]() noexcept { b.on_phase(false); };
      usched::barrier<decltype(completion)> bar(b.parties, completion);
      const double t = us_sides(b.parties, [&](long) {
        for (long p = 0; p < b.phases; ++p) {
          b.arriving();
          bar.arrive_and_wait();
        }
      });
      b.check();
      return t / static_cast<double>(b.phases);
    });
    state.counters["ns"] = ns;
  }
}

void measure_boost(benchmark::State& state, const env& e) {
  for (auto _ : state) {
    barrier_phases b{barrier_parties, e.cfg.ops / barrier_ops_per_phase};
    boost::fibers::barrier bar(static_cast<std::size_t>(b.parties));
    const double t = bf_sides(*e.pool, b.parties, [&](long) {
      for (long p = 0; p < b.phases; ++p) {
        b.arriving();
        // wait() returns true to one side per phase, once it is over.
        if (bar.wait()) b.on_phase(true);
      }
    });
    b.check();
    state.counters["ns"] = t / static_cast<double>(b.phases);
  }
}

void measure_thread(benchmark::State& state, const env& e) {
  for (auto _ : state) {
    barrier_phases b{barrier_parties, e.cfg.ops / barrier_ops_per_phase};
    const auto completion = [&b]() noexcept { b.on_phase(false); };
    std::barrier<decltype(completion)> bar(b.parties, completion);
    const double t = th_sides(b.parties, [&](long) {
      for (long p = 0; p < b.phases; ++p) {
        b.arriving();
        bar.arrive_and_wait();
      }
    });
    b.check();
    state.counters["ns"] = t / static_cast<double>(b.phases);
  }
}

}  // namespace micro::barrier
