// workload.hpp: what every workload of usched_micro is written against: the
// process's configuration, handed to each measure_<peer>() (there is no
// global), and the helpers more than one workload uses.
//
// A workload lives in workloads/<workload>.cpp, one measure_<peer>() per
// peer that runs it, all with the signature workloads.hpp declares for that
// workload; main.cpp parses the flags into a config and registers each
// measure_<peer>() of the chosen peer with Google Benchmark.
#pragma once

#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <usched/usched.hpp>

#include "peers.hpp"

namespace micro {

// config is one usched_micro process's settings: its flags, with their
// defaults.
struct config {
  std::string peer = "usched";
  unsigned workers = 2;
  std::string policy = "cfs";
  bool load_tracking = true;
  long spin_us = -1;  // usched idle spin; -1: the runtime's default
  std::string io;     // usched I/O backend (io_uring, epoll); empty: USCHED_IO or auto
  long samples = 100'000;
  long fibers = 1'000'000;
  long fanout_tasks = 262'144;
  long task_us = 10;
  long ops = 200'000;  // the task API's benchmarks: hand-offs, pairs, operations
};

// env is what every measure_<peer>() is handed: the configuration and, for
// the Boost.Fiber peers, the pool of threads they run on, which exists once
// per process (peers.hpp); null for the other peers.
struct env {
  config cfg;
  boost_pool* pool = nullptr;
};

// Switches a yield benchmark makes, the two fibers together.
constexpr int yields_total = 2'000'000;
// Fibers spawn_join spawns before it joins them; --fibers is a multiple.
constexpr long spawn_batch = 1'000;
// The smallest --ops: each side's share of it, a thread's tenth and a barrier's
// phases are then still at least one each (task_api.hpp).
constexpr long min_ops = 1'000;

// ---- usched ----------------------------------------------------------------------

// make_runtime() is a runtime of `workers` workers for the configured
// policy, load tracking and spin, the rest from USCHED_* as an embedder's
// would be. Throws usched::config_error for a setting it cannot honour.
inline std::unique_ptr<usched::runtime> make_runtime(const config& cfg, unsigned workers) {
  usched::options o = usched::options::from_env();
  o.policy = cfg.policy;
  o.workers = workers;
  o.load_tracking = cfg.load_tracking;
  if (cfg.spin_us >= 0) o.spin = std::chrono::microseconds(cfg.spin_us);
  if (cfg.io == "io_uring") o.io = usched::options::io_backend::io_uring;
  if (cfg.io == "epoll") o.io = usched::options::io_backend::epoll;
  return std::make_unique<usched::runtime>(o);
}

inline usched::spawn_options on_worker(int w) {
  usched::spawn_options so;
  so.pin = w;
  return so;
}

// ---- the timing loops -------------------------------------------------------------

// time_ns() is the timing loop of a workload that reports ns per operation:
// each benchmark iteration runs body() once on the calling thread and sets
// the counter "ns" to what it returns. For Boost.Fiber that thread is the
// pool's thread 0, which spawns the fibers; for threads, the one that
// starts and joins them.
template <class Body>
void time_ns(benchmark::State& state, Body body) {
  for (auto _ : state) state.counters["ns"] = body();
}

// time_usched() is the same for usched: one runtime from e.cfg, made before
// the first iteration and kept across them, and body() run on it as a
// fiber each iteration.
template <class Body>
void time_usched(benchmark::State& state, const env& e, Body body) {
  auto rt = make_runtime(e.cfg, e.cfg.workers);
  time_ns(state, [&] { return rt->run(body); });
}

// ---- shared by several workloads -------------------------------------------------

// spawn_join_run() spawns `n` with spawn(count) in batches of spawn_batch,
// joining each batch before the next: ns per spawned one. Throws unless
// every one ran.
template <class Spawn, class Join>
double spawn_join_run(long n, Spawn spawn, Join join) {
  using handle = decltype(spawn(std::declval<std::atomic<long>&>()));
  std::vector<handle> hs;
  hs.reserve(spawn_batch);
  std::atomic<long> count{0};
  const std::int64_t t0 = now_ns();
  for (long done = 0; done < n; done += spawn_batch) {
    for (long i = 0; i < spawn_batch; ++i) hs.push_back(spawn(count));
    for (auto& h : hs) join(h);
    hs.clear();
  }
  const std::int64_t t1 = now_ns();
  if (count.load() != n) throw std::runtime_error("spawn_join: fibers lost");
  return static_cast<double>(t1 - t0) / static_cast<double>(n);
}

// yield_pair_usched(), yield_pair_boost(): the yield benchmarks' two
// fibers, running a() and b(), yields_total switches between them in all,
// on usched's worker 0 (call it from a fiber of the runtime) or on
// Boost.Fiber's thread 0 (with one thread, where no other can steal them):
// ns per switch, from when both are queued to when both are done.
template <class A, class B>
double yield_pair_usched(A a, B b) {
  auto fa = usched::spawn(on_worker(0), std::move(a));
  auto fb = usched::spawn(on_worker(0), std::move(b));
  // Both are queued on worker 0 before either runs when this fiber is
  // elsewhere; time from here to both done covers every switch.
  const std::int64_t t0 = now_ns();
  fa.join();
  fb.join();
  return static_cast<double>(now_ns() - t0) / yields_total;
}
template <class A, class B>
double yield_pair_boost(boost_pool& pool, A a, B b) {
  auto fa = pool.spawn(std::move(a));
  auto fb = pool.spawn(std::move(b));
  const std::int64_t t0 = now_ns();
  fa.join();
  fb.join();
  return static_cast<double>(now_ns() - t0) / yields_total;
}

// sides_on<Start> runs the sides of a workload that starts a few fibers
// (threads) and times them from the first start to the last join (the
// task API's, task_api.hpp, and mutex/N). Called as sides(n, side), it
// starts side(i) for i in [0, n), each on a fiber (thread) of its own that
// start(fn) makes and returns the handle of, joins them in start order and
// returns the ns in between. The peers' are below.
template <class Start>
struct sides_on {
  Start start;

  template <class Side>
  double operator()(long n, Side side) const {
    using handle = decltype(start([] {}));
    std::vector<handle> hs;
    hs.reserve(static_cast<std::size_t>(n));
    const std::int64_t t0 = now_ns();
    for (long i = 0; i < n; ++i) hs.push_back(start([&side, i] { side(i); }));
    for (auto& h : hs) h.join();
    return static_cast<double>(now_ns() - t0);
  }
};
template <class Start>
sides_on(Start) -> sides_on<Start>;

// usched's: fibers spawned anywhere; call it from a fiber of the runtime.
inline auto usched_sides() {
  return sides_on{[](auto fn) { return usched::spawn(std::move(fn)); }};
}
// Boost.Fiber's: fibers of `pool`, on its default stacks, or on the roomy
// ones, which the task API's rows take (peers.hpp).
inline auto boost_sides(boost_pool& pool) {
  return sides_on{[&pool](auto fn) { return pool.spawn(std::move(fn)); }};
}
inline auto boost_roomy_sides(boost_pool& pool) {
  return sides_on{[&pool](auto fn) { return pool.spawn_roomy(std::move(fn)); }};
}
// Threads' (thread creation is a few tens of microseconds, small beside
// the runs here).
inline auto thread_sides() {
  return sides_on{[](auto fn) { return std::thread(std::move(fn)); }};
}

}  // namespace micro
