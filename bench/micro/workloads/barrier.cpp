// barrier: barrier_parties fibers (threads) arrive and wait at a barrier,
// --ops / barrier_ops_per_phase phases (task_api.hpp): ns per phase.
#include <barrier>

#include "../task_api.hpp"
#include "../workloads.hpp"

namespace micro::barrier {

void measure_usched(benchmark::State& state, const env& e) {
  time_usched(state, e, [ops = e.cfg.ops] { return completion_barrier_ns<usched::barrier>(ops, usched_sides()); });
}

// Boost.Fiber's barrier has no completion step: its wait() returns true to
// one side per phase, once the phase is over, and that side checks it.
void measure_boost(benchmark::State& state, const env& e) {
  time_ns(state, [&e] {
    barrier_phases b{barrier_parties, e.cfg.ops / barrier_ops_per_phase};
    boost::fibers::barrier bar(static_cast<std::size_t>(b.parties));
    const double t = boost_roomy_sides(*e.pool)(b.parties, [&](long) {
      for (long p = 0; p < b.phases; ++p) {
        b.arriving();
        if (bar.wait()) b.on_phase(true);
      }
    });
    b.check();
    return t / static_cast<double>(b.phases);
  });
}

void measure_thread(benchmark::State& state, const env& e) {
  time_ns(state, [&e] { return completion_barrier_ns<std::barrier>(e.cfg.ops, thread_sides()); });
}

}  // namespace micro::barrier
