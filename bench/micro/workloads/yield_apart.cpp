// yield_apart: the yield benchmark with the two fibers yielding from
// different loops. The return out of each switch then lands in other code
// than the return address the predictor holds from the fiber that switched
// away: one mispredicted return per switch, for any runtime whose yield is
// a call.
#include "../workloads.hpp"

namespace micro::yield_apart {

void measure_usched(benchmark::State& state, const env& e) {
  auto rt = make_runtime(e.cfg, e.cfg.workers);
  for (auto _ : state) {
    const double ns = rt->run([] {
      auto a = usched::spawn(on_worker(0), [] {
        for (int i = 0; i < yields_total / 2; ++i) usched::this_fiber::yield();
      });
      auto b = usched::spawn(on_worker(0), [] {
        for (int i = yields_total / 2; i > 0; --i) usched::this_fiber::yield();
      });
      const std::int64_t t0 = now_ns();
      a.join();
      b.join();
      return static_cast<double>(now_ns() - t0);
    });
    state.counters["ns"] = ns / yields_total;
  }
}

void measure_boost(benchmark::State& state, const env& e) {
  for (auto _ : state) {
    auto a = e.pool->spawn([] {
      for (int i = 0; i < yields_total / 2; ++i) boost::this_fiber::yield();
    });
    auto b = e.pool->spawn([] {
      for (int i = yields_total / 2; i > 0; --i) boost::this_fiber::yield();
    });
    const std::int64_t t0 = now_ns();
    a.join();
    b.join();
    state.counters["ns"] = static_cast<double>(now_ns() - t0) / yields_total;
  }
}

}  // namespace micro::yield_apart
