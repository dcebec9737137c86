// cacheline: the floor of any cross-worker hand-off: one cache line passed
// back and forth between threads on two CPUs, ns per one-way trip.
#include <atomic>
#include <thread>

#include "../workloads.hpp"

namespace micro::cacheline {

void measure_thread(benchmark::State& state, const env&) {
  constexpr long trips = 1'000'000;
  time_ns(state, [] {
    alignas(64) std::atomic<long> turn{0};
    auto player = [&](unsigned cpu, long parity) {
      pin_this_thread(cpu);
      for (long i = parity; i < trips; i += 2) {
        while (turn.load(std::memory_order_acquire) != i) pause_once();
        turn.store(i + 1, std::memory_order_release);
      }
    };
    const std::int64_t t0 = now_ns();
    std::thread a(player, 0u, 0L), b(player, 1u, 1L);
    a.join();
    b.join();
    return static_cast<double>(now_ns() - t0) / trips;
  });
}

}  // namespace micro::cacheline
