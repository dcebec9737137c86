// usched_micro: micro benchmarks of what users pick a fiber runtime on, for
// one peer configuration per process (Google Benchmark; --benchmark_format=json
// for machines). usched_micro_compare runs every configuration side by side
// and prints the ratios.
//
//   usched_micro --peer=usched --workers=2 --policy=cfs
//   usched_micro --peer=boost-ws --workers=2
//
// Peers: usched, boost-ws / boost-ws-sleep (Boost.Fiber work_stealing,
// busy-polling / sleeping when idle), boost-shared (shared_work), thread
// (std::thread), context (raw Boost.Context resume: the switch floor).
//
// Workloads (each runs once per benchmark iteration and reports counters):
//   yield              two fibers on one worker yielding to each other: ns per switch
//   spawn_join         1,000,000 fibers in batches of 1,000, spawned and joined
//                      from a fiber: ns per fiber, first run and warm run
//   spawn_join_thread  the same, spawned and joined from a non-fiber thread
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
#include <algorithm>
#include <benchmark/benchmark.h>

#include <boost/context/fiber.hpp>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <latch>
#include <memory>
#include <optional>
#include <mutex>
#include <random>
#include <shared_mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <usched/usched.hpp>

#include "peers.hpp"
#include "task_api.hpp"

namespace micro {
namespace {

// ---- configuration -----------------------------------------------------------

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

config cfg;

constexpr int yields_total = 2'000'000;
constexpr long spawn_batch = 1'000;
constexpr long live_fibers = 100'000;
constexpr long mutex_ops = 1'000'000;
constexpr long pingpong_round_trips = 200'000;
constexpr std::int64_t gap_min_ns = 1'000;
constexpr std::int64_t gap_max_ns = 20'000;
// timer_late: sleeps measured, how long each is, and how long the fiber that
// holds the sleeper's worker spins at most (a policy that never moves the
// woken sleeper off that worker waits this long for it).
constexpr long timer_samples = 200;
constexpr std::int64_t timer_sleep_ns = 1'000'000;
constexpr std::int64_t timer_hold_max_ns = 20'000'000;
// The smallest --ops: each side's share of it, a thread's tenth and a barrier's
// phases are then still at least one each (task_api.hpp).
constexpr long min_ops = 1'000;

// Random gaps between wake-ups, the same sequence for every peer.
std::vector<std::int64_t> make_gaps(long n) {
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<std::int64_t> d(gap_min_ns, gap_max_ns);
  std::vector<std::int64_t> g(static_cast<std::size_t>(n));
  for (auto& x : g) x = d(rng);
  return g;
}

void report_latency(benchmark::State& state, std::vector<std::int64_t>& lat) {
  const percentiles p = percentiles_of(lat);
  state.counters["p50_ns"] = p.p50;
  state.counters["p99_ns"] = p.p99;
  state.counters["p999_ns"] = p.p999;
  state.counters["max_ns"] = p.max;
}

// The fan-out: spawn every task, then join them in spawn order. Returns ms
// and checks that every task ran exactly once.
template <class Spawn, class Join>
double fanout_run(Spawn spawn, Join join) {
  using handle = decltype(spawn(std::declval<std::atomic<long>&>(), std::int64_t{}));
  const auto n = static_cast<std::size_t>(cfg.fanout_tasks);
  const std::int64_t task_ns = cfg.task_us * 1000;
  std::vector<handle> hs;
  hs.reserve(n);
  std::atomic<long> ran{0};
  const std::int64_t t0 = now_ns();
  for (std::size_t i = 0; i < n; ++i) hs.push_back(spawn(ran, task_ns));
  for (auto& h : hs) join(h);
  const std::int64_t t1 = now_ns();
  if (ran.load() != cfg.fanout_tasks) throw std::runtime_error("fanout: tasks lost or run twice");
  return static_cast<double>(t1 - t0) / 1e6;
}

void report_fanout(benchmark::State& state, double ms_first, double ms) {
  state.counters["ms_first"] = ms_first;
  state.counters["ms"] = ms;
  const double ideal_ms =
      static_cast<double>(cfg.fanout_tasks) * static_cast<double>(cfg.task_us) / 1000.0 / cfg.workers;
  state.counters["efficiency"] = ms > 0 ? ideal_ms / ms : 0;
}

std::uint64_t skynet_expected(long leaves) {
  const auto n = static_cast<std::uint64_t>(leaves);
  return n * (n - 1) / 2;
}

// ---- usched --------------------------------------------------------------------

std::unique_ptr<usched::runtime> make_runtime(unsigned workers) {
  usched::options o = usched::options::from_env();
  o.policy = cfg.policy;
  o.workers = workers;
  o.load_tracking = cfg.load_tracking;
  if (cfg.spin_us >= 0) o.spin = std::chrono::microseconds(cfg.spin_us);
  return std::make_unique<usched::runtime>(o);
}

usched::spawn_options on_worker(int w) {
  usched::spawn_options so;
  so.pin = w;
  return so;
}

void us_yield(benchmark::State& state) {
  auto rt = make_runtime(cfg.workers);
  for (auto _ : state) {
    const double ns = rt->run([] {
      // Both fibers run the same loop, so the return out of each switch goes
      // where the branch predictor expects (docs/performance.md, yield).
      auto body = [] {
        for (int i = 0; i < yields_total / 2; ++i) usched::this_fiber::yield();
      };
      auto a = usched::spawn(on_worker(0), body);
      auto b = usched::spawn(on_worker(0), body);
      // Both are queued on worker 0 before either runs when this fiber is
      // elsewhere; time from here to both done covers every switch.
      const std::int64_t t0 = now_ns();
      a.join();
      b.join();
      return static_cast<double>(now_ns() - t0);
    });
    state.counters["ns"] = ns / yields_total;
  }
}

// yield_apart: the same, but the two fibers yield from different loops. The
// return out of each switch then lands in other code than the return
// address the predictor holds from the fiber that switched away: one
// mispredicted return per switch, for any runtime whose yield is a call.
void us_yield_apart(benchmark::State& state) {
  auto rt = make_runtime(cfg.workers);
  for (auto _ : state) {
    const double ns = rt->run([] {
      auto a = usched::spawn(on_worker(0), [] {
        for (int i = 0; i < yields_total / 2; ++i) usched::this_fiber::yield();
      });
      auto b = usched::spawn(on_worker(0), [] {
        for (int i = yields_total / 2; i > 0; --i) usched::this_fiber::yield();
      });
      const std::int64_t t0 = now_ns();
      a.join();
      b.join();
      return static_cast<double>(now_ns() - t0);
    });
    state.counters["ns"] = ns / yields_total;
  }
}

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

auto us_spawn = [](std::atomic<long>& c) {
  return usched::spawn([&c] { c.fetch_add(1, std::memory_order_relaxed); });
};
auto us_join = [](usched::join_handle<void>& h) { h.join(); };

void us_spawn_join(benchmark::State& state) {
  auto rt = make_runtime(cfg.workers);
  for (auto _ : state) {
    const double first = rt->run([] { return spawn_join_run(cfg.fibers, us_spawn, us_join); });
    const double warm = rt->run([] { return spawn_join_run(cfg.fibers, us_spawn, us_join); });
    state.counters["ns_first"] = first;
    state.counters["ns"] = warm;
    state.counters["peak_rss_mib"] = peak_rss_mib();
  }
}

void us_spawn_join_thread(benchmark::State& state) {
  auto rt = make_runtime(cfg.workers);
  auto spawn = [&rt](std::atomic<long>& c) {
    return rt->spawn([&c] { c.fetch_add(1, std::memory_order_relaxed); });
  };
  for (auto _ : state) {
    const double first = spawn_join_run(cfg.fibers, spawn, us_join);
    const double warm = spawn_join_run(cfg.fibers, spawn, us_join);
    state.counters["ns_first"] = first;
    state.counters["ns"] = warm;
  }
}

void us_live_rss(benchmark::State& state) {
  auto rt = make_runtime(cfg.workers);
  for (auto _ : state) {
    const double per_fiber = rt->run([] {
      usched::wait_group started;
      usched::channel<int> release(0);
      const std::size_t before = rss_now_bytes();
      std::vector<usched::join_handle<void>> hs;
      hs.reserve(live_fibers);
      started.add(live_fibers);
      for (long i = 0; i < live_fibers; ++i) {
        hs.push_back(usched::spawn([&] {
          started.done();
          (void)release.recv();
        }));
      }
      started.wait();
      const std::size_t during = rss_now_bytes();
      release.close();
      for (auto& h : hs) h.join();
      return (static_cast<double>(during) - static_cast<double>(before)) / live_fibers;
    });
    state.counters["bytes_per_fiber"] = per_fiber;
    state.counters["stack_bytes"] = static_cast<double>(rt->config().stack_size);
  }
}

std::uint64_t us_skynet(std::uint64_t num, std::uint64_t size) {
  if (size == 1) return num;
  const std::uint64_t child = size / 10;
  usched::join_handle<std::uint64_t> h[10];
  for (std::uint64_t i = 0; i < 10; ++i) h[i] = usched::spawn(us_skynet, num + i * child, child);
  std::uint64_t sum = 0;
  for (auto& x : h) sum += x.join();
  return sum;
}

void us_skynet_bm(benchmark::State& state) {
  auto rt = make_runtime(cfg.workers);
  for (auto _ : state) {
    reset_peak_rss();
    const std::int64_t t0 = now_ns();
    const std::uint64_t sum = rt->run([] { return us_skynet(0, static_cast<std::uint64_t>(cfg.fibers)); });
    const std::int64_t t1 = now_ns();
    if (sum != skynet_expected(cfg.fibers)) throw std::runtime_error("skynet: wrong sum");
    state.counters["ms"] = static_cast<double>(t1 - t0) / 1e6;
    state.counters["peak_rss_mib"] = peak_rss_since_reset_mib();
  }
}

// The wake-up protocol, shared by every peer: the waiter announces it is
// about to wait (`armed`); the waker sees that, lets a random gap pass, then
// stamps the time and wakes it; the waiter stamps the time it runs again.
// Taking the mutex before notifying guarantees the waiter is really waiting.
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

void us_wake_cv(benchmark::State& state) {
  auto rt = make_runtime(cfg.workers);
  const auto gaps = make_gaps(cfg.samples);
  for (auto _ : state) {
    std::vector<std::int64_t> lat(gaps.size());
    rt->run([&] {
      cv_wake_state<usched::mutex, usched::condition_variable> s;
      auto w = usched::spawn(on_worker(0), [&] { cv_waiter(s, lat); });
      auto k = usched::spawn(on_worker(1), [&] { cv_waker(s, gaps); });
      w.join();
      k.join();
    });
    report_latency(state, lat);
  }
}

// timer_late: a fiber sleeps 1 ms on a worker that a fiber which never
// yields holds until the sleeper has run again (at most 20 ms). Lateness is
// when the sleeper runs minus its deadline: the timer must be fired by
// another worker, and the woken fiber run there (or pulled there) by the
// policy. p50 and max over timer_samples sleeps, in microseconds.
void us_timer_late(benchmark::State& state) {
  if (cfg.workers < 2) throw std::runtime_error("timer_late needs --workers=2 or more");
  auto rt = make_runtime(cfg.workers);
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

void us_wake_chan(benchmark::State& state) {
  auto rt = make_runtime(cfg.workers);
  const auto gaps = make_gaps(cfg.samples);
  for (auto _ : state) {
    std::vector<std::int64_t> lat(gaps.size());
    rt->run([&] {
      usched::channel<std::int64_t> ch(0);
      std::atomic<bool> armed{false};
      auto w = usched::spawn(on_worker(0), [&] { chan_waiter(armed, lat, [&] { return *ch.recv(); }); });
      auto k = usched::spawn(on_worker(1), [&] { chan_waker(armed, gaps, [&](std::int64_t v) { ch.send(v); }); });
      w.join();
      k.join();
    });
    report_latency(state, lat);
  }
}

void us_mutex(benchmark::State& state, long n) {
  auto rt = make_runtime(cfg.workers);
  for (auto _ : state) {
    const double ns = rt->run([n] {
      usched::mutex m;
      long counter = 0;
      const long per = mutex_ops / n;
      std::vector<usched::join_handle<void>> hs;
      hs.reserve(static_cast<std::size_t>(n));
      const std::int64_t t0 = now_ns();
      for (long i = 0; i < n; ++i) {
        hs.push_back(usched::spawn([&] {
          for (long k = 0; k < per; ++k) {
            std::lock_guard<usched::mutex> g(m);
            ++counter;
          }
        }));
      }
      for (auto& h : hs) h.join();
      const std::int64_t t1 = now_ns();
      if (counter != per * n) throw std::runtime_error("mutex: lost increments");
      return static_cast<double>(t1 - t0) / static_cast<double>(per * n);
    });
    state.counters["ns"] = ns;
  }
}

void us_chan(benchmark::State& state, int other) {
  auto rt = make_runtime(cfg.workers);
  for (auto _ : state) {
    const double ns = rt->run([other] {
      usched::channel<long> ping(0), pong(0);
      const std::int64_t t0 = now_ns();
      auto a = usched::spawn(on_worker(0), [&] {
        for (long i = 0; i < pingpong_round_trips; ++i) {
          ping.send(i);
          (void)pong.recv();
        }
      });
      auto b = usched::spawn(on_worker(other), [&] {
        for (long i = 0; i < pingpong_round_trips; ++i) pong.send(*ping.recv());
      });
      a.join();
      b.join();
      return static_cast<double>(now_ns() - t0) / (2.0 * pingpong_round_trips);
    });
    state.counters["ns"] = ns;
  }
}

// The task API's primitives (task_api.hpp). `other` is the ponger's
// worker: 0 for one worker, 1 across two.
void us_future(benchmark::State& state, int other) {
  auto rt = make_runtime(cfg.workers);
  for (auto _ : state) {
    const double ns = rt->run([other] {
      future_pingpong<usched::promise<long>> pp(cfg.ops / 2);
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

void us_semaphore(benchmark::State& state) {
  auto rt = make_runtime(cfg.workers);
  for (auto _ : state) {
    const double ns = rt->run([] {
      usched::counting_semaphore<> sem(semaphore_permits);
      semaphore_contention c{semaphore_fibers, semaphore_permits, cfg.ops / semaphore_fibers};
      const double t = us_sides(c.fibers, [&](long) { c.side(sem, [] { usched::this_fiber::yield(); }); });
      c.check();
      return t / static_cast<double>(c.operations());
    });
    state.counters["ns"] = ns;
  }
}

// The same with the stand-in a Boost.Fiber user writes (task_api.hpp),
// on usched's mutex and condition variable: the Boost.Fiber rows' like for
// like, and, beside us_semaphore, what FIFO hand-off costs here.
void us_semaphore_cv(benchmark::State& state) {
  auto rt = make_runtime(cfg.workers);
  for (auto _ : state) {
    const double ns = rt->run([] {
      cv_semaphore<usched::mutex, usched::condition_variable> sem(semaphore_permits);
      semaphore_contention c{semaphore_fibers, semaphore_permits, cfg.ops / semaphore_fibers};
      const double t = us_sides(c.fibers, [&](long) { c.side(sem, [] { usched::this_fiber::yield(); }); });
      c.check();
      return t / static_cast<double>(c.operations());
    });
    state.counters["ns"] = ns;
  }
}

// us_select(): what taking an item costs through a select over several
// channels against a plain receive from one. The producers run beside the
// consumer, so both the ready path (an item is buffered in some case) and
// the blocking path (every case registers a waiter sharing one token, one
// wins, the others are unlinked) are taken; the sum checks every item
// arrived exactly once.
void us_select(benchmark::State& state, bool one_channel) {
  auto rt = make_runtime(cfg.workers);
  for (auto _ : state) {
    const double ns = rt->run([one_channel] {
      constexpr int producers = 4;
      const long per = std::max(1L, cfg.ops / producers);
      std::vector<std::unique_ptr<usched::channel<long>>> chans;
      for (int i = 0; i < producers; ++i) chans.push_back(std::make_unique<usched::channel<long>>(16));
      const std::int64_t t0 = now_ns();
      std::vector<usched::join_handle<void>> ps;
      for (int p = 0; p < producers; ++p) {
        usched::channel<long>& out = *chans[one_channel ? 0 : static_cast<std::size_t>(p)];
        ps.push_back(usched::spawn([&out, per] {
          for (long i = 1; i <= per; ++i) out.send(i);
        }));
      }
      long sum = 0;
      const long items = per * producers;
      if (one_channel) {
        for (long n = 0; n < items; ++n) sum += chans[0]->recv().value();
      } else {
        const auto take = [&sum](std::optional<long>&& v) { sum += v.value(); };
        for (long n = 0; n < items; ++n) {
          usched::select(usched::on_recv(*chans[0], take), usched::on_recv(*chans[1], take),
                         usched::on_recv(*chans[2], take), usched::on_recv(*chans[3], take));
        }
      }
      for (auto& h : ps) h.join();
      const std::int64_t t1 = now_ns();
      if (sum != producers * (per * (per + 1) / 2)) throw std::runtime_error("select: items lost or duplicated");
      return static_cast<double>(t1 - t0) / static_cast<double>(items);
    });
    state.counters["ns"] = ns;
  }
}

void us_shared_mutex(benchmark::State& state) {
  auto rt = make_runtime(cfg.workers);
  for (auto _ : state) {
    const double ns = rt->run([] {
      usched::shared_mutex m;
      shared_mutex_mix mix{shared_mutex_fibers, cfg.ops / shared_mutex_fibers};
      const double t = us_sides(mix.fibers, [&](long i) { mix.side(m, i); });
      mix.check();
      return t / static_cast<double>(mix.operations());
    });
    state.counters["ns"] = ns;
  }
}

void us_barrier(benchmark::State& state) {
  auto rt = make_runtime(cfg.workers);
  for (auto _ : state) {
    const double ns = rt->run([] {
      barrier_phases b{barrier_parties, cfg.ops / barrier_ops_per_phase};
      const auto completion = [&b]() noexcept { b.on_phase(false); };
      usched::barrier<decltype(completion)> bar(b.parties, completion);
      const double t = us_sides(b.parties, [&](long) {
        for (long p = 0; p < b.phases; ++p) {
          b.arriving();
          bar.arrive_and_wait();
        }
      });
      b.check();
      return t / static_cast<double>(b.phases);
    });
    state.counters["ns"] = ns;
  }
}

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

void us_fanout(benchmark::State& state) {
  auto rt = make_runtime(cfg.workers);
  const auto once = [] {
    return fanout_run(
        [](std::atomic<long>& ran, std::int64_t ns) {
          return usched::spawn([&ran, ns] {
            spin_for(ns);
            ran.fetch_add(1, std::memory_order_relaxed);
          });
        },
        [](usched::join_handle<void>& h) { h.join(); });
  };
  for (auto _ : state) {
    const double first = rt->run(once);
    report_fanout(state, first, rt->run(once));
  }
}

void register_usched() {
  const unsigned w = cfg.workers;
  reg("yield", us_yield);
  reg("yield_apart", us_yield_apart);
  reg("spawn_join", us_spawn_join);
  reg("spawn_join_thread", us_spawn_join_thread);
  reg("live_rss", us_live_rss);
  reg("skynet", us_skynet_bm);
  reg("fanout", us_fanout);
  if (w >= 2) reg("timer_late", us_timer_late);
  for (long n : {2L, 16L, 1000L})
    reg("mutex/" + std::to_string(n), [n](benchmark::State& s) { us_mutex(s, n); });
  reg("chan_same", [](benchmark::State& s) { us_chan(s, 0); });
  reg("future_same", [](benchmark::State& s) { us_future(s, 0); });
  reg("semaphore", us_semaphore);
  reg("semaphore_cv", us_semaphore_cv);
  reg("shared_mutex", us_shared_mutex);
  reg("barrier", us_barrier);
  reg("select", [](benchmark::State& s) { us_select(s, false); });
  reg("select_one", [](benchmark::State& s) { us_select(s, true); });
  if (w >= 2) {
    reg("wake_cv", us_wake_cv);
    reg("wake_chan", us_wake_chan);
    reg("chan_cross", [](benchmark::State& s) { us_chan(s, 1); });
    reg("future_cross", [](benchmark::State& s) { us_future(s, 1); });
  }
}

// ---- Boost.Fiber ---------------------------------------------------------------------

std::unique_ptr<boost_pool> pool;

void bf_yield(benchmark::State& state) {
  for (auto _ : state) {
    // Two fibers running the same loop on the one thread, as under usched.
    auto body = [] {
      for (int i = 0; i < yields_total / 2; ++i) boost::this_fiber::yield();
    };
    auto a = pool->spawn(body);
    auto b = pool->spawn(body);
    const std::int64_t t0 = now_ns();
    a.join();
    b.join();
    state.counters["ns"] = static_cast<double>(now_ns() - t0) / yields_total;
  }
}

void bf_yield_apart(benchmark::State& state) {
  for (auto _ : state) {
    auto a = pool->spawn([] {
      for (int i = 0; i < yields_total / 2; ++i) boost::this_fiber::yield();
    });
    auto b = pool->spawn([] {
      for (int i = yields_total / 2; i > 0; --i) boost::this_fiber::yield();
    });
    const std::int64_t t0 = now_ns();
    a.join();
    b.join();
    state.counters["ns"] = static_cast<double>(now_ns() - t0) / yields_total;
  }
}

auto bf_spawn = [](std::atomic<long>& c) {
  return pool->spawn([&c] { c.fetch_add(1, std::memory_order_relaxed); });
};
auto bf_join = [](boost::fibers::fiber& f) { f.join(); };

void bf_spawn_join(benchmark::State& state) {
  for (auto _ : state) {
    state.counters["ns_first"] = spawn_join_run(cfg.fibers, bf_spawn, bf_join);
    state.counters["ns"] = spawn_join_run(cfg.fibers, bf_spawn, bf_join);
    state.counters["peak_rss_mib"] = peak_rss_mib();
  }
}

void bf_live_rss(benchmark::State& state) {
  for (auto _ : state) {
    boost::fibers::mutex m;
    boost::fibers::condition_variable cv, all_started;
    bool go = false;
    long started = 0;
    const std::size_t before = rss_now_bytes();
    std::vector<boost::fibers::fiber> fs;
    fs.reserve(live_fibers);
    for (long i = 0; i < live_fibers; ++i) {
      fs.push_back(pool->spawn([&] {
        std::unique_lock<boost::fibers::mutex> lk(m);
        if (++started == live_fibers) all_started.notify_one();
        cv.wait(lk, [&] { return go; });
      }));
    }
    {
      std::unique_lock<boost::fibers::mutex> lk(m);
      all_started.wait(lk, [&] { return started == live_fibers; });
    }
    const std::size_t during = rss_now_bytes();
    {
      std::unique_lock<boost::fibers::mutex> lk(m);
      go = true;
    }
    cv.notify_all();
    for (auto& f : fs) f.join();
    state.counters["bytes_per_fiber"] =
        (static_cast<double>(during) - static_cast<double>(before)) / live_fibers;
    state.counters["stack_bytes"] = static_cast<double>(boost_pool::stack_size);
  }
}

void bf_skynet(std::uint64_t& out, std::uint64_t num, std::uint64_t size) {
  if (size == 1) {
    out = num;
    return;
  }
  const std::uint64_t child = size / 10;
  std::uint64_t r[10];
  boost::fibers::fiber f[10];
  for (std::uint64_t i = 0; i < 10; ++i) f[i] = pool->spawn(bf_skynet, std::ref(r[i]), num + i * child, child);
  std::uint64_t sum = 0;
  for (int i = 0; i < 10; ++i) {
    f[i].join();
    sum += r[i];
  }
  out = sum;
}

void bf_skynet_bm(benchmark::State& state) {
  for (auto _ : state) {
    std::uint64_t sum = 0;
    reset_peak_rss();
    const std::int64_t t0 = now_ns();
    bf_skynet(sum, 0, static_cast<std::uint64_t>(cfg.fibers));
    const std::int64_t t1 = now_ns();
    if (sum != skynet_expected(cfg.fibers)) throw std::runtime_error("skynet: wrong sum");
    state.counters["ms"] = static_cast<double>(t1 - t0) / 1e6;
    state.counters["peak_rss_mib"] = peak_rss_since_reset_mib();
  }
}

void bf_fanout(benchmark::State& state) {
  const auto once = [] {
    return fanout_run(
        [](std::atomic<long>& ran, std::int64_t ns) {
          return pool->spawn([&ran, ns] {
            spin_for(ns);
            ran.fetch_add(1, std::memory_order_relaxed);
          });
        },
        [](boost::fibers::fiber& f) { f.join(); });
  };
  for (auto _ : state) {
    const double first = once();
    report_fanout(state, first, once());
  }
}

void bf_wake_cv(benchmark::State& state) {
  const auto gaps = make_gaps(cfg.samples);
  for (auto _ : state) {
    std::vector<std::int64_t> lat(gaps.size());
    cv_wake_state<boost::fibers::mutex, boost::fibers::condition_variable> s;
    pool->run_pair(1, [&] { cv_waiter(s, lat); }, [&] { cv_waker(s, gaps); });
    report_latency(state, lat);
  }
}

void bf_wake_chan(benchmark::State& state) {
  const auto gaps = make_gaps(cfg.samples);
  for (auto _ : state) {
    std::vector<std::int64_t> lat(gaps.size());
    boost::fibers::unbuffered_channel<std::int64_t> ch;
    std::atomic<bool> armed{false};
    pool->run_pair(
        1,
        [&] {
          chan_waiter(armed, lat, [&] {
            std::int64_t v = 0;
            ch.pop(v);
            return v;
          });
        },
        [&] { chan_waker(armed, gaps, [&](std::int64_t v) { ch.push(v); }); });
    report_latency(state, lat);
  }
}

void bf_mutex(benchmark::State& state, long n) {
  for (auto _ : state) {
    boost::fibers::mutex m;
    long counter = 0;
    const long per = mutex_ops / n;
    std::vector<boost::fibers::fiber> fs;
    fs.reserve(static_cast<std::size_t>(n));
    const std::int64_t t0 = now_ns();
    for (long i = 0; i < n; ++i) {
      fs.push_back(pool->spawn([&] {
        for (long k = 0; k < per; ++k) {
          std::lock_guard<boost::fibers::mutex> g(m);
          ++counter;
        }
      }));
    }
    for (auto& f : fs) f.join();
    const std::int64_t t1 = now_ns();
    if (counter != per * n) throw std::runtime_error("mutex: lost increments");
    state.counters["ns"] = static_cast<double>(t1 - t0) / static_cast<double>(per * n);
  }
}

void bf_chan(benchmark::State& state, bool cross) {
  for (auto _ : state) {
    boost::fibers::unbuffered_channel<long> ping, pong;
    auto pinger = [&] {
      for (long i = 0; i < pingpong_round_trips; ++i) {
        ping.push(i);
        long v = 0;
        pong.pop(v);
      }
    };
    auto ponger = [&] {
      for (long i = 0; i < pingpong_round_trips; ++i) {
        long v = 0;
        ping.pop(v);
        pong.push(v);
      }
    };
    const std::int64_t t0 = now_ns();
    if (cross) {
      pool->run_pair(1, pinger, ponger);
    } else {
      auto f = pool->spawn(ponger);
      pinger();
      f.join();
    }
    state.counters["ns"] = static_cast<double>(now_ns() - t0) / (2.0 * pingpong_round_trips);
  }
}

void bf_future(benchmark::State& state, bool cross) {
  for (auto _ : state) {
    future_pingpong<boost::fibers::promise<long>> pp(cfg.ops / 2);
    const std::int64_t t0 = now_ns();
    if (cross) {
      pool->run_pair(1, [&] { pp.pinger(); }, [&] { pp.ponger(); });
    } else {
      auto f = pool->spawn([&] { pp.ponger(); });
      pp.pinger();
      f.join();
    }
    const std::int64_t t1 = now_ns();
    pp.check();
    state.counters["ns"] = static_cast<double>(t1 - t0) / static_cast<double>(pp.hand_offs());
  }
}

// Spawns `n` fibers running side(i) and joins them: ns from the first spawn
// to the last join. Their stacks are the roomy ones (peers.hpp).
template <class Side>
double bf_sides(long n, Side side) {
  std::vector<boost::fibers::fiber> fs;
  fs.reserve(static_cast<std::size_t>(n));
  const std::int64_t t0 = now_ns();
  for (long i = 0; i < n; ++i) fs.push_back(pool->spawn_roomy([&side, i] { side(i); }));
  for (auto& f : fs) f.join();
  return static_cast<double>(now_ns() - t0);
}

void bf_semaphore_cv(benchmark::State& state) {
  for (auto _ : state) {
    cv_semaphore<boost::fibers::mutex, boost::fibers::condition_variable> sem(semaphore_permits);
    semaphore_contention c{semaphore_fibers, semaphore_permits, cfg.ops / semaphore_fibers};
    const double t = bf_sides(c.fibers, [&](long) { c.side(sem, [] { boost::this_fiber::yield(); }); });
    c.check();
    state.counters["ns"] = t / static_cast<double>(c.operations());
  }
}

void bf_barrier(benchmark::State& state) {
  for (auto _ : state) {
    barrier_phases b{barrier_parties, cfg.ops / barrier_ops_per_phase};
    boost::fibers::barrier bar(static_cast<std::size_t>(b.parties));
    const double t = bf_sides(b.parties, [&](long) {
      for (long p = 0; p < b.phases; ++p) {
        b.arriving();
        // wait() returns true to one side per phase, once it is over.
        if (bar.wait()) b.on_phase(true);
      }
    });
    b.check();
    state.counters["ns"] = t / static_cast<double>(b.phases);
  }
}

void register_boost() {
  // Same-thread workloads only where no other thread can steal the fiber.
  if (cfg.workers == 1) {
    reg("yield", bf_yield);
    reg("yield_apart", bf_yield_apart);
    reg("chan_same", [](benchmark::State& s) { bf_chan(s, false); });
    reg("future_same", [](benchmark::State& s) { bf_future(s, false); });
  }
  // No semaphore and no shared_mutex: Boost.Fiber has neither; its row of
  // the semaphore table is the stand-in its users write (semaphore_cv).
  reg("semaphore_cv", bf_semaphore_cv);
  reg("barrier", bf_barrier);
  reg("spawn_join", bf_spawn_join);
  reg("live_rss", bf_live_rss);
  reg("skynet", bf_skynet_bm);
  reg("fanout", bf_fanout);
  for (long n : {2L, 16L, 1000L})
    reg("mutex/" + std::to_string(n), [n](benchmark::State& s) { bf_mutex(s, n); });
  if (cfg.workers >= 2) {
    reg("wake_cv", bf_wake_cv);
    reg("wake_chan", bf_wake_chan);
    reg("chan_cross", [](benchmark::State& s) { bf_chan(s, true); });
    reg("future_cross", [](benchmark::State& s) { bf_future(s, true); });
  }
}

// ---- std::thread -------------------------------------------------------------------

void th_yield(benchmark::State& state) {
  constexpr int n = 200'000;
  for (auto _ : state) {
    std::atomic<int> ready{0};
    auto body = [&] {
      pin_this_thread(0);
      ready.fetch_add(1);
      while (ready.load() < 2) pause_once();
      for (int i = 0; i < n / 2; ++i) sched_yield();
    };
    const std::int64_t t0 = now_ns();
    std::thread a(body), b(body);
    a.join();
    b.join();
    state.counters["ns"] = static_cast<double>(now_ns() - t0) / n;
  }
}

void th_spawn_join(benchmark::State& state) {
  // Thread creation costs tens of microseconds: 20,000 are enough.
  constexpr long n = 20'000;
  auto spawn = [](std::atomic<long>& c) { return std::thread([&c] { c.fetch_add(1); }); };
  auto join = [](std::thread& t) { t.join(); };
  for (auto _ : state) {
    state.counters["ns_first"] = spawn_join_run(n, spawn, join);
    state.counters["ns"] = spawn_join_run(n, spawn, join);
  }
}

void th_wake_cv(benchmark::State& state) {
  const auto gaps = make_gaps(cfg.samples);
  for (auto _ : state) {
    std::vector<std::int64_t> lat(gaps.size());
    cv_wake_state<std::mutex, std::condition_variable> s;
    std::thread w([&] {
      pin_this_thread(0);
      cv_waiter(s, lat);
    });
    std::thread k([&] {
      pin_this_thread(1);
      cv_waker(s, gaps);
    });
    w.join();
    k.join();
    report_latency(state, lat);
  }
}

void th_mutex(benchmark::State& state, long n) {
  for (auto _ : state) {
    std::mutex m;
    long counter = 0;
    const long per = mutex_ops / n;
    std::vector<std::thread> ts;
    const std::int64_t t0 = now_ns();
    for (long i = 0; i < n; ++i) {
      ts.emplace_back([&] {
        for (long k = 0; k < per; ++k) {
          std::lock_guard<std::mutex> g(m);
          ++counter;
        }
      });
    }
    for (auto& t : ts) t.join();
    const std::int64_t t1 = now_ns();
    if (counter != per * n) throw std::runtime_error("mutex: lost increments");
    state.counters["ns"] = static_cast<double>(t1 - t0) / static_cast<double>(per * n);
  }
}

// The floor of any cross-worker hand-off: one cache line passed back and
// forth between threads on two CPUs, ns per one-way trip.
void th_cacheline(benchmark::State& state) {
  constexpr long trips = 1'000'000;
  for (auto _ : state) {
    alignas(64) std::atomic<long> turn{0};
    auto player = [&](unsigned cpu, long parity) {
      pin_this_thread(cpu);
      for (long i = parity; i < trips; i += 2) {
        while (turn.load(std::memory_order_acquire) != i) pause_once();
        turn.store(i + 1, std::memory_order_release);
      }
    };
    const std::int64_t t0 = now_ns();
    std::thread a(player, 0u, 0L), b(player, 1u, 1L);
    a.join();
    b.join();
    state.counters["ns"] = static_cast<double>(now_ns() - t0) / trips;
  }
}

// std::promise/std::future between two threads pinned to CPUs `a` and `b`
// (the same CPU for the one-worker row), which meet at a latch first so
// that neither starts before both are placed.
void th_future(benchmark::State& state, unsigned cpu_a, unsigned cpu_b) {
  for (auto _ : state) {
    future_pingpong<std::promise<long>> pp(cfg.ops / thread_ops_divisor / 2);
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

// Threads take a count under std::mutex and std::condition_variable, not
// std::counting_semaphore: libstdc++ 12's (Debian 12's) loses wake-ups under
// contention (GCC bug 98033: a release that finds the count already
// positive skips the notify while an acquire whose compare-exchange failed
// goes to sleep), and this row, 16 threads on 4 permits, left a thread
// asleep in acquire() with a permit free.
void th_semaphore(benchmark::State& state) {
  for (auto _ : state) {
    cv_semaphore<std::mutex, std::condition_variable> sem(semaphore_permits);
    semaphore_contention c{semaphore_fibers, semaphore_permits,
                           cfg.ops / thread_ops_divisor / semaphore_fibers};
    const double t = th_sides(c.fibers, [&](long) { c.side(sem, [] { std::this_thread::yield(); }); });
    c.check();
    state.counters["ns"] = t / static_cast<double>(c.operations());
  }
}

void th_shared_mutex(benchmark::State& state) {
  for (auto _ : state) {
    std::shared_mutex m;
    shared_mutex_mix mix{shared_mutex_fibers, cfg.ops / shared_mutex_fibers};
    const double t = th_sides(mix.fibers, [&](long i) { mix.side(m, i); });
    mix.check();
    state.counters["ns"] = t / static_cast<double>(mix.operations());
  }
}

void th_barrier(benchmark::State& state) {
  for (auto _ : state) {
    barrier_phases b{barrier_parties, cfg.ops / barrier_ops_per_phase};
    const auto completion = [&b]() noexcept { b.on_phase(false); };
    std::barrier<decltype(completion)> bar(b.parties, completion);
    const double t = th_sides(b.parties, [&](long) {
      for (long p = 0; p < b.phases; ++p) {
        b.arriving();
        bar.arrive_and_wait();
      }
    });
    b.check();
    state.counters["ns"] = t / static_cast<double>(b.phases);
  }
}

void register_thread() {
  reg("yield", th_yield);
  reg("future_same", [](benchmark::State& s) { th_future(s, 0, 0); });
  reg("future_cross", [](benchmark::State& s) { th_future(s, 0, 1); });
  reg("semaphore", th_semaphore);
  reg("shared_mutex", th_shared_mutex);
  reg("barrier", th_barrier);
  reg("spawn_join", th_spawn_join);
  reg("wake_cv", th_wake_cv);
  reg("cacheline", th_cacheline);
  for (long n : {2L, 16L})
    reg("mutex/" + std::to_string(n), [n](benchmark::State& s) { th_mutex(s, n); });
}

// ---- raw Boost.Context: the floor ---------------------------------------------------

void ctx_yield(benchmark::State& state) {
  namespace ctx = boost::context;
  for (auto _ : state) {
    ctx::fiber f{[](ctx::fiber&& caller) {
      for (;;) caller = std::move(caller).resume();
      return std::move(caller);
    }};
    f = std::move(f).resume();
    const std::int64_t t0 = now_ns();
    for (int i = 0; i < yields_total / 2; ++i) f = std::move(f).resume();
    state.counters["ns"] = static_cast<double>(now_ns() - t0) / yields_total;
    // The fiber never returns; unwinding its stack at destruction throws
    // forced_unwind through the loop, which is what ends it.
  }
}

// ---- main ----------------------------------------------------------------------------

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
  try {
    if (cfg.peer == "usched") {
      benchmark::AddCustomContext("policy", cfg.policy);
      make_runtime(1);  // bad policy or USCHED_* values fail here, with their message
      register_usched();
    } else if (cfg.peer == "boost-ws" || cfg.peer == "boost-ws-sleep" || cfg.peer == "boost-shared") {
      const auto algo = cfg.peer == "boost-shared" ? boost_algo::shared_work : boost_algo::work_stealing;
      pool = std::make_unique<boost_pool>(algo, cfg.workers, cfg.peer == "boost-ws-sleep");
      register_boost();
    } else if (cfg.peer == "thread") {
      register_thread();
    } else if (cfg.peer == "context") {
      reg("yield", ctx_yield);
    } else {
      std::cerr << "usched_micro: --peer='" << cfg.peer
                << "' is not a peer; choose one of: usched, boost-ws, boost-ws-sleep, boost-shared, "
                   "thread, context\n";
      return 2;
    }
    benchmark::RunSpecifiedBenchmarks();
  } catch (const std::exception& e) {
    std::cerr << "usched_micro: " << e.what() << "\n";
    return 1;
  }
  pool.reset();
  benchmark::Shutdown();
  return 0;
}
