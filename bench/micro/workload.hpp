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
  return std::make_unique<usched::runtime>(o);
}

inline usched::spawn_options on_worker(int w) {
  usched::spawn_options so;
  so.pin = w;
  return so;
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

// Spawns `n` fibers running side(i) anywhere and joins them: ns from the
// first spawn to the last join.
template <class Side>
double us_sides(long n, Side side) {
  std::vector<usched::join_handle<void>> hs;
  hs.reserve(static_cast<std::size_t>(n));
  const std::int64_t t0 = now_ns();
  for (long i = 0; i < n; ++i) hs.push_back(usched::spawn([&side, i] { side(i); }));
  for (auto& h : hs) h.join();
  return static_cast<double>(now_ns() - t0);
}

// The same on Boost.Fiber. Their stacks are the roomy ones (peers.hpp).
template <class Side>
double bf_sides(boost_pool& pool, long n, Side side) {
  std::vector<boost::fibers::fiber> fs;
  fs.reserve(static_cast<std::size_t>(n));
  const std::int64_t t0 = now_ns();
  for (long i = 0; i < n; ++i) fs.push_back(pool.spawn_roomy([&side, i] { side(i); }));
  for (auto& f : fs) f.join();
  return static_cast<double>(now_ns() - t0);
}

// Starts `n` threads running side(i) and joins them: ns from the first
// start to the last join (thread creation is a few tens of microseconds,
// small beside the runs here).
template <class Side>
double th_sides(long n, Side side) {
  std::vector<std::thread> ts;
  ts.reserve(static_cast<std::size_t>(n));
  const std::int64_t t0 = now_ns();
  for (long i = 0; i < n; ++i) ts.emplace_back([&side, i] { side(i); });
  for (auto& t : ts) t.join();
  return static_cast<double>(now_ns() - t0);
}

}  // namespace micro
