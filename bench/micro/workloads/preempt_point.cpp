// preempt_point: one fiber alone on worker 0 calling this_fiber::
// preempt_point() in a loop: ns per call, the price a CPU-bound loop pays
// for being preemptible when nothing asks it to yield (the tick, about once
// a millisecond, is in the average).
#include "../workloads.hpp"

namespace micro::preempt_point {

void measure_usched(benchmark::State& state, const env& e) {
  time_usched(state, e, [] {
    return usched::spawn(on_worker(0), [] {
             const std::int64_t t0 = now_ns();
             for (long i = 0; i < calls; ++i) usched::this_fiber::preempt_point();
             return static_cast<double>(now_ns() - t0) / static_cast<double>(calls);
           })
        .join();
  });
}

}  // namespace micro::preempt_point
