// runtime_impl.hpp: the real backend's runtime: its workers (worker.hpp),
// the engine they drive, the stack pool, the blocking pool, and the glue of
// the public API. Workers are OS threads, one per PU or core, pinned with
// hwloc; fibers run on them through Boost.Context.
//
// The backend in files by job (this class's members, the worker's, and the
// functions the public headers call into):
//   lifecycle.cpp      construction, describe/stats, the destructor's wait
//   worker.cpp         a worker's thread: switching, idling, spinning, parking
//   spawn.cpp          a fiber from spawn to recycle: start, exit, join, detach
//   wakeup.cpp         try_to_wake_up: the engine's wake-up, carried out
//   wait.cpp           the wait protocol: prepare, block, wake
//   timers.cpp         the workers' timer heaps and the timer watcher
//   blocking_pool.cpp  usched::blocking's threads
//   hang_report.cpp    what a long wait for the last fibers says
//   monitor.cpp        the monitor thread: preempt requests, stall and
//                      hang reports (its decision is monitor.hpp's)
//   fatal.cpp          the process-ending reports
//   fiber_local.cpp    the fiber_local tables
//   this_fiber.cpp     usched::this_fiber (yield() is in worker.cpp)
//   clock.cpp          the time-stamp counter's calibration
//   reactor_uring.cpp  a worker's I/O reactor on io_uring (reactor.hpp)
//   reactor_epoll.cpp  ... on epoll
//   io_call.cpp        where an I/O call goes; the plain thread's path
//   io.cpp, net.cpp    usched/io.hpp's and usched/net.hpp's calls
// (The primitives' out-of-line parts, the stack pool, stack-overflow
// detection, the statistics' text and the options have files named after
// them: sync.cpp, latch.cpp, semaphore.cpp, stack_pool.cpp, overflow.cpp,
// stats.cpp, options.cpp.)
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/logger.h>

#include <usched/options.hpp>
#include <usched/runtime.hpp>

#include "domains.hpp"
#include "engine.hpp"
#include "stack_pool.hpp"
#include "topology.hpp"
#include "monitor.hpp"
#include "worker.hpp"

namespace usched::detail {

class runtime_impl {
 public:
  explicit runtime_impl(options opts);
  ~runtime_impl();

  const options& config() const noexcept { return opts_; }
  // submit_blocking() queues a call for the blocking pool (blocking.hpp),
  // starting a pool thread if every one is busy and the pool is below
  // options::blocking_threads.
  void submit_blocking(blocking_job* job);
  // The public object that owns this runtime (runtime::current()); set by
  // its constructor before anything can be spawned.
  usched::runtime* owner() const noexcept { return owner_; }
  void set_owner(usched::runtime* r) noexcept { owner_ = r; }
  unsigned nr_workers() const noexcept { return static_cast<unsigned>(workers_.size()); }
  worker& worker_at(int i) noexcept { return *workers_[static_cast<std::size_t>(i)]; }
  engine& eng() noexcept { return engine_; }
  spdlog::logger& log() noexcept { return *log_; }
  stack_pool& pool() noexcept { return pool_; }
  // record_books_at_teardown(): the destructor writes the stack pool's
  // ledger to `*out` once the workers have stopped and returned their
  // fiber caches, before the pool is freed: the leak check of the
  // conformance suite. `out` must outlive the runtime; null stops it.
  void record_books_at_teardown(stack_pool::ledger* out) noexcept { teardown_books_ = out; }
  std::string describe() const;
  runtime_stats stats() const;
  // The trace recorder (options::trace, trace_flight), or null.
  tracer* trace() const noexcept { return tracer_.get(); }
  // trace_now(): what the recorder holds, merged (trace.hpp); needs a
  // recorder. dump_trace(): runtime::dump_trace().
  trace_data trace_now() const;
  void dump_trace(const std::string& path) const;
  // dump_trace_for_report(): a report is about to end the process, or the
  // monitor names a stall or a hang: what the recorder holds goes to
  // options::trace (when both are set), and one line on stderr says where.
  // `why` names the report. Never throws; a failure is that line's. The
  // line goes to stderr before a fatal end (whatever the log level, as the
  // report itself), else to the log at warn, beside the report.
  void dump_trace_for_report(const char* why, bool fatal = true) const noexcept;
  // dump_raw_in_signal(): the same from a signal handler (a stack
  // overflow): the records raw (tracer::write_raw) to options::trace +
  // ".raw", without allocating. Async-signal-safe.
  void dump_raw_in_signal() const noexcept;
  double cycles_per_ns() const noexcept { return cycles_per_ns_; }
  double ns_per_cycle() const noexcept { return ns_per_cycle_; }
  // The floating-point control state every fiber starts with (that of the
  // thread that made the runtime), and whether it is written into a new
  // fiber's first frame (see fp_control in context.hpp).
  const fp_control& initial_fp() const noexcept { return initial_fp_; }
  bool fp_in_frame() const noexcept { return fp_in_frame_; }
  std::uint64_t tick_cycles() const noexcept { return tick_cycles_; }
  std::int64_t spin_ns() const noexcept { return spin_ns_; }
  bool stopping() const noexcept { return stopping_.load(std::memory_order_seq_cst); }
  const topology& topo() const noexcept { return topo_; }
  worker_unit unit() const noexcept { return unit_; }
  // Whether workers pin themselves (the topology fits this host).
  bool pinned() const noexcept { return pinned_; }
  // More workers than this host has hardware threads.
  bool oversubscribed() const noexcept { return oversubscribed_; }
  // The reactor backend the workers use (io_uring or epoll: options::io
  // resolved against what the kernel allows, at construction).
  options::io_backend io_backend() const noexcept { return io_backend_; }
  // io_closed(): the destructor has begun: every I/O call in flight on
  // the workers' reactors is cancelled (each worker cancels its own at its
  // next poll; the destructor wakes them all), and every call made from
  // now on fails at once, with operation_canceled (docs/io.md, Shutdown).
  bool io_closed() const noexcept { return io_closed_.load(std::memory_order_seq_cst); }

  // The worker of this runtime the calling thread is, or null.
  worker* local_worker() const noexcept;

  // Where a `worker* w` parameter appears below, it is local_worker() of the
  // calling thread, found once by the caller: null on a thread that is not
  // one of this runtime's workers.
  fiber_slot allocate(std::size_t size, std::size_t align, std::size_t state_size, std::size_t state_align);
  void discard(fiber* f, worker* w) noexcept;
  void start(fiber* f, task_base* task, join_state* state, const spawn_options& opts, worker* w);

  // try_to_wake_up() makes a fiber runnable, new (placement_kind::spawn) or
  // woken: the engine's wake-up event places it (by the policy unless
  // pinned) and queues it, and the backend wakes whoever must run it. The
  // kernel's try_to_wake_up(), the caller of core.c's decision; the switch
  // decision itself is engine::schedule(). `why` is what woke it, known
  // where the wake-up starts (a spawn, a primitive's notify, a timer, a
  // stop request, the blocking pool, an exit to its joiner) and passed down
  // as it is: the engine counts it and never places by it.
  void try_to_wake_up(fiber* f, placement_kind kind, wake_reason why) noexcept;
  void try_to_wake_up(fiber* f, placement_kind kind, wake_reason why, worker* w) noexcept;
  // The same, for a wake-up whose waker is not the calling worker: a timer
  // is the worker's that armed it, whichever worker fires it (the kernel's
  // hrtimer interrupt runs on the CPU that armed it), so wake_affine() pulls
  // nothing towards a spinning worker that only happened to look first.
  void try_to_wake_up(fiber* f, placement_kind kind, wake_reason why, worker* w, int waker) noexcept;
  // carry_out() wakes whom a wake-up's result names (the worker it queued
  // on, a parked worker to balance); `w` is the calling worker, or null.
  void carry_out(const wake_result& r, worker* w) noexcept;
  // fiber_done() publishes completion and ends its joiner's wait; runs on
  // the fiber, on worker `w`. A joiner on a thread is resumed here; a
  // joining fiber, claimed, comes back, for the exit's switch to wake
  // (worker::exit_current, where the join hand-off gives it the worker).
  fiber* fiber_done(fiber* f, worker* w) noexcept;
  // recycle() gives the block of a fiber that has exited back to worker
  // `w`'s cache: the context that runs after the exit, once the fiber's
  // registers are saved (its join state lives on apart).
  void recycle(fiber* f, worker& w) noexcept;

  // kick_idle(): work is queued behind the busy worker `busy_cpu` and the
  // policy lets idle workers pull it: get one idle worker to balance. A
  // plain kick wakes a parked worker when none spins; a pull kick
  // (wake_result::pull) asks a spinning one first (it is awake), and either
  // balances unrationed.
  void kick_idle(int busy_cpu, worker* w, bool pull = false) noexcept;

  std::atomic<int> nr_spinning{0};
  std::atomic<int> nr_parked{0};

  // ---- the timer watcher (timers.cpp; docs/architecture.md, "Timers") ----
  // One parked worker at a time is the watcher: it sleeps only until the
  // earliest timer of every worker that is not parked (a parked worker
  // wakes for its own), so that a timer whose worker runs a fiber that does
  // not yield is fired by an idle worker, late by no more than a wake-up.
  // watch_timer(): worker `w`, not parked, has `deadline` as its earliest
  // timer; wake the watcher if it sleeps past it, or a parked worker to
  // become the watcher if there is none. Any thread.
  void watch_timer(std::int64_t deadline, const worker& w) noexcept;
  // watched_deadline() is what the watcher `self` sleeps until: the earliest
  // timer of itself and of every worker not parked.
  std::int64_t watched_deadline(const worker& self) const noexcept;
  // pass_watch(): `self`, the watcher until it unparked, goes to run a
  // fiber; if timers wait and nobody watches, wake a parked worker to.
  void pass_watch(const worker& self) noexcept;
  // The watcher's worker index, -1 for none; and the deadline it sleeps
  // until (meaningful while timer_watcher >= 0).
  std::atomic<int> timer_watcher{-1};
  std::atomic<std::int64_t> watch_until{far_deadline_ns};

  // ---- the monitor (monitor.hpp, monitor.cpp; docs/architecture.md) ------
  // wake_monitor_if_asleep(): a worker has just unparked; if the monitor
  // sleeps because every worker was parked, wake it. The worker's seq_cst
  // decrement of nr_parked, then this load, against the monitor's store of
  // its word, then its load of nr_parked: one side sees the other. One
  // load when the monitor is awake.
  void wake_monitor_if_asleep() noexcept {
    if (monitor_word_.load(std::memory_order_seq_cst) == monitor_asleep) [[unlikely]] wake_monitor();
  }
  // What a stall report says, and what on_stall() is given.
  struct stall_info {
    int worker;
    std::uint64_t fiber_id;
    const char* label;       // spawn_options::label, or null
    std::int64_t quiet_ns;   // how long it has run without a switch or a preempt point
  };
  // on_stall() runs on the monitor's thread after a stall is logged, once
  // per stall: the place for what a stall should also leave behind (the
  // trace recorder's last events, written to options::trace when a flight
  // recorder runs). It must not block for long: the monitor does not look
  // at the workers while it runs.
  void on_stall(const stall_info& s) noexcept;
  // monitor_config(): the monitor's thresholds in counter ticks, from the
  // options and the engine (the slice under FIFO and LIFO; 0 under a fair
  // policy, whose tick ends slices).
  monitor::config monitor_config() const noexcept;
  // How long every worker must stay parked, fibers alive and nothing able
  // to wake one, before the monitor reports a hang: long enough that a
  // program waiting for a thread outside the runtime (a plain thread that
  // sends on a channel) is not reported for a short wait, short enough to
  // come long before anyone gives up on the program. At least the stall
  // threshold.
  static constexpr std::chrono::milliseconds hang_quiet_after{1000};

 private:
  std::uint64_t external_random() noexcept;
  // start_workers() starts every worker's thread, or none: on a failure it
  // stops and joins those started and throws std::system_error.
  void start_workers();
  // stop_workers() tells every worker to stop and joins its thread.
  void stop_workers() noexcept;
  // The blocking pool's threads: each takes calls from the queue until
  // the runtime stops it (stop_blocking_pool, after the last fiber).
  void blocking_thread_main() noexcept;
  void stop_blocking_pool() noexcept;

  options opts_;
  // The blocking pool (usched::blocking): a FIFO of calls under a mutex,
  // the threads started so far and how many of them wait for a call.
  struct blocking_pool {
    std::mutex mutex;
    std::condition_variable ready;
    blocking_job* head = nullptr;
    blocking_job* tail = nullptr;
    std::vector<std::thread> threads;
    std::size_t queued = 0;  // calls in the queue
    std::size_t idle = 0;    // threads waiting for a call
    bool stopping = false;
  } blocking_;
  usched::runtime* owner_ = nullptr;
  topology topo_;
  std::vector<worker_place> places_;
  std::shared_ptr<spdlog::logger> log_;
  engine engine_;
  std::unique_ptr<tracer> tracer_;
  // What dump_raw_in_signal() needs, made before any fiber runs: the raw
  // dump's path (empty: none) and the policy's name.
  std::string raw_trace_path_;
  char policy_name_[44] = {};
  // start_tracing(): makes the recorder the options ask for, and checks
  // that a whole run's file can be written before anything runs.
  void start_tracing();
  // write_trace_at_exit(): a whole run's trace, to options::trace, once
  // the workers have stopped; a failure is logged, not thrown.
  void write_trace_at_exit() noexcept;
  stack_pool pool_;
  stack_pool::ledger* teardown_books_ = nullptr;  // record_books_at_teardown()
  worker_unit unit_ = worker_unit::pu;
  bool fp_in_frame_ = false;
  fp_control initial_fp_;
  bool pinned_ = false;
  bool oversubscribed_ = false;
  double cycles_per_ns_ = 1.0;
  double ns_per_cycle_ = 1.0;
  std::uint64_t tick_cycles_ = 0;
  std::int64_t spin_ns_ = 0;
  std::vector<std::unique_ptr<worker>> workers_;

  std::atomic<std::uint64_t> next_id_{1};

 public:
  // Fiber ids are handed to workers in blocks of this many.
  static constexpr std::uint64_t id_block = 1024;
  std::uint64_t reserve_ids(std::uint64_t n) noexcept {
    return next_id_.fetch_add(n, std::memory_order_relaxed);
  }

 private:
  std::atomic<std::uint64_t> external_seq_{0};
  std::atomic<bool> stopping_{false};

  // Live fibers: spawned minus finished, counted per worker (worker::
  // spawned_, exited_) plus spawns from threads that are not workers here.
  // all_done() is true when every fiber spawned so far has finished.
  bool all_done() const noexcept;
  // How long the destructor waits for the last fibers before it says which
  // ones it is waiting for (report_hang), and then again after twice as
  // long each time: long enough that a shutdown which is merely slow stays
  // quiet, short enough that a hung one is explained before anyone gives up
  // on it. Documented in runtime.hpp and docs/architecture.md.
  static constexpr std::chrono::milliseconds hang_report_after{2000};
  void report_hang(std::chrono::milliseconds waited);
  // The fibers blocked now (their wait token armed), by id, and how many
  // are alive; log_blocked() writes one line per blocked fiber (at most
  // hang_report_max_fibers, then a count). Shared by the destructor's
  // report and the monitor's.
  struct blocked_fiber {
    std::uint64_t id;
    std::string name;
    wait_kind kind;
    const void* object;
  };
  std::vector<blocked_fiber> blocked_fibers(std::uint64_t& live) const;
  void log_blocked(const std::vector<blocked_fiber>& blocked);
  // ---- the monitor's side (monitor.cpp) ----
  friend struct monitor_host;
  void start_monitor();
  void stop_monitor() noexcept;
  void monitor_main() noexcept;
  void wake_monitor() noexcept;
  // report_stall(): worker i's run `mark` has gone `quiet` counter ticks
  // without a switch or a preempt point; logs it and calls on_stall().
  void report_stall(std::size_t i, std::uint64_t mark, std::uint64_t quiet);
  // report_idle_hang(): every worker parked for `quiet` ticks with fibers
  // alive that nothing inside the runtime can wake.
  void report_idle_hang(std::uint64_t quiet);
  // hang_possible(): fibers alive, no timer armed on any worker, no I/O in
  // flight, no blocking call queued or running, and the destructor not
  // draining (it has its own report).
  bool hang_possible();
  static constexpr std::uint32_t monitor_awake = 0, monitor_napping = 1, monitor_asleep = 2;
  alignas(64) std::atomic<std::uint32_t> monitor_word_{monitor_awake};
  std::atomic<bool> monitor_stop_{false};
  std::thread monitor_thread_;
  // choose_io_backend(): options::io against probe_io_support(); throws
  // config_error when io_uring is insisted on and cannot be had.
  options::io_backend choose_io_backend();
  options::io_backend io_backend_ = options::io_backend::epoll;
  alignas(64) std::atomic<std::uint64_t> external_spawned_{0};
  // Set by the destructor while it waits for all_done(); an exiting fiber
  // that sees it wakes the destructor to look again.
  std::atomic<bool> draining_{false};
  std::atomic<bool> io_closed_{false};
  // Wake-ups in progress from threads that are not this runtime's workers
  // (try_to_wake_up): the destructor waits for them after the last fiber.
  std::atomic<int> external_wakers_{0};
  std::mutex live_mutex_;
  std::condition_variable live_cv_;
};

// lend_fiber_locals() makes `f`'s fiber_local table the one fiber_local
// uses on the calling thread, a blocking pool thread about to run `f`'s
// usched::blocking call, until it is called again with null
// (fiber_local.cpp). `f` is blocked in that call meanwhile, so its table
// has one user at a time.
void lend_fiber_locals(fiber* f) noexcept;

}  // namespace usched::detail
