// peers.hpp: the runtimes the micro benchmarks compare, behind one shape.
//
// Every workload (workloads/<workload>.cpp) is written once per peer, as a
// measure_<peer>() with the workload's one signature and the same
// counters: usched (any policy, any worker count), Boost.Fiber
// (work_stealing or shared_work with as many threads as usched has
// workers, busy-polling or sleeping when idle), oneTBB for the fork-join
// workloads (stackless tasks in an arena of as many threads), plain
// std::thread where the workload makes sense for threads, and a raw
// Boost.Context resume for the switch floor.
//
// Boost.Fiber's work_stealing can be set up once per process (its scheduler
// array is initialised by a std::call_once), so each peer configuration runs
// in its own process: micro_compare.cpp starts one per configuration, and
// main.cpp makes the pool once and hands it to every workload (env::pool).
#pragma once

#include <boost/fiber/algo/shared_work.hpp>
#include <boost/fiber/algo/work_stealing.hpp>
#include <boost/fiber/all.hpp>

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace micro {

inline std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline void pause_once() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Busy-wait for `ns`: the "work" between two events of a latency benchmark.
// It keeps the caller's worker busy, as real work would.
inline void spin_for(std::int64_t ns) noexcept {
  const std::int64_t until = now_ns() + ns;
  while (now_ns() < until) pause_once();
}

// Resident set size now, in bytes (/proc/self/statm), and the process's
// high-water mark (getrusage).
inline std::size_t rss_now_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long size = 0, resident = 0;
  const int n = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE)) : 0;
}
inline double peak_rss_mib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}
// The peak of one benchmark in a process that ran others first: the kernel
// resets the high-water mark to the current RSS (clear_refs 5, Linux 4.0),
// and VmHWM reads it back.
inline void reset_peak_rss() {
  if (std::FILE* f = std::fopen("/proc/self/clear_refs", "w")) {
    std::fputs("5", f);
    std::fclose(f);
  }
}
inline double peak_rss_since_reset_mib() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  double kib = 0;
  while (std::fgets(line, sizeof line, f)) {
    if (std::sscanf(line, "VmHWM: %lf kB", &kib) == 1) break;
  }
  std::fclose(f);
  return kib / 1024.0;
}

// Pin the calling OS thread to one CPU (modulo the CPUs it may use).
inline void pin_this_thread(unsigned index) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  if (cpus.empty()) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpus[index % cpus.size()], &one);
  pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
}

// Simple order statistics of latency samples.
struct percentiles {
  double p50 = 0, p99 = 0, p999 = 0, max = 0;
};
inline percentiles percentiles_of(std::vector<std::int64_t>& v) {
  percentiles p;
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    auto i = static_cast<std::size_t>(q * static_cast<double>(v.size()));
    return static_cast<double>(v[std::min(i, v.size() - 1)]);
  };
  p.p50 = at(0.50);
  p.p99 = at(0.99);
  p.p999 = at(0.999);
  p.max = static_cast<double>(v.back());
  return p;
}

// ---- Boost.Fiber -------------------------------------------------------------

enum class boost_algo { work_stealing, shared_work };

// boost_pool: `threads` OS threads running Boost.Fiber with one scheduling
// algorithm; the calling (main) thread is thread 0. The others wait on a
// fiber condition variable, so their schedulers run stolen or shared fibers
// while they wait, and run a job on their own main context when handed one
// (a main context is never migrated: that is how a Boost.Fiber benchmark
// places a fiber on a chosen thread).
class boost_pool {
 public:
  // Boost.Fiber's default stack for these benchmarks: 8 KiB from its
  // fixedsize_stack (malloc), the configuration its own examples use for
  // many small fibers.
  static constexpr std::size_t stack_size = 8 * 1024;
  // The stack of spawn_roomy(): the semaphore_cv workload (16 fibers that
  // yield and wait on a condition variable) overran 8 KiB on one thread, a
  // crash in boost::fibers::mutex::lock() on a clobbered object, and ran
  // with 12 KiB. The task API's rows are about waits, not memory, so their
  // fibers get twice the default.
  static constexpr std::size_t roomy_stack_size = 16 * 1024;

  boost_pool(boost_algo algo, unsigned threads, bool sleep_when_idle)
      : algo_(algo), threads_(threads), sleep_(sleep_when_idle), jobs_(threads) {
    // work_stealing's constructor waits (a barrier) until every thread has
    // constructed its own: the helpers start first, the main thread joins them.
    for (unsigned i = 1; i < threads_; ++i) {
      helpers_.emplace_back([this, i] {
        pin_this_thread(i);
        install(i);
        std::unique_lock<boost::fibers::mutex> lk(m_);
        for (;;) {
          cv_.wait(lk, [&] { return stop_ || jobs_[i] != nullptr; });
          if (stop_) break;
          std::function<void()> job = std::move(jobs_[i]);
          jobs_[i] = nullptr;
          lk.unlock();
          job();
          lk.lock();
          ++done_;
          cv_.notify_all();
        }
      });
    }
    pin_this_thread(0);
    install(0);
    while (installed_.load() != threads_) std::this_thread::yield();
  }
  ~boost_pool() {
    {
      std::unique_lock<boost::fibers::mutex> lk(m_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : helpers_) t.join();
  }
  boost_pool(const boost_pool&) = delete;
  boost_pool& operator=(const boost_pool&) = delete;

  unsigned threads() const noexcept { return threads_; }

  // Run `a` on the main context of thread 0 (the caller) and `b` on the main
  // context of thread `other`, concurrently; return when both are done.
  void run_pair(unsigned other, const std::function<void()>& a, std::function<void()> b) {
    {
      std::unique_lock<boost::fibers::mutex> lk(m_);
      done_ = 0;
      jobs_[other] = std::move(b);
    }
    cv_.notify_all();
    a();
    std::unique_lock<boost::fibers::mutex> lk(m_);
    cv_.wait(lk, [&] { return done_ == 1; });
  }

  template <class Fn, class... Args>
  boost::fibers::fiber spawn(Fn&& fn, Args&&... args) {
    return boost::fibers::fiber(std::allocator_arg, boost::fibers::fixedsize_stack(stack_size),
                                std::forward<Fn>(fn), std::forward<Args>(args)...);
  }
  template <class Fn, class... Args>
  boost::fibers::fiber spawn_roomy(Fn&& fn, Args&&... args) {
    return boost::fibers::fiber(std::allocator_arg, boost::fibers::fixedsize_stack(roomy_stack_size),
                                std::forward<Fn>(fn), std::forward<Args>(args)...);
  }

 private:
  void install(unsigned) {
    if (algo_ == boost_algo::work_stealing) {
      boost::fibers::use_scheduling_algorithm<boost::fibers::algo::work_stealing>(threads_, sleep_);
    } else {
      boost::fibers::use_scheduling_algorithm<boost::fibers::algo::shared_work>(sleep_);
    }
    installed_.fetch_add(1);
  }

  boost_algo algo_;
  unsigned threads_;
  bool sleep_;
  std::atomic<unsigned> installed_{0};
  boost::fibers::mutex m_;
  boost::fibers::condition_variable cv_;
  bool stop_ = false;
  unsigned done_ = 0;
  std::vector<std::function<void()>> jobs_;
  std::vector<std::thread> helpers_;
};

// ---- oneTBB ------------------------------------------------------------------

// tbb_arena: what a oneTBB user writes to run a parallel region on
// `threads` threads: a global_control that caps the process's parallelism
// at `threads` (so the scheduler keeps no more worker threads than that),
// and a task_arena of that concurrency, which execute() joins. The caller
// takes one of the arena's slots (a task_arena reserves one for the thread
// that enters it), so `threads` counts it, as usched's --workers counts the
// worker a run() fiber occupies. A task_group made inside execute() belongs
// to the arena; its wait() runs the group's tasks (and steals others) on
// the waiting thread rather than blocking it. oneTBB's threads are left
// unpinned, its default: pinning takes a task_scheduler_observer, which a
// user of task_group rarely writes.
//
// Requires threads >= 1; throws std::runtime_error when the process's
// parallelism is capped below `threads` all the same (the lowest of the
// live global_controls wins).
class tbb_arena {
 public:
  explicit tbb_arena(unsigned threads)
      : cap_(oneapi::tbb::global_control::max_allowed_parallelism, threads),
        arena_(static_cast<int>(threads)) {
    arena_.initialize();
    const std::size_t cap =
        oneapi::tbb::global_control::active_value(oneapi::tbb::global_control::max_allowed_parallelism);
    if (cap != threads) {
      throw std::runtime_error("oneTBB: parallelism capped at " + std::to_string(cap) + ", not the " +
                               std::to_string(threads) + " threads asked for");
    }
  }
  tbb_arena(const tbb_arena&) = delete;
  tbb_arena& operator=(const tbb_arena&) = delete;

  // execute() runs fn() on the calling thread inside the arena and returns
  // what it returns; exceptions propagate to the caller.
  template <class Fn>
  auto execute(Fn&& fn) {
    return arena_.execute(std::forward<Fn>(fn));
  }

 private:
  oneapi::tbb::global_control cap_;
  oneapi::tbb::task_arena arena_;
};

}  // namespace micro
