// worker.hpp: a worker of the real backend: an OS thread, pinned to one PU
// or core with hwloc, that runs fibers through Boost.Context (worker.cpp;
// its timers are timers.cpp's).
//
// Worker state machine (docs/architecture.md has the picture):
//   run   - executing fibers, switching directly from one to the next
//   idle  - back in the worker's own context: timers, local queue, newly-idle
//           balance through the engine
//   spin  - nothing found: poll the queue (and balance again) for options.spin
//   park  - sleep on a futex until a push, a timer deadline or shutdown
// A push onto a parked worker's queue always wakes it: the pusher publishes the
// fiber (a seq_cst store of the queue count) and then reads the worker's park
// word; the parker writes the park word and then re-reads the queue count, all
// seq_cst. One of the two sees the other.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include <usched/runtime.hpp>

#include "clock.hpp"
#include "domains.hpp"
#include "engine.hpp"
#include "random.hpp"
#include "fiber_impl.hpp"
#include "monitor.hpp"
#include "reactor.hpp"
#include "topology.hpp"

namespace usched::detail {

class runtime_impl;
class worker;

// The engine's clock in the real backend (clock.hpp), as an event's
// now_source: read when the engine first needs it, at most once.
inline std::int64_t read_engine_clock() noexcept { return engine_now_ns(); }
inline now_source engine_clock() noexcept { return now_source(&read_engine_clock); }
// switch_clock() is the clock of a running fiber's switch: an engine that
// keeps time (the fair discipline, load tracking) reads it on every switch
// away from a fiber, so it is read here, inline, instead of through the
// now_source's call; the others never read it.
inline now_source switch_clock(const engine& e) noexcept {
  return e.keeps_time() ? now_source(engine_now_ns()) : engine_clock();
}

// The worker the calling OS thread is (of any runtime), or null.
worker* worker_of_this_thread() noexcept;

// A sleeping or timed wait, in the heap of the worker it blocked on.
struct timer_entry {
  std::int64_t deadline;
  fiber* f;
  std::uint64_t token;
  bool operator>(const timer_entry& o) const noexcept { return deadline > o.deadline; }
};

class worker {
 public:
  worker(runtime_impl& rt, int index, const worker_place& place);
  worker(const worker&) = delete;
  worker& operator=(const worker&) = delete;

  void start();
  void join();

  int index() const noexcept { return index_; }
  runtime_impl& rt() const noexcept { return rt_; }
  // The running fiber, or null when the worker is in its own context.
  fiber* current_fiber() const noexcept { return current_ == &idle_ ? nullptr : current_; }

  // ---- called on this worker's thread, by the running fiber -------------
  // yield_current() requeues the running fiber behind the next one, if any:
  // `action` is prev_action::yield for this_fiber::yield(), requeue for a
  // preemption at a preempt point.
  void yield_current(prev_action action = prev_action::yield);
  // block_current() switches away from `self`, which has armed `token` and
  // published itself; when has_timer(deadline_ns), a timer on this worker's
  // heap claims the token then. `joined`: the fiber `self` waits for (a
  // join); if it is queued here, it runs next (the join hand-off).
  void block_current(fiber* self, std::uint64_t token, std::int64_t deadline_ns, fiber* joined = nullptr);
  // exit_current() leaves the finished running fiber forever. `joiner`:
  // the fiber fiber_done() claimed, which waited for this one to finish;
  // it is woken here, in the exit's switch.
  [[noreturn]] void exit_current(fiber* joiner);
  // preempt_requested() is this_fiber::preempt_point()'s fast path: one
  // relaxed load of the request word (relaxed: a request seen a preempt
  // point late is honoured at the next one; the slow path's exchange is the
  // acquire that pairs with a waker's release).
  bool preempt_requested() const noexcept { return preempt_request_.load(std::memory_order_relaxed) != 0; }
  // preempt_check() is the slow path, when something was requested: take
  // the request, run the tick if it is due, and yield if a wake-up asked
  // for it or the slice is used up while others wait (engine::
  // should_preempt). With I/O in flight it reaps, and asks for the next
  // preempt point's look too, so that completions are reaped at every one.
  void preempt_check();
  // splitmix64 over the worker's own state.
  std::uint64_t next_random() noexcept { return splitmix64(rng_); }
  // A fresh fiber id, from a block this worker reserved: the shared counter
  // is touched once per id_block spawns, not on every one.
  std::uint64_t next_fiber_id() noexcept {
    if (id_next_ == id_end_) [[unlikely]] reserve_fiber_ids();
    return id_next_++;
  }
  std::vector<cpu_snapshot>& scratch() noexcept { return scratch_; }
  // The worker's cache of pooled fibers, for its own spawns and exits.
  fiber* take_fiber() {
    if (fiber_cache_.empty()) [[unlikely]] refill_fiber_cache();
    fiber* f = fiber_cache_.back();
    fiber_cache_.pop_back();
    // The next spawn's fiber, while this one's spawn goes on.
    if (!fiber_cache_.empty()) prefetch_for_spawn(fiber_cache_.back(), keeps_time_);
    return f;
  }
  void give_fiber(fiber* f) {
    if (fiber_cache_.size() == fiber_cache_max) [[unlikely]] spill_fiber_cache();
    fiber_cache_.push_back(f);
  }

  // ---- any thread ---------------------------------------------------------
  // notify() wakes the worker if it is parked. The caller has published work
  // on its runqueue (engine::add_runnable's seq_cst store of the count).
  void notify() noexcept;
  bool parked() const noexcept { return park_word_.load(std::memory_order_seq_cst) != 0; }
  // request_preempt() asks the running fiber to look at its next preempt
  // point (request_look, monitor.hpp); the release pairs with the slow
  // path's acquire, so what the requester wrote first (a wake-up's
  // need_resched) is seen there.
  void request_preempt(std::uint64_t bits) noexcept { preempt_request_.fetch_or(bits, std::memory_order_release); }
  // request_by_monitor(): the monitor's request; with request_slice, its
  // word that the run `mark` has used up its slice, which replaces an
  // older run's slice request.
  void request_by_monitor(std::uint64_t bits, std::uint64_t mark) noexcept;

  // ---- read by the monitor (monitor.hpp), atomics only --------------------
  // run_mark(): this worker's switch count x 2, + 1 while a fiber runs;
  // run_fiber(): the fiber of that run (acquire: its id and label were
  // written before it was queued). next_tick_cycles(): the counter time of
  // its next tick. parked_in_io(): parked in its reactor (I/O in flight).
  std::uint64_t run_mark() const noexcept { return run_mark_.load(std::memory_order_acquire); }
  const fiber* run_fiber() const noexcept { return run_fiber_.load(std::memory_order_acquire); }
  std::uint64_t next_tick_cycles() const noexcept { return next_tick_cycles_.load(std::memory_order_relaxed); }
  std::uint64_t looks() const noexcept { return looks_.load(std::memory_order_relaxed); }
  bool parked_in_io() const noexcept { return park_word_.load(std::memory_order_seq_cst) == park_io; }
  std::uint64_t parks() const noexcept { return parks_; }
  // kick_spinning() asks this worker, if it is spinning in its idle loop, to
  // leave the spin and balance unrationed (a pull kick, wake_result::pull);
  // false when it is not spinning. A kick already pending counts as done.
  bool kick_spinning() noexcept {
    std::uint32_t s = spin_word_.load(std::memory_order_seq_cst);
    if (s == spin_kicked) return true;
    return s == spin_open && spin_word_.compare_exchange_strong(s, spin_kicked, std::memory_order_seq_cst);
  }
  // mark_pull(): the parked worker about to be notified for a pull kick
  // balances unrationed when it wakes. A mark that finds it already awake
  // is cleared by its next spin.
  void mark_pull() noexcept { spin_word_.store(spin_kicked, std::memory_order_seq_cst); }
  // The earliest deadline on this worker's timer heap, far_deadline_ns when
  // it is empty. Written under the heap's lock (seq_cst: the timer watcher's
  // hand-shake, see runtime_impl::watch_timer), read without it.
  std::int64_t earliest_timer() const noexcept { return earliest_timer_.load(std::memory_order_seq_cst); }

  worker_stats stats() const noexcept;

  // ---- I/O (reactor.hpp, docs/io.md) ----------------------------------------
  // io(): this worker's reactor, made on first use by a fiber running on it
  // (the worker's own thread). Throws std::system_error if the kernel
  // refuses both backends.
  reactor& io() {
    if (!io_) [[unlikely]] make_reactor();
    return *io_;
  }

 private:
  friend class runtime_impl;
  void main();
  fiber* find_work();
  void idle_wait();
  // ---- timers (timers.cpp; docs/architecture.md, "Timers") ----
  // add_timer() puts a wait's deadline on this worker's heap; the running
  // fiber's worker only.
  void add_timer(std::int64_t deadline_ns, fiber* f, std::uint64_t token);
  // run_timers() fires this worker's own timers due by `now`; its thread
  // only (the switch paths and the idle loop).
  void run_timers(std::int64_t now);
  // fire_timers() pops the entries of this worker's heap due by `now` and
  // resumes their waits, on the thread of worker `by` (this one, or an idle
  // worker firing the timers of a busy one). With `try_only` it gives up
  // when the heap's lock is taken: its holder is firing them, or is the owner
  // adding one, and the caller looks again at its next poll. Returns
  // how many waits it resumed. Any thread; takes timer_lock_.
  std::size_t fire_timers(std::int64_t now, worker& by, bool try_only);
  // fire_due_timers() is the idle worker's look at every worker's heap:
  // fires what is due anywhere. True if it resumed a wait.
  bool fire_due_timers();
  // leaving_idle() runs when the idle loop found a fiber to run: the
  // runtime's timer watcher must now cover this worker's timers, and an
  // ex-watcher passes its watch to a parked worker.
  void leaving_idle() noexcept;
  // poll_io(): a look at the reactor from a switch path (at most every
  // io_switch_poll_ns) or a preempt point (`eager`: every one, and it
  // submits whatever waits), when it has something in flight: cheap unless
  // a completion (or a submission batch) is ready.
  void poll_io(bool eager) {
    if (!eager) {
      const std::uint64_t c = cycles();
      if (c < next_io_poll_cycles_) return;
      next_io_poll_cycles_ = c + io_poll_interval_cycles_;
    }
    if (io_->ready()) poll_io_uncharged(eager);
  }
  // poll_io_uncharged(): the reactor's poll, whose time (its system calls
  // do the kernel's network work for every fiber here) is not charged to
  // the running fiber (engine::foreign_begin).
  void poll_io_uncharged(bool eager);
  bool io_busy() const noexcept { return io_ != nullptr && io_->busy(); }
  void make_reactor();
  void reserve_fiber_ids() noexcept;
  void refill_fiber_cache();
  void spill_fiber_cache();
  // Fibers a worker keeps for its own spawns before returning them to the
  // runtime's pool: enough for bursts of short-lived fibers without touching
  // the pool's lock. A fiber's block is recycled where it exits, not where
  // it is joined, so a worker that runs another's children fills its cache
  // and spills to the pool while the spawner refills from it: a spawn and
  // join under cfs on 2 workers costs about 1.28x what it did when joins
  // recycled. A cache of 1,024 (0.93x) was measured and not kept: every
  // cached block is mapped, resident (about 8 KiB) and, under
  // ThreadSanitizer, a fiber context of its own (TSan stops a process at
  // 8,128), and a worker that only reaps would keep 1,024 of them.
  static constexpr std::size_t fiber_cache_max = 64;
  void switch_to(fiber* next, bool prev_exits);
  void switch_current(prev_action action, const now_source& now);
  // publish_run(): a new run starts on this worker (`next`, or the idle
  // context): a new run mark, for the monitor to time the slice and a
  // stall from. No clock is read here: reading the counter costs as much
  // as the rest of a switch, and the monitor's own look stands in for it.
  // Release stores: the fiber's id and label are read after the mark.
  void publish_run(fiber* next) noexcept {
    run_seq_ += 2;
    const bool running = next != &idle_;
    run_fiber_.store(running ? next : nullptr, std::memory_order_release);
    run_mark_.store(run_seq_ | (running ? 1u : 0u), std::memory_order_release);
  }
  // arm_io_look(): with I/O in flight, the next preempt point looks (and
  // reaps); called where the switch paths already found io_busy().
  // A load first: the bit is usually set already (the last preempt point
  // set it), and a locked write on every such switch would cost more.
  void arm_io_look() noexcept {
    if ((preempt_request_.load(std::memory_order_relaxed) & request_look) == 0) {
      preempt_request_.fetch_or(request_look, std::memory_order_relaxed);
    }
  }
  unsigned tick(std::int64_t now);  // fibers its periodic balance pulled here
  void account_idle_busy(bool becoming_idle, std::uint64_t now_cycles) noexcept;
  void finish_switch(bctx::fcontext_t from) noexcept;
  static void fiber_entry(bctx::transfer_t t);

  runtime_impl& rt_;
  const int index_;
  const worker_place place_;
  const bool keeps_time_;  // the engine's keeps_time(), for prefetch_for_spawn()
  std::thread thread_;

  fiber idle_;               // this worker's own context (its thread's stack)
  fiber* current_ = &idle_;  // what runs now
  fiber* pending_prev_ = nullptr;  // the context being switched away from
  bool pending_exit_ = false;      // ... and whether it has finished for good
  // The counter time of the next tick; written by this worker only,
  // relaxed (the monitor reads it to ask for the tick: a stale value costs
  // one look).
  std::atomic<std::uint64_t> next_tick_cycles_{0};
  std::uint64_t run_seq_ = 0;  // this worker's switches x 2 (publish_run)
  // When the worker last went idle or busy, in counter ticks: the switch out
  // of the idle loop is on the wake-up path, where the counter costs less
  // than half of a steady-clock read.
  std::uint64_t phase_start_cycles_ = 0;
  std::uint64_t found_cycles_ = 0;  // the counter when find_work() last looked

  // Whether this worker's heap may hold timers: set when it adds one,
  // cleared when it sees the heap empty. Only this worker's thread touches
  // it, so the switch paths test a plain flag, not the heap's lock or
  // atomics (another worker emptying the heap leaves it set until then).
  bool has_timers_ = false;
  // This worker is parked as the runtime's timer watcher (watching_), or
  // was and has not yet passed the watch on (pass_watch_); own thread.
  bool watching_ = false;
  bool pass_watch_ = false;
  bool kicked_ = false;  // the idle wait ended with a pull kick: balance unrationed
  std::vector<cpu_snapshot> scratch_;
  std::vector<fiber*> fiber_cache_;
  std::uint64_t rng_;
  std::uint64_t id_next_ = 0;
  std::uint64_t id_end_ = 0;

  // The earliest counter value at which a switch looks at the reactor
  // again, and the interval (io_switch_poll_ns in counter ticks): a look
  // per switch would cost more in system calls than the batch it waits
  // for saves.
  std::uint64_t next_io_poll_cycles_ = 0;
  std::uint64_t io_poll_interval_cycles_ = 0;
  static constexpr std::int64_t io_switch_poll_ns = 1'000'000;
  // The reactor, or null until the first I/O call here. Written once, by
  // this worker's thread, before any park in it (park_word_ == park_io),
  // so a notify() that reads park_io reads the pointer too.
  std::unique_ptr<reactor> io_;

  // park_futex while parked on the futex (or about to park), park_io while
  // parked in the reactor's wait (it has I/O in flight), 0 otherwise.
  static constexpr std::uint32_t park_futex = 1, park_io = 2;
  alignas(64) std::atomic<std::uint32_t> park_word_{0};
  // While the idle loop spins under a policy whose idle workers do not
  // balance by themselves: spin_open, or spin_kicked once a busy worker
  // has asked it to balance (kick_spinning(), or mark_pull() before a
  // park's notify); spin_none otherwise. Not on the park word's line: every
  // wake-up's notify() reads that one, and the spinner writes this one as
  // its spin starts and ends, which would cost the wake-up of a spinning
  // worker a line transfer on its way to the fiber (measured: +80-100 ns).
  static constexpr std::uint32_t spin_none = 0, spin_open = 1, spin_kicked = 2;
  alignas(64) std::atomic<std::uint32_t> spin_word_{spin_none};

  // The preempt request (monitor.hpp's request bits and run mark), read at
  // every preempt point, written by the monitor, by wakers and by this
  // worker; and this worker's current run, written at every switch and
  // read by the monitor once a look. One line: the worker's preempt points
  // and switches keep it in its cache between the monitor's looks.
  alignas(64) std::atomic<std::uint64_t> preempt_request_{0};
  std::atomic<std::uint64_t> run_mark_{0};
  std::atomic<const fiber*> run_fiber_{nullptr};
  // Preempt points' slow paths taken so far: the monitor's sign that the
  // running fiber answers (it is long, not stalled). Own thread writes.
  std::atomic<std::uint64_t> looks_{0};

  // The timer heap, on lines of its own: other workers read earliest_timer_
  // while idle and take timer_lock_ to fire what is due, and neither may
  // share a line with what this worker's switches write.
  // timers_ is a min-heap by deadline, under timer_lock_; only this worker
  // adds to it, any worker pops due entries (fire_timers).
  alignas(64) std::atomic<std::int64_t> earliest_timer_{far_deadline_ns};
  spinlock timer_lock_;
  std::vector<timer_entry> timers_;

  // Counters written by this worker's thread only; relaxed atomics so that
  // runtime::stats() may read them from another thread at any time.
  stat_counter fibers_run_;
  stat_counter parks_;
  // Fibers this worker's thread spawned and fibers that finished on it. The
  // runtime's destructor sums them over all workers (runtime_impl::all_done)
  // instead of every spawn and exit changing one shared counter, whose
  // cache line would cross between workers whenever a fiber is stolen.
  // Single writer; release stores, acquire loads by the destructor.
  std::atomic<std::uint64_t> spawned_{0};
  // The spawn backlog (spawn.cpp) was over its bound at this worker's last
  // look: it looks at every spawn until it is not. Own thread.
  bool backlog_long_ = false;
  std::atomic<std::uint64_t> exited_{0};
  stat_counter idle_cycles_;  // converted to ns by stats()
  stat_counter busy_cycles_;
};

}  // namespace usched::detail
