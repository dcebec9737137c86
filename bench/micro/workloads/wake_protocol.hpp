// wake_protocol.hpp: the wake-up protocol of wake_cv and wake_chan, shared
// by every peer, and their samples: random gaps between wake-ups, the same
// sequence for every peer, and the percentiles reported.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <random>
#include <vector>

#include "../workload.hpp"

namespace micro {

inline constexpr std::int64_t gap_min_ns = 1'000;
inline constexpr std::int64_t gap_max_ns = 20'000;

// make_gaps() is `n` gaps drawn from one fixed seed.
inline std::vector<std::int64_t> make_gaps(long n) {
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<std::int64_t> d(gap_min_ns, gap_max_ns);
  std::vector<std::int64_t> g(static_cast<std::size_t>(n));
  for (auto& x : g) x = d(rng);
  return g;
}

inline void report_latency(benchmark::State& state, std::vector<std::int64_t>& lat) {
  const percentiles p = percentiles_of(lat);
  state.counters["p50_ns"] = p.p50;
  state.counters["p99_ns"] = p.p99;
  state.counters["p999_ns"] = p.p999;
  state.counters["max_ns"] = p.max;
}

// The waiter announces it is about to wait (`armed`); the waker sees that,
// lets a random gap pass, then stamps the time and wakes it; the waiter
// stamps the time it runs again. Taking the mutex before notifying
// guarantees the waiter is really waiting.
template <class Mutex, class CondVar>
struct cv_wake_state {
  Mutex m;
  CondVar cv;
  bool signaled = false;
  std::atomic<bool> armed{false};
  std::int64_t t0 = 0;
};

template <class Mutex, class CondVar>
void cv_waiter(cv_wake_state<Mutex, CondVar>& s, std::vector<std::int64_t>& lat) {
  for (auto& l : lat) {
    std::unique_lock<Mutex> lk(s.m);
    s.armed.store(true, std::memory_order_release);
    s.cv.wait(lk, [&] { return s.signaled; });
    l = now_ns() - s.t0;
    s.signaled = false;
  }
}

template <class Mutex, class CondVar>
void cv_waker(cv_wake_state<Mutex, CondVar>& s, const std::vector<std::int64_t>& gaps) {
  for (std::int64_t gap : gaps) {
    while (!s.armed.load(std::memory_order_acquire)) pause_once();
    s.armed.store(false, std::memory_order_relaxed);
    spin_for(gap);
    std::lock_guard<Mutex> lk(s.m);
    s.signaled = true;
    s.t0 = now_ns();
    s.cv.notify_one();
  }
}

// Channel variant: the waiter blocks in a receive; the value is the stamp.
// The gap (at least 1 us) lets the waiter reach its receive after arming.
template <class Recv>
void chan_waiter(std::atomic<bool>& armed, std::vector<std::int64_t>& lat, Recv recv) {
  for (auto& l : lat) {
    armed.store(true, std::memory_order_release);
    const std::int64_t t0 = recv();
    l = now_ns() - t0;
  }
}
template <class Send>
void chan_waker(std::atomic<bool>& armed, const std::vector<std::int64_t>& gaps, Send send) {
  for (std::int64_t gap : gaps) {
    while (!armed.load(std::memory_order_acquire)) pause_once();
    armed.store(false, std::memory_order_relaxed);
    spin_for(gap);
    send(now_ns());
  }
}

}  // namespace micro
