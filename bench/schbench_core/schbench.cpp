// schbench.cpp: the schbench clone. Wake-up latency on real hardware, with the
// usched runtime scheduling the threads (fibers) or, with --threads, the kernel.
//
// The workload is schbench's (masoncl/schbench, late 2020):
//
//   worker round:   put itself on its message thread's wake list, post the
//                   message thread, wait to be woken, record now - wake_time,
//                   think (spin) for -c us.
//   message round:  wait to be posted, think for -C us, sleep -s us plus a
//                   random jitter below s/4, take ONE timestamp, wake every
//                   worker on its list with that timestamp as wake_time.
//
// One timestamp for the whole list is schbench's choice: if the scheduler
// preempts the waker halfway through its list, the workers it wakes late
// see that in their latency.
//
// Both modes run the same templates below; they differ only in the
// platform: how to wait and post (usched mutex + condition_variable, or a
// futex), how to sleep, and what a think loop does between clock reads
// (this_fiber::preempt_point(), or nothing: the kernel preempts threads).
//
// run_schbench() lives in usched_schbench_core, which the tests call
// in-process; main.cpp is the executable's entry point.
#include <array>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <usched/detail/cpu_relax.hpp>
#include <usched/usched.hpp>

#include "cli.hpp"
#include "common/cpus.hpp"
#include "common/stop_signals.hpp"
#include "histogram.hpp"

namespace usched::schbench {

namespace {

using bench::stop_signals;

using steady = std::chrono::steady_clock;

std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(steady::now().time_since_epoch())
      .count();
}


// ---- statistics -------------------------------------------------------------

// latency_recorder holds one worker's samples. The worker is its only
// writer; the reporting thread reads it while the worker runs, and zeroes it
// by bumping the shared epoch rather than by writing into it: a recorder
// whose epoch is stale counts as empty, and its worker clears it before its
// next sample. So no lock is ever taken on the measured path, and a
// reporter preempted mid-copy cannot stall a worker (which would show up as
// latency).
class latency_recorder {
 public:
  // record() adds one sample of `us` under zeroing epoch `epoch`; 0 us is
  // dropped, as histogram::record drops it. Worker only.
  void record(std::uint64_t us, std::uint64_t epoch) noexcept {
    if (us == 0) return;
    // Single writer: relaxed load + store is an increment nobody races with.
    if (epoch_.load(std::memory_order_relaxed) != epoch) {
      for (auto& b : plat_) b.store(0, std::memory_order_relaxed);
      min_.store(0, std::memory_order_relaxed);
      max_.store(0, std::memory_order_relaxed);
      // Release: a reporter that sees the new epoch sees the cleared buckets.
      epoch_.store(epoch, std::memory_order_release);
    }
    const std::uint64_t lo = min_.load(std::memory_order_relaxed);
    if (lo == 0 || us < lo) min_.store(us, std::memory_order_relaxed);
    if (us > max_.load(std::memory_order_relaxed)) max_.store(us, std::memory_order_relaxed);
    auto& b = plat_[plat_val_to_idx(us)];
    // Release, after min/max: a reporter that sees this count also sees the
    // extremes that include it.
    b.store(b.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }

  // collect_into() merges the samples recorded under `epoch` into `total`.
  // Any thread.
  void collect_into(histogram& total, std::uint64_t epoch) const {
    if (epoch_.load(std::memory_order_acquire) != epoch) return;
    std::vector<std::uint64_t> counts(plat_nr);
    for (unsigned i = 0; i < plat_nr; ++i) counts[i] = plat_[i].load(std::memory_order_acquire);
    total.merge(histogram::from_buckets(counts, min_.load(std::memory_order_relaxed),
                                        max_.load(std::memory_order_relaxed)));
  }

 private:
  std::array<std::atomic<std::uint64_t>, plat_nr> plat_{};
  std::atomic<std::uint64_t> min_{0};
  std::atomic<std::uint64_t> max_{0};
  std::atomic<std::uint64_t> epoch_{0};
};

// control is what the reporting thread tells every message thread and
// worker. seq_cst throughout: the shutdown argument below needs a single
// order between `stopping` and the wake-list operations.
struct control {
  std::atomic<bool> stopping{false};
  std::atomic<std::uint64_t> zero_epoch{0};
};

// ---- platforms ---------------------------------------------------------------

// futex_event is schbench's fpost/fwait pair: a word that is `posted` or
// `idle`. post() wakes the waiter only when it flips idle -> posted; wait()
// consumes a post, sleeping in the kernel until there is one.
class futex_event {
 public:
  // reset() drops a post nobody consumed (schbench sets FUTEX_BLOCKED
  // before publishing itself). Owner only.
  void reset() noexcept { word_.store(idle, std::memory_order_seq_cst); }

  void post() noexcept {
    if (word_.exchange(posted, std::memory_order_seq_cst) == idle) {
      syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word_), FUTEX_WAKE_PRIVATE, 1, nullptr,
              nullptr, 0);
    }
  }

  void wait() noexcept {
    for (;;) {
      std::uint32_t expected = posted;
      if (word_.compare_exchange_strong(expected, idle, std::memory_order_seq_cst)) return;
      // Sleeps only while the word still reads idle; EAGAIN and EINTR just
      // loop back to the check.
      syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word_), FUTEX_WAIT_PRIVATE, idle,
              nullptr, nullptr, 0);
    }
  }

 private:
  static constexpr std::uint32_t idle = 0;
  static constexpr std::uint32_t posted = 1;
  std::atomic<std::uint32_t> word_{idle};
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
};

// fiber_event is the same contract on usched primitives: a waiting fiber
// blocks (its worker runs others), and post() makes it runnable through the
// policy's wake placement, the path under test.
class fiber_event {
 public:
  void reset() {
    std::lock_guard<usched::mutex> g(m_);
    posted_ = false;
  }

  void post() {
    {
      std::lock_guard<usched::mutex> g(m_);
      posted_ = true;
    }
    cv_.notify_one();
  }

  void wait() {
    std::unique_lock<usched::mutex> lk(m_);
    cv_.wait(lk, [this] { return posted_; });
    posted_ = false;
  }

 private:
  usched::mutex m_;
  usched::condition_variable cv_;
  bool posted_ = false;
};

struct thread_platform {
  using event = futex_event;
  // The kernel preempts a spinning thread by itself.
  static void between_clock_reads() noexcept { usched::detail::cpu_relax(); }
  static void sleep_us(std::uint64_t us) { std::this_thread::sleep_for(std::chrono::microseconds(us)); }
};

struct fiber_platform {
  using event = fiber_event;
  // usched is cooperative: a think loop offers its worker back at every
  // clock read, and preempt_point() yields once the slice is used up.
  static void between_clock_reads() noexcept {
    usched::this_fiber::preempt_point();
    usched::detail::cpu_relax();
  }
  static void sleep_us(std::uint64_t us) { usched::this_fiber::sleep_for(std::chrono::microseconds(us)); }
};

// ---- the workload -------------------------------------------------------------

template <class P>
struct worker_state {
  typename P::event wake;                   // posted by the message thread
  std::atomic<std::int64_t> wake_time_ns{0};  // its timestamp, written before the post
  worker_state* next = nullptr;             // link on the wake list; handed over by
                                            // the list's atomic push and splice
  latency_recorder latency;
};

template <class P>
struct message_state {
  typename P::event posted;                             // workers post it after queueing
  std::atomic<worker_state<P>*> wake_list{nullptr};     // lock-free stack (schbench's xlist)
  std::vector<std::unique_ptr<worker_state<P>>> workers;
  std::uint64_t seed = 0;                               // for the sleep jitter
};

// think() spins until the wall clock has moved `us` microseconds, so time
// spent preempted counts as thinking (schbench's usec_spin). It gives up
// early once the run is stopping: nothing after that is measured.
template <class P>
void think(std::uint64_t us, const control& ctl) noexcept {
  if (us == 0) return;
  const std::int64_t end = now_ns() + static_cast<std::int64_t>(us) * 1000;
  while (now_ns() < end && !ctl.stopping.load(std::memory_order_relaxed)) {
    P::between_clock_reads();
  }
}

// push_wake_list() puts a worker on its message thread's wake list
// (schbench's xlist_add). seq_cst: see the shutdown argument below.
template <class P>
void push_wake_list(message_state<P>& m, worker_state<P>* w) noexcept {
  w->next = m.wake_list.load(std::memory_order_relaxed);
  while (!m.wake_list.compare_exchange_weak(w->next, w, std::memory_order_seq_cst,
                                            std::memory_order_relaxed)) {
  }
}

// wake_all() takes the whole wake list and wakes it with one timestamp.
template <class P>
void wake_all(message_state<P>& m) {
  worker_state<P>* list = m.wake_list.exchange(nullptr, std::memory_order_seq_cst);
  const std::int64_t now = now_ns();
  while (list) {
    // Read the link before the post: once posted, the worker may queue
    // itself again and rewrite it.
    worker_state<P>* next = list->next;
    list->next = nullptr;
    // Relaxed: the post that follows publishes it.
    list->wake_time_ns.store(now, std::memory_order_relaxed);
    list->wake.post();
    list = next;
  }
}

// Shutdown cannot lose a worker: a worker queues itself, posts, then reads
// `stopping` and waits only if it read false; the message thread reads
// `stopping` true before its last wake_all. All of these are seq_cst, so a
// worker that will wait queued itself before that last wake_all splices the
// list, and is woken by it; the message thread also posts every worker once
// more on its way out.
template <class P>
void worker_loop(const control& ctl, message_state<P>& m, worker_state<P>& w,
                 const cli_options& o) {
  while (!ctl.stopping.load(std::memory_order_seq_cst)) {
    w.wake.reset();
    push_wake_list(m, &w);
    m.posted.post();
    if (ctl.stopping.load(std::memory_order_seq_cst)) break;
    w.wake.wait();
    const std::int64_t woke = now_ns();
    if (ctl.stopping.load(std::memory_order_seq_cst)) break;  // woken to leave
    // Microsecond timestamps first, then the difference: schbench's
    // gettimeofday arithmetic, so a sub-microsecond wake-up counts as 1 us
    // or as 0 (dropped) depending on where the microsecond ticks, as there.
    const std::int64_t delta_us = woke / 1000 - w.wake_time_ns.load(std::memory_order_relaxed) / 1000;
    if (delta_us > 0) {
      w.latency.record(static_cast<std::uint64_t>(delta_us),
                       ctl.zero_epoch.load(std::memory_order_acquire));
    }
    think<P>(o.worker_think_us, ctl);
  }
}

template <class P>
void message_loop(const control& ctl, message_state<P>& m, const cli_options& o) {
  std::mt19937_64 rng(m.seed);
  // The jitter is drawn below s/4. The parser keeps s >= min_sleep_us so
  // that range is never empty; options built by hand get no jitter instead.
  const std::uint64_t jitter_span = o.sleep_us / 4;
  std::uniform_int_distribution<std::uint64_t> draw(0, jitter_span > 0 ? jitter_span - 1 : 0);
  for (;;) {
    m.posted.reset();
    wake_all(m);
    if (ctl.stopping.load(std::memory_order_seq_cst)) {
      wake_all(m);
      break;
    }
    m.posted.wait();
    think<P>(o.message_think_us, ctl);
    P::sleep_us(o.sleep_us + (jitter_span > 0 ? draw(rng) : 0));
  }
  for (auto& w : m.workers) w->wake.post();
}

// make_states() builds the state of every message thread and of its
// workers before anything runs, so their addresses stay put for the whole run.
template <class P>
std::vector<std::unique_ptr<message_state<P>>> make_states(unsigned message_threads,
                                                           unsigned worker_threads) {
  std::random_device rd;
  std::vector<std::unique_ptr<message_state<P>>> out;
  for (unsigned i = 0; i < message_threads; ++i) {
    auto m = std::make_unique<message_state<P>>();
    m->seed = (std::uint64_t{rd()} << 32) ^ rd() ^ i;
    for (unsigned j = 0; j < worker_threads; ++j) m->workers.push_back(std::make_unique<worker_state<P>>());
    out.push_back(std::move(m));
  }
  return out;
}

// collect() merges every worker's samples since the last zeroing; any
// thread, while the workload runs or after.
template <class P>
histogram collect(const std::vector<std::unique_ptr<message_state<P>>>& msgs, const control& ctl) {
  histogram total;
  const std::uint64_t epoch = ctl.zero_epoch.load(std::memory_order_acquire);
  for (const auto& m : msgs) {
    for (const auto& w : m->workers) w->latency.collect_into(total, epoch);
  }
  return total;
}

// stop() ends every round: raise the flag, then post each message thread in
// case it waits for a worker that will not come.
template <class P>
void stop(control& ctl, const std::vector<std::unique_ptr<message_state<P>>>& msgs) {
  ctl.stopping.store(true, std::memory_order_seq_cst);
  for (const auto& m : msgs) m->posted.post();
}

// ---- the reporting thread -----------------------------------------------------

// report_loop() is schbench's sleep_for_runtime: wake once a second, zero
// after the warm-up and every -z seconds, print the cumulative block every
// -i seconds, until -r seconds have passed or a stop signal came. Returns
// the seconds to print in the final block.
//
// Every check is made against the tick's scheduled time, not the time the
// thread woke, so a tick that wakes a few microseconds early relative to the
// last one cannot push a report or a zeroing a whole second late.
std::uint64_t report_loop(const cli_options& o, const stop_signals& sig,
                          const std::function<histogram()>& collect_all,
                          const std::function<void()>& zero_all, std::ostream& out) {
  using std::chrono::seconds;
  const auto start = steady::now();
  report_schedule schedule(o);
  // schbench's loop granularity: every check happens on a one-second tick.
  for (std::uint64_t tick = 1;; ++tick) {
    const bool last = o.runtime_s != 0 && tick >= o.runtime_s;
    const auto at = start + seconds(last ? o.runtime_s : tick);
    if (sig.wait_until(at)) {
      return static_cast<std::uint64_t>(
          std::chrono::duration_cast<seconds>(steady::now() - start).count());
    }
    if (last) return o.runtime_s;
    const report_schedule::actions act = schedule.at(tick);
    if (act.warmup) out << "warmup done, zeroing stats\n" << std::flush;
    if (act.print) out << format_block(collect_all(), tick) << std::flush;
    if (act.zero) zero_all();
  }
}


// topology_line() picks the one-line topology summary out of
// runtime::describe().
std::string topology_line(const std::string& description) {
  // runtime::describe() has one "topology: ..." line; that is the summary.
  constexpr std::string_view prefix = "topology: ";
  std::istringstream in(description);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
  }
  return description.substr(0, description.find('\n'));
}

// measure() is the part of a run both modes share once their threads
// exist: report until the end, stop and join everything (join_all), print
// the final block. Whatever happens, the workload is stopped and joined
// before measure() returns or throws.
template <class P>
run_summary measure(const cli_options& o, const stop_signals& sig, control& ctl,
                    const std::vector<std::unique_ptr<message_state<P>>>& msgs,
                    const std::function<void()>& join_all, std::ostream& out) {
  std::uint64_t runtime_s = 0;
  try {
    runtime_s = report_loop(
        o, sig, [&] { return collect(msgs, ctl); },
        [&] { ctl.zero_epoch.fetch_add(1, std::memory_order_acq_rel); }, out);
  } catch (...) {
    stop(ctl, msgs);
    join_all();
    throw;
  }
  stop(ctl, msgs);
  join_all();
  const histogram total = collect(msgs, ctl);
  out << format_block(total, runtime_s) << std::flush;
  return summarize(total, runtime_s);
}

run_summary run_fibers(const cli_options& o, const stop_signals& sig, std::ostream& out,
                       usched::runtime_stats* stats) {
  usched::options ro = usched::options::from_env();
  if (!o.policy.empty()) ro.policy = o.policy;
  usched::runtime rt{ro};
  const unsigned per = resolve_worker_threads(o, rt.workers());
  control ctl;
  const auto msgs = make_states<fiber_platform>(o.message_threads, per);

  std::vector<usched::join_handle<void>> handles;
  const auto join_all = [&handles] {
    // Join every handle even if one rethrows; report the first failure.
    std::exception_ptr first;
    for (auto& h : handles) {
      try {
        if (h.joinable()) h.join();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);
  };
  try {
    for (const auto& mp : msgs) {
      message_state<fiber_platform>& m = *mp;
      // Labelled as the simulator's model labels them, so that a trace of
      // the clone and one of its simulation read alike (docs/tracing.md).
      usched::spawn_options message_opts;
      message_opts.label = "message";
      handles.push_back(rt.spawn(message_opts, [&ctl, &m, &o] {
        // The message fiber starts its own workers, as schbench's message
        // thread does, so the policy places them at spawn.
        std::vector<usched::join_handle<void>> workers;
        try {
          for (const auto& w : m.workers) {
            worker_state<fiber_platform>& ws = *w;
            usched::spawn_options worker_opts;
            worker_opts.label = "worker";
            workers.push_back(usched::spawn(worker_opts, [&ctl, &m, &ws, &o] { worker_loop(ctl, m, ws, o); }));
          }
        } catch (...) {
          // Release the workers already started before giving up.
          ctl.stopping.store(true, std::memory_order_seq_cst);
          for (const auto& w : m.workers) w->wake.post();
          for (auto& h : workers) h.join();
          throw;
        }
        message_loop(ctl, m, o);
        for (auto& h : workers) h.join();
      }));
    }
  } catch (...) {
    stop(ctl, msgs);
    join_all();
    throw;
  }

  run_summary s = measure(o, sig, ctl, msgs, join_all, out);
  if (stats) *stats = rt.stats();
  s.policy = rt.config().policy;
  s.mode = "usched";
  s.workers = rt.workers();
  s.topology = topology_line(rt.describe());
  s.worker_threads = per;
  return s;
}

run_summary run_threads(const cli_options& o, const stop_signals& sig, std::ostream& out) {
  const unsigned cpus = bench::affinity_cpus();
  const unsigned per = resolve_worker_threads(o, cpus);
  control ctl;
  const auto msgs = make_states<thread_platform>(o.message_threads, per);

  std::vector<std::thread> threads;
  std::mutex failure_lock;
  std::exception_ptr failure;  // a message thread that could not start its workers
  const auto join_all = [&] {
    for (auto& t : threads) {
      if (t.joinable()) t.join();
    }
    if (failure) std::rethrow_exception(failure);
  };
  try {
    for (const auto& mp : msgs) {
      message_state<thread_platform>& m = *mp;
      threads.emplace_back([&ctl, &m, &o, &failure_lock, &failure] {
        std::vector<std::thread> workers;
        try {
          for (const auto& w : m.workers) {
            worker_state<thread_platform>& ws = *w;
            workers.emplace_back([&ctl, &m, &ws, &o] { worker_loop(ctl, m, ws, o); });
          }
        } catch (...) {
          {
            std::lock_guard<std::mutex> g(failure_lock);
            if (!failure) failure = std::current_exception();
          }
          ctl.stopping.store(true, std::memory_order_seq_cst);
          for (const auto& w : m.workers) w->wake.post();
          for (auto& t : workers) t.join();
          return;
        }
        message_loop(ctl, m, o);
        for (auto& t : workers) t.join();
      });
    }
  } catch (...) {
    stop(ctl, msgs);
    join_all();
    throw;
  }

  run_summary s = measure(o, sig, ctl, msgs, join_all, out);
  s.policy = "threads";
  s.mode = "threads";
  s.workers = cpus;
  s.topology = "kernel scheduler, " + std::to_string(cpus) + " CPU" + (cpus == 1 ? "" : "s") +
               " in this process's affinity mask";
  s.worker_threads = per;
  return s;
}

}  // namespace

run_summary run_schbench(const cli_options& o, std::ostream& out, usched::runtime_stats* stats) {
  // Open the JSON file first: a bad path should fail before a long run.
  std::ofstream json;
  if (!o.json_file.empty()) {
    check_output_file("--json", o.json_file);
    json.open(o.json_file, std::ios::out | std::ios::trunc);
    if (!json) {
      throw std::runtime_error("--json: cannot write '" + o.json_file + "': " + std::strerror(errno));
    }
  }
  run_summary s;
  {
    const stop_signals sig;
    s = o.threads ? run_threads(o, sig, out) : run_fibers(o, sig, out, stats);
  }
  s.message_threads = o.message_threads;
  s.command_line = o.command_line;
  if (json.is_open()) {
    json << to_json(s);
    json.flush();
    if (!json) throw std::runtime_error("--json: writing '" + o.json_file + "' failed");
  }
  return s;
}

}  // namespace usched::schbench
