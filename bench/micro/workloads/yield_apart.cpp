// yield_apart: the yield benchmark with the two fibers yielding from
// different loops. The return out of each switch then lands in other code
// than the return address the predictor holds from the fiber that switched
// away: one mispredicted return per switch, for any runtime whose yield is
// a call.
#include "../workloads.hpp"

namespace micro::yield_apart {

void measure_usched(benchmark::State& state, const env& e) {
  time_usched(state, e, [] {
    return yield_pair_usched(
        [] {
          for (int i = 0; i < yields_total / 2; ++i) usched::this_fiber::yield();
        },
        [] {
          for (int i = yields_total / 2; i > 0; --i) usched::this_fiber::yield();
        });
  });
}

void measure_boost(benchmark::State& state, const env& e) {
  time_ns(state, [&e] {
    return yield_pair_boost(
        *e.pool,
        [] {
          for (int i = 0; i < yields_total / 2; ++i) boost::this_fiber::yield();
        },
        [] {
          for (int i = yields_total / 2; i > 0; --i) boost::this_fiber::yield();
        });
  });
}

}  // namespace micro::yield_apart
