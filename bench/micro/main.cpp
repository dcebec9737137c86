// main.cpp: usched_micro, the micro benchmarks of what users pick a fiber runtime on, for
// one peer configuration per process (Google Benchmark; --benchmark_format=json
// for machines). usched_micro_compare runs every configuration side by side
// and prints the ratios.
//
//   usched_micro --peer=usched --workers=2 --policy=cfs
//   usched_micro --peer=boost-ws --workers=2
//   usched_micro --peer=tbb --workers=2
//
// Peers: usched, boost-ws / boost-ws-sleep (Boost.Fiber work_stealing,
// busy-polling / sleeping when idle), boost-shared (shared_work), tbb
// (oneTBB task_group in a task_arena of --workers threads: the fork-join
// workloads spawn_join, spawn_all and skynet only), thread (std::thread),
// context (raw Boost.Context resume: the switch floor).
//
// Workloads (workloads/<workload>.cpp, one measure_<peer>() per peer, each run
// once per benchmark iteration, reporting counters):
//   yield              two fibers on one worker yielding to each other: ns per switch
//   preempt_point      one fiber alone calling this_fiber::preempt_point() in a
//                      loop: ns per call (usched only)
//   spawn_join         1,000,000 fibers in batches of 1,000, spawned and joined
//                      from a fiber: ns per fiber, first run and warm run
//   spawn_join_thread  the same, spawned and joined from a non-fiber thread
//   spawn_all          --fibers / 2 fibers spawned with their handles kept,
//                      then joined: ns per fiber, peak RSS
//   live_rss           100,000 fibers alive at once (blocked): resident bytes per fiber
//   skynet             1,000,000 leaves of a 10-ary tree of fibers; sums travel
//                      up through join handles: total ms, result checked
//   wake_cv            a fiber blocked on a condition variable on worker 0 is
//   wake_chan          woken by a fiber on worker 1 (or blocked on a channel
//                      receive): wake-to-run ns, p50/p99/p99.9 over samples
//                      with random gaps (1-20 us) between wake-ups
//   mutex/N            N fibers increment a counter under a mutex: ns per lock+unlock
//   chan_same          channel ping-pong between two fibers on one worker
//   chan_cross         ... on two workers: ns per one-way hand-off
//   cacheline          (thread peer) one cache line bounced between two CPUs:
//                      ns one way, the floor of any cross-worker wake-up
//   fanout             one fiber spawns 262,144 tasks of 10 us each (a spin on
//                      the clock, so a task's length does not depend on what
//                      else the CPU runs) and joins them: total ms, and the
//                      efficiency, tasks x 10 us / workers over the total,
//                      of a warm run (ms_first: the first, which also maps
//                      and faults in 262,144 stacks); for scaling runs
//                      (usched_micro_compare --scaling)
//   timer_late         a 1 ms sleep on a worker held by a fiber that never
//                      yields: us late, p50 and max (two workers or more)
//   io_late            a read completed while a fiber that runs long (with
//                      preempt points) holds the reader's worker: us from
//                      the write to the reader running, p50 and max
//                      (--io=io_uring|epoll picks the backend)
//
// The task API's primitives (task_api.hpp; --ops=N sizes them, default
// 200,000; threads do a tenth of the hand-offs and pairs):
//   future_same        ping-pong through a fresh promise/future pair per
//   future_cross       one-way hand-off, on one worker / across two: ns per hand-off
//   semaphore          16 fibers take one of 4 permits of a counting
//                      semaphore, yield, give it back: ns per acquire/release pair
//   semaphore_cv       the same with a count under a mutex and a condition
//                      variable (Boost.Fiber has no semaphore)
//   shared_mutex       16 fibers, 95% lock_shared / 5% lock: ns per operation
//   barrier            8 fibers arrive and wait at a barrier: ns per phase
//   select             4 producers send on 4 channels, one consumer takes
//   select_one         every item by a select over the 4 (select), or the
//                      same producers on one channel and a plain recv
//                      (select_one): ns per item; neither Boost.Fiber nor
//                      std has a select
//
// This file is the thin part: the flags (into a config, handed to every
// workload; there is no global) and, for the chosen peer, the registration
// of each workload's measure_<peer>() with Google Benchmark.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <usched/usched.hpp>

#include "peers.hpp"
#include "workload.hpp"
#include "workloads.hpp"

namespace micro {
namespace {

// ---- registration ----------------------------------------------------------------

// A failed check (a lost fiber, a wrong sum) fails that benchmark only: the
// others still run and the JSON output stays complete.
template <class Fn>
void reg(const std::string& name, Fn fn) {
  benchmark::RegisterBenchmark(name.c_str(), [fn](benchmark::State& state) {
    try {
      fn(state);
    } catch (const std::exception& e) {
      state.SkipWithError(e.what());
    }
  })->Iterations(1)->Unit(benchmark::kMillisecond);
}

// reg() for a measure_<peer>(state, e, args...): `e` outlives the run.
template <class... Args>
void reg(const std::string& name, const env& e, void (*measure)(benchmark::State&, const env&, Args...),
         Args... args) {
  reg(name, [&e, measure, args...](benchmark::State& s) { measure(s, e, args...); });
}

void register_usched(const env& e) {
  const unsigned w = e.cfg.workers;
  reg("yield", e, yield::measure_usched);
  reg("yield_apart", e, yield_apart::measure_usched);
  reg("preempt_point", e, preempt_point::measure_usched);
  reg("spawn_join", e, spawn_join::measure_usched);
  reg("spawn_join_thread", e, spawn_join_thread::measure_usched);
  reg("live_rss", e, live_rss::measure_usched);
  reg("skynet", e, skynet::measure_usched);
  reg("fanout", e, fanout::measure_usched);
  if (w >= 2) reg("timer_late", e, timer_late::measure_usched);
  if (w >= 2) reg("io_late", e, io_late::measure_usched);
  for (long n : {2L, 16L, 1000L}) reg("mutex/" + std::to_string(n), e, mutex::measure_usched, n);
  reg("chan_same", e, chan::measure_usched, false);
  reg("future_same", e, future::measure_usched, false);
  reg("semaphore", e, semaphore::measure_usched);
  reg("semaphore_cv", e, semaphore_cv::measure_usched);
  reg("shared_mutex", e, shared_mutex::measure_usched);
  reg("barrier", e, barrier::measure_usched);
  reg("select", e, select::measure_usched, false);
  reg("select_one", e, select::measure_usched, true);
  if (w >= 2) {
    reg("wake_cv", e, wake_cv::measure_usched);
    reg("wake_chan", e, wake_chan::measure_usched);
    reg("chan_cross", e, chan::measure_usched, true);
    reg("future_cross", e, future::measure_usched, true);
  }
  // Last: the half million join states it frees stay in the allocator's
  // free lists, the process's RSS, and would be the peak of any row after.
  reg("spawn_all", e, spawn_all::measure_usched);
}

void register_boost(const env& e) {
  // Same-thread workloads only where no other thread can steal the fiber.
  if (e.cfg.workers == 1) {
    reg("yield", e, yield::measure_boost);
    reg("yield_apart", e, yield_apart::measure_boost);
    reg("chan_same", e, chan::measure_boost, false);
    reg("future_same", e, future::measure_boost, false);
  }
  // No semaphore and no shared_mutex: Boost.Fiber has neither; its row of
  // the semaphore table is the stand-in its users write (semaphore_cv).
  reg("semaphore_cv", e, semaphore_cv::measure_boost);
  reg("barrier", e, barrier::measure_boost);
  reg("spawn_join", e, spawn_join::measure_boost);
  reg("live_rss", e, live_rss::measure_boost);
  reg("skynet", e, skynet::measure_boost);
  reg("fanout", e, fanout::measure_boost);
  for (long n : {2L, 16L, 1000L}) reg("mutex/" + std::to_string(n), e, mutex::measure_boost, n);
  if (e.cfg.workers >= 2) {
    reg("wake_cv", e, wake_cv::measure_boost);
    reg("wake_chan", e, wake_chan::measure_boost);
    reg("chan_cross", e, chan::measure_boost, true);
    reg("future_cross", e, future::measure_boost, true);
  }
}

// oneTBB runs the fork-join workloads only, those usched's spawn and
// skynet targets are stated against: its tasks run to completion, so the
// other workloads (a yield, a blocked fiber woken) have no task form.
void register_tbb(const env& e) {
  reg("spawn_join", e, spawn_join::measure_tbb);
  reg("spawn_all", e, spawn_all::measure_tbb);
  reg("skynet", e, skynet::measure_tbb);
}

void register_thread(const env& e) {
  reg("yield", e, yield::measure_thread);
  reg("future_same", e, future::measure_thread, false);
  reg("future_cross", e, future::measure_thread, true);
  reg("semaphore", e, semaphore::measure_thread);
  reg("shared_mutex", e, shared_mutex::measure_thread);
  reg("barrier", e, barrier::measure_thread);
  reg("spawn_join", e, spawn_join::measure_thread);
  reg("wake_cv", e, wake_cv::measure_thread);
  reg("cacheline", e, cacheline::measure_thread);
  for (long n : {2L, 16L}) reg("mutex/" + std::to_string(n), e, mutex::measure_thread, n);
}

void register_context(const env& e) { reg("yield", e, yield::measure_context); }

// ---- flags ---------------------------------------------------------------------------

bool take_flag(const std::string& arg, const char* name, std::string& value) {
  const std::string prefix = std::string("--") + name + "=";
  if (arg.rfind(prefix, 0) != 0) return false;
  value = arg.substr(prefix.size());
  return true;
}

long parse_count(const char* flag, const std::string& v, long lo, long hi) {
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || n < lo || n > hi) {
    std::cerr << "usched_micro: --" << flag << "='" << v << "' is not valid; expected an integer in "
              << lo << ".." << hi << "\n";
    std::exit(2);
  }
  return n;
}

}  // namespace
}  // namespace micro

int main(int argc, char** argv) {
  using namespace micro;
  config cfg;
  // Our flags first; the rest goes to Google Benchmark.
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    std::string v;
    if (take_flag(a, "peer", v)) {
      cfg.peer = v;
    } else if (take_flag(a, "workers", v)) {
      cfg.workers = static_cast<unsigned>(parse_count("workers", v, 1, 1024));
    } else if (take_flag(a, "policy", v)) {
      // Checked here: the runtime's own error would name USCHED_POLICY.
      const std::vector<std::string> names = usched::policy_names();
      if (std::find(names.begin(), names.end(), v) == names.end()) {
        std::string list;
        for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
        std::cerr << "usched_micro: --policy='" << v
                  << "' is not a registered policy; choose one of: " << list << "\n";
        return 2;
      }
      cfg.policy = v;
    } else if (take_flag(a, "load-tracking", v)) {
      cfg.load_tracking = parse_count("load-tracking", v, 0, 1) != 0;
    } else if (take_flag(a, "spin-us", v)) {
      cfg.spin_us = parse_count("spin-us", v, 0, 10'000'000);
    } else if (take_flag(a, "io", v)) {
      if (v != "io_uring" && v != "epoll") {
        std::cerr << "usched_micro: --io='" << v << "' is not valid; expected io_uring or epoll\n";
        return 2;
      }
      cfg.io = v;
    } else if (take_flag(a, "samples", v)) {
      cfg.samples = parse_count("samples", v, 1, 100'000'000);
    } else if (take_flag(a, "fanout-tasks", v)) {
      cfg.fanout_tasks = parse_count("fanout-tasks", v, 1, 10'000'000);
    } else if (take_flag(a, "ops", v)) {
      cfg.ops = parse_count("ops", v, min_ops, 1'000'000'000);
    } else if (take_flag(a, "task-us", v)) {
      cfg.task_us = parse_count("task-us", v, 0, 1'000'000);
    } else if (take_flag(a, "fibers", v)) {
      cfg.fibers = parse_count("fibers", v, spawn_batch, 100'000'000);
      // skynet needs a power of ten, spawn_join a multiple of its batch.
      long p = 1;
      while (p < cfg.fibers) p *= 10;
      if (p != cfg.fibers || cfg.fibers < spawn_batch) {
        std::cerr << "usched_micro: --fibers='" << v << "' is not valid; expected a power of ten >= "
                  << spawn_batch << "\n";
        return 2;
      }
    } else {
      rest.push_back(argv[i]);
    }
  }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  if (benchmark::ReportUnrecognizedArguments(rest_argc, rest.data())) return 2;

  benchmark::AddCustomContext("peer", cfg.peer);
  benchmark::AddCustomContext("workers", std::to_string(cfg.workers));
  // The Boost.Fiber peers' threads, made once for the process; `e` refers to
  // them, and the registered benchmarks to `e`, until the run is over.
  std::unique_ptr<boost_pool> pool;
  env e;
  e.cfg = cfg;
  try {
    if (cfg.peer == "usched") {
      benchmark::AddCustomContext("policy", cfg.policy);
      make_runtime(cfg, 1);  // bad policy or USCHED_* values fail here, with their message
      register_usched(e);
    } else if (cfg.peer == "boost-ws" || cfg.peer == "boost-ws-sleep" || cfg.peer == "boost-shared") {
      const auto algo = cfg.peer == "boost-shared" ? boost_algo::shared_work : boost_algo::work_stealing;
      pool = std::make_unique<boost_pool>(algo, cfg.workers, cfg.peer == "boost-ws-sleep");
      e.pool = pool.get();
      register_boost(e);
    } else if (cfg.peer == "tbb") {
      register_tbb(e);
    } else if (cfg.peer == "thread") {
      register_thread(e);
    } else if (cfg.peer == "context") {
      register_context(e);
    } else {
      std::cerr << "usched_micro: --peer='" << cfg.peer
                << "' is not a peer; choose one of: usched, boost-ws, boost-ws-sleep, boost-shared, "
                   "tbb, thread, context\n";
      return 2;
    }
    benchmark::RunSpecifiedBenchmarks();
  } catch (const std::exception& ex) {
    std::cerr << "usched_micro: " << ex.what() << "\n";
    return 1;
  }
  pool.reset();
  benchmark::Shutdown();
  return 0;
}
