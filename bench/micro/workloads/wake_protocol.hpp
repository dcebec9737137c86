// wake_protocol.hpp: the wake-up protocol of wake_cv and wake_chan, shared
// by every peer, their samples (random gaps between wake-ups, the same
// sequence for every peer) and the percentiles reported, and the timing
// loops that run a workload's two sides on a peer.
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

// The drivers of both workloads: per benchmark iteration a fresh `Sides`
// (cv_wake below, or wake_chan's), whose waiter(lat) runs on worker
// (thread) 0 and whose waker(gaps) on worker (thread) 1, then the
// percentiles of lat. On usched the sides are made on the runtime, by the
// fiber that spawns them.
template <class Sides>
void time_wake_usched(benchmark::State& state, const env& e) {
  auto rt = make_runtime(e.cfg, e.cfg.workers);
  const auto gaps = make_gaps(e.cfg.samples);
  for (auto _ : state) {
    std::vector<std::int64_t> lat(gaps.size());
    rt->run([&] {
      Sides s;
      auto w = usched::spawn(on_worker(0), [&] { s.waiter(lat); });
      auto k = usched::spawn(on_worker(1), [&] { s.waker(gaps); });
      w.join();
      k.join();
    });
    report_latency(state, lat);
  }
}
template <class Sides>
void time_wake_boost(benchmark::State& state, const env& e) {
  const auto gaps = make_gaps(e.cfg.samples);
  for (auto _ : state) {
    std::vector<std::int64_t> lat(gaps.size());
    Sides s;
    e.pool->run_pair(1, [&] { s.waiter(lat); }, [&] { s.waker(gaps); });
    report_latency(state, lat);
  }
}

// cv_wake: wake_cv's sides. The waiter announces it is about to wait
// (`armed`); the waker sees that, lets a random gap pass, then stamps the
// time and wakes it; the waiter stamps the time it runs again. Taking the
// mutex before notifying guarantees the waiter is really waiting.
template <class Mutex, class CondVar>
struct cv_wake {
  Mutex m;
  CondVar cv;
  bool signaled = false;
  std::atomic<bool> armed{false};
  std::int64_t t0 = 0;

  void waiter(std::vector<std::int64_t>& lat) {
    for (auto& l : lat) {
      std::unique_lock<Mutex> lk(m);
      armed.store(true, std::memory_order_release);
      cv.wait(lk, [&] { return signaled; });
      l = now_ns() - t0;
      signaled = false;
    }
  }

  void waker(const std::vector<std::int64_t>& gaps) {
    for (std::int64_t gap : gaps) {
      while (!armed.load(std::memory_order_acquire)) pause_once();
      armed.store(false, std::memory_order_relaxed);
      spin_for(gap);
      std::lock_guard<Mutex> lk(m);
      signaled = true;
      t0 = now_ns();
      cv.notify_one();
    }
  }
};

// The channel variant, for wake_chan's sides: the waiter blocks in a
// receive; the value is the stamp. The gap (at least 1 us) lets the waiter
// reach its receive after arming.
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
