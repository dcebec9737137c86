// timer_late: a fiber sleeps 1 ms on a worker that a fiber which never
// yields holds until the sleeper has run again (at most 20 ms). Lateness is
// when the sleeper runs minus its deadline: the timer must be fired by
// another worker, and the woken fiber run there (or pulled there) by the
// policy. p50 and max over timer_samples sleeps, in microseconds.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "../workloads.hpp"

namespace micro::timer_late {

namespace {
// Sleeps measured, how long each is, and how long the fiber that holds the
// sleeper's worker spins at most (a policy that never moves the woken
// sleeper off that worker waits this long for it).
constexpr long timer_samples = 200;
constexpr std::int64_t timer_sleep_ns = 1'000'000;
constexpr std::int64_t timer_hold_max_ns = 20'000'000;
}  // namespace

void measure_usched(benchmark::State& state, const env& e) {
  if (e.cfg.workers < 2) throw std::runtime_error("timer_late needs --workers=2 or more");
  auto rt = make_runtime(e.cfg, e.cfg.workers);
  for (auto _ : state) {
    std::vector<std::int64_t> late(static_cast<std::size_t>(timer_samples));
    rt->run([&] {
      for (auto& l : late) {
        auto sleeper = usched::spawn([&l] {
          std::atomic<bool> woke{false};
          // Queued on this worker behind the sleeper, the holder starts when
          // the sleeper blocks and keeps the worker, and its timer, from then.
          auto holder = usched::spawn(on_worker(usched::this_fiber::worker_index()), [&woke] {
            const std::int64_t until = now_ns() + timer_hold_max_ns;
            while (!woke.load(std::memory_order_relaxed) && now_ns() < until) {
            }
          });
          const std::int64_t deadline = now_ns() + timer_sleep_ns;
          usched::this_fiber::sleep_until(std::chrono::steady_clock::time_point(std::chrono::nanoseconds(deadline)));
          l = now_ns() - deadline;
          woke.store(true, std::memory_order_relaxed);
          holder.join();
        });
        sleeper.join();
      }
    });
    std::sort(late.begin(), late.end());
    state.counters["p50_us"] = static_cast<double>(late[late.size() / 2]) / 1e3;
    state.counters["max_us"] = static_cast<double>(late.back()) / 1e3;
  }
}

}  // namespace micro::timer_late
