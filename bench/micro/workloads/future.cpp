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
  const int other = cross ? 1 : 0;
  const long ops = e.cfg.ops;
  auto rt = make_runtime(e.cfg, e.cfg.workers);
  for (auto _ : state) {
    const double ns = rt->run([other, ops] {
      future_pingpong<usched::promise<long>> pp(ops / 2);
      const std::int64_t t0 = now_ns();
      auto a = usched::spawn(on_worker(0), [&] { pp.pinger(); });
      auto b = usched::spawn(on_worker(other), [&] { pp.ponger(); });
      a.join();
      b.join();
      const std::int64_t t1 = now_ns();
      pp.check();
      return static_cast<double>(t1 - t0) / static_cast<double>(pp.hand_offs());
    });
    state.counters["ns"] = ns;
  }
}

void measure_boost(benchmark::State& state, const env& e, bool cross) {
  for (auto _ : state) {
    future_pingpong<boost::fibers::promise<long>> pp(e.cfg.ops / 2);
    const std::int64_t t0 = now_ns();
    if (cross) {
      e.pool->run_pair(1, [&] { pp.pinger(); }, [&] { pp.ponger(); });
    } else {
      auto f = e.pool->spawn([&] { pp.ponger(); });
      pp.pinger();
      f.join();
    }
    const std::int64_t t1 = now_ns();
    pp.check();
    state.counters["ns"] = static_cast<double>(t1 - t0) / static_cast<double>(pp.hand_offs());
  }
}

// std::promise/std::future between two threads pinned to CPUs 0 and 1 (both
// on CPU 0 for the one-worker row), which meet at a latch first so that
// neither starts before both are placed.
void measure_thread(benchmark::State& state, const env& e, bool cross) {
  const unsigned cpu_a = 0;
  const unsigned cpu_b = cross ? 1 : 0;
  for (auto _ : state) {
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
    const std::int64_t t1 = now_ns();
    pp.check();
    state.counters["ns"] = static_cast<double>(t1 - t0) / static_cast<double>(pp.hand_offs());
  }
}

}  // namespace micro::future
