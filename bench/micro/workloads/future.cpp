// future_same, future_cross: ping-pong through a fresh promise/future pair
// per one-way hand-off (task_api.hpp), on one worker or across two: ns per
// hand-off. Threads do a tenth of the hand-offs.
#include <future>
#include <latch>
#include <thread>

#include "../task_api.hpp"
#include "../workloads.hpp"

namespace micro::future {

void measure_usched(benchmark::State& state, const env& e, bool cross) {
  // The ponger's worker: the pinger's own, or the next.
  time_usched(state, e, [other = cross ? 1 : 0, ops = e.cfg.ops] {
    future_pingpong<usched::promise<long>> pp(ops / 2);
    const std::int64_t t0 = now_ns();
    auto a = usched::spawn(on_worker(0), [&] { pp.pinger(); });
    auto b = usched::spawn(on_worker(other), [&] { pp.ponger(); });
    a.join();
    b.join();
    return pp.ns_per_hand_off(now_ns() - t0);
  });
}

void measure_boost(benchmark::State& state, const env& e, bool cross) {
  time_ns(state, [&e, cross] {
    future_pingpong<boost::fibers::promise<long>> pp(e.cfg.ops / 2);
    const std::int64_t t0 = now_ns();
    if (cross) {
      e.pool->run_pair(1, [&] { pp.pinger(); }, [&] { pp.ponger(); });
    } else {
      auto f = e.pool->spawn([&] { pp.ponger(); });
      pp.pinger();
      f.join();
    }
    return pp.ns_per_hand_off(now_ns() - t0);
  });
}

// std::promise/std::future between two threads pinned to CPUs 0 and 1 (both
// on CPU 0 for the one-worker row), which meet at a latch first so that
// neither starts before both are placed.
void measure_thread(benchmark::State& state, const env& e, bool cross) {
  const unsigned cpu_a = 0;
  const unsigned cpu_b = cross ? 1 : 0;
  time_ns(state, [&e, cpu_a, cpu_b] {
    future_pingpong<std::promise<long>> pp(e.cfg.ops / thread_ops_divisor / 2);
    std::latch placed(2);
    std::int64_t t0 = 0;
    std::thread a([&] {
      pin_this_thread(cpu_a);
      placed.arrive_and_wait();
      t0 = now_ns();
      pp.pinger();
    });
    std::thread b([&] {
      pin_this_thread(cpu_b);
      placed.arrive_and_wait();
      pp.ponger();
    });
    a.join();
    b.join();
    return pp.ns_per_hand_off(now_ns() - t0);
  });
}

}  // namespace micro::future
