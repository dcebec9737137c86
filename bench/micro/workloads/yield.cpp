// yield: two fibers on one worker yielding to each other: ns per switch.
#include <sched.h>

#include <atomic>
#include <thread>

#include <boost/context/fiber.hpp>

#include "../workloads.hpp"

namespace micro::yield {

void measure_usched(benchmark::State& state, const env& e) {
  auto rt = make_runtime(e.cfg, e.cfg.workers);
  for (auto _ : state) {
    const double ns = rt->run([] {
      // Both fibers run the same loop, so the return out of each switch goes
      // where the branch predictor expects (docs/performance.md, yield).
      auto body = [] {
        for (int i = 0; i < yields_total / 2; ++i) usched::this_fiber::yield();
      };
      auto a = usched::spawn(on_worker(0), body);
      auto b = usched::spawn(on_worker(0), body);
      // Both are queued on worker 0 before either runs when this fiber is
      // elsewhere; time from here to both done covers every switch.
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
    // Two fibers running the same loop on the one thread, as under usched.
    auto body = [] {
      for (int i = 0; i < yields_total / 2; ++i) boost::this_fiber::yield();
    };
    auto a = e.pool->spawn(body);
    auto b = e.pool->spawn(body);
    const std::int64_t t0 = now_ns();
    a.join();
    b.join();
    state.counters["ns"] = static_cast<double>(now_ns() - t0) / yields_total;
  }
}

void measure_thread(benchmark::State& state, const env&) {
  constexpr int n = 200'000;
  for (auto _ : state) {
    std::atomic<int> ready{0};
    auto body = [&] {
      pin_this_thread(0);
      ready.fetch_add(1);
      while (ready.load() < 2) pause_once();
      for (int i = 0; i < n / 2; ++i) sched_yield();
    };
    const std::int64_t t0 = now_ns();
    std::thread a(body), b(body);
    a.join();
    b.join();
    state.counters["ns"] = static_cast<double>(now_ns() - t0) / n;
  }
}

// The floor: a raw Boost.Context resume, no scheduler at all.
void measure_context(benchmark::State& state, const env&) {
  namespace ctx = boost::context;
  for (auto _ : state) {
    ctx::fiber f{[](ctx::fiber&& caller) {
      for (;;) caller = std::move(caller).resume();
      return std::move(caller);
    }};
    f = std::move(f).resume();
    const std::int64_t t0 = now_ns();
    for (int i = 0; i < yields_total / 2; ++i) f = std::move(f).resume();
    state.counters["ns"] = static_cast<double>(now_ns() - t0) / yields_total;
    // The fiber never returns; unwinding its stack at destruction throws
    // forced_unwind through the loop, which is what ends it.
  }
}

}  // namespace micro::yield
