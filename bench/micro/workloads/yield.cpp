// yield: two fibers on one worker yielding to each other: ns per switch.
#include <sched.h>

#include <atomic>
#include <thread>

#include <boost/context/fiber.hpp>

#include "../workloads.hpp"

namespace micro::yield {

void measure_usched(benchmark::State& state, const env& e) {
  time_usched(state, e, [] {
    // Both fibers run the same loop, so the return out of each switch goes
    // where the branch predictor expects (docs/performance.md, yield).
    auto body = [] {
      for (int i = 0; i < yields_total / 2; ++i) usched::this_fiber::yield();
    };
    return yield_pair_usched(body, body);
  });
}

void measure_boost(benchmark::State& state, const env& e) {
  time_ns(state, [&e] {
    // Two fibers running the same loop on the one thread, as under usched.
    auto body = [] {
      for (int i = 0; i < yields_total / 2; ++i) boost::this_fiber::yield();
    };
    return yield_pair_boost(*e.pool, body, body);
  });
}

void measure_thread(benchmark::State& state, const env&) {
  constexpr int n = 200'000;
  time_ns(state, [] {
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
    return static_cast<double>(now_ns() - t0) / n;
  });
}

// The floor: a raw Boost.Context resume, no scheduler at all.
void measure_context(benchmark::State& state, const env&) {
  namespace ctx = boost::context;
  time_ns(state, [] {
    ctx::fiber f{[](ctx::fiber&& caller) {
      for (;;) caller = std::move(caller).resume();
      return std::move(caller);
    }};
    f = std::move(f).resume();
    const std::int64_t t0 = now_ns();
    for (int i = 0; i < yields_total / 2; ++i) f = std::move(f).resume();
    // The fiber never returns; unwinding its stack when f is destroyed, on
    // the way out, throws forced_unwind through the loop, which is what
    // ends it.
    return static_cast<double>(now_ns() - t0) / yields_total;
  });
}

}  // namespace micro::yield
