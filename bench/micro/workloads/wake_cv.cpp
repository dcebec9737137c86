// wake_cv: a fiber blocked on a condition variable on worker 0 is woken by a
// fiber on worker 1 after a random gap (1-20 us): wake-to-run ns,
// p50/p99/p99.9/max over --samples wake-ups (wake_protocol.hpp).
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "../workloads.hpp"
#include "wake_protocol.hpp"

namespace micro::wake_cv {

void measure_usched(benchmark::State& state, const env& e) {
  time_wake_usched<cv_wake<usched::mutex, usched::condition_variable>>(state, e);
}

void measure_boost(benchmark::State& state, const env& e) {
  time_wake_boost<cv_wake<boost::fibers::mutex, boost::fibers::condition_variable>>(state, e);
}

void measure_thread(benchmark::State& state, const env& e) {
  const auto gaps = make_gaps(e.cfg.samples);
  for (auto _ : state) {
    std::vector<std::int64_t> lat(gaps.size());
    cv_wake<std::mutex, std::condition_variable> s;
    std::thread w([&] {
      pin_this_thread(0);
      s.waiter(lat);
    });
    std::thread k([&] {
      pin_this_thread(1);
      s.waker(gaps);
    });
    w.join();
    k.join();
    report_latency(state, lat);
  }
}

}  // namespace micro::wake_cv
