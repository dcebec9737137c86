// worker.cpp: one worker's thread: switching, idling, spinning, parking
// (its timers are in timers.cpp).
#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <pthread.h>
#include <csignal>
#include <system_error>
#include <thread>
#include <utility>

#include "clock.hpp"
#include <usched/detail/cpu_relax.hpp>
#include "futex.hpp"
#include "overflow.hpp"
#include "runtime_impl.hpp"
#include <usched/fiber.hpp>

namespace usched::detail {
namespace {

thread_local worker* tls_worker = nullptr;

// Spin-loop iterations between two clock reads / balance attempts while
// spinning: the clock costs tens of nanoseconds, a pause a few.
constexpr unsigned spin_poll_iterations = 64;

// Iterations of pause while waiting for a fiber to finish switching away on
// another worker, before yielding the OS thread (its worker may have been
// preempted by the kernel in the middle of the switch).
constexpr unsigned on_cpu_spins_before_yield = 1024;

// The entry of a frame made only to be looked at (fp_in_first_frame).
[[noreturn]] void never_entered(bctx::transfer_t) { std::abort(); }

}  // namespace

bool fp_in_first_frame() noexcept {
#if defined(__x86_64__)
  // A frame made on a scratch area (make_fcontext only writes it; nothing
  // runs there) while flush-to-zero and the x87 rounding are flipped.
  alignas(64) unsigned char area[512];
  const fp_control saved = fp_control::current();
  fp_control probe = saved;
  probe.mxcsr ^= 0x8000u;
  probe.x87_cw ^= 0x0c00u;
  probe.load();
  const bctx::fcontext_t frame = bctx::make_fcontext(area + sizeof area, sizeof area, &never_entered);
  saved.load();
  const auto at = reinterpret_cast<std::uintptr_t>(frame);
  const auto lo = reinterpret_cast<std::uintptr_t>(area);
  if (at < lo || at + 6 > lo + sizeof area) return false;
  std::uint32_t mxcsr = 0;
  std::uint16_t x87_cw = 0;
  std::memcpy(&mxcsr, area + (at - lo), sizeof mxcsr);
  std::memcpy(&x87_cw, area + (at - lo) + 4, sizeof x87_cw);
  return mxcsr == probe.mxcsr && x87_cw == probe.x87_cw;
#else
  return false;
#endif
}

// Fibers migrate between OS threads at every switch, and the compiler may
// keep the address of a thread_local across a call within one function. Every
// read of the current worker goes through this out-of-line function, so it
// is computed afresh on the thread that runs now.
[[gnu::noinline]] worker* worker_of_this_thread() noexcept {
  asm volatile("" ::: "memory");
  return tls_worker;
}

worker::worker(runtime_impl& rt, int index, const worker_place& place)
    : rt_(rt),
      index_(index),
      place_(place),
      keeps_time_(rt.eng().keeps_time()),
      rng_(0x5eed0000ULL + static_cast<std::uint64_t>(index)) {
  fiber_cache_.reserve(fiber_cache_max);
  timers_.reserve(64);
}

void worker::start() { thread_ = std::thread([this] { main(); }); }

void worker::join() {
  if (thread_.joinable()) thread_.join();
}

void worker::reserve_fiber_ids() noexcept {
  id_next_ = rt_.reserve_ids(runtime_impl::id_block);
  id_end_ = id_next_ + runtime_impl::id_block;
}

// An empty cache takes half its size from the pool at once: a worker that
// spawns more fibers than it reaps (the others' fibers end elsewhere) takes
// the pool's lock once per that many spawns, not on every one.
void worker::refill_fiber_cache() {
  // Straight into the cache's storage (reserved for its maximum): half
  // the cache is a page of pointers, too many for the spawning fiber's
  // stack.
  const std::size_t have = fiber_cache_.size();
  fiber_cache_.resize(have + fiber_cache_max / 2);
  const std::size_t n = rt_.pool().take(fiber_cache_.data() + have, fiber_cache_max / 2);
  fiber_cache_.resize(have + n);
}

// A full cache hands half back, so a worker that only reaps (its fibers were
// spawned elsewhere) does not hoard them.
void worker::spill_fiber_cache() {
  const std::size_t half = fiber_cache_max / 2;
  rt_.pool().give(fiber_cache_.data() + half, fiber_cache_.size() - half);
  fiber_cache_.resize(half);
}

void worker::account_idle_busy(bool becoming_idle, std::uint64_t now) noexcept {
  const std::uint64_t spent = now > phase_start_cycles_ ? now - phase_start_cycles_ : 0;
  if (becoming_idle) {
    busy_cycles_.add(spent);
  } else {
    idle_cycles_.add(spent);
  }
  phase_start_cycles_ = now;
}

worker_stats worker::stats() const noexcept {
  worker_stats s;
  const engine& e = rt_.eng();
  s.fibers_run = fibers_run_;
  s.parks = parks_;
  s.idle_ns = static_cast<std::uint64_t>(static_cast<double>(idle_cycles_.get()) / rt_.cycles_per_ns());
  s.busy_ns = static_cast<std::uint64_t>(static_cast<double>(busy_cycles_.get()) / rt_.cycles_per_ns());
  e.add_counters(index_, s);
  return s;
}

// ---- switching -------------------------------------------------------------

// Inline into its callers: the yield path is then one frame around the
// context switch, whose own register saves are all a switch needs.
[[gnu::always_inline]] inline void worker::switch_to(fiber* next, bool prev_exits) {
  fiber* prev = current_;
  if (next != &idle_) {
    // Another worker may still be saving this fiber's registers (it was made
    // runnable while switching away there). Wait for that to finish; the
    // acquire pairs with finish_switch()'s release.
    unsigned spins = 0;
    while (next->on_cpu.load(std::memory_order_acquire)) {
      if (++spins < on_cpu_spins_before_yield) {
        cpu_relax();
      } else {
        sched_yield();
        spins = 0;
      }
    }
    fibers_run_.add();
  }
  next->on_cpu.store(true, std::memory_order_relaxed);
  // A fiber's first frame is made here, by the worker that runs it, so the
  // top of its stack is written on this core rather than the spawner's. The
  // top comes from the context, on the control block's run line, not from
  // fiber::stack_top, on a line only the spawning side reads.
  // It starts with the runtime's floating-point state, not that of the
  // context running now, which make_fcontext() copies (see fp_control).
  if (!next->ctx.fctx) [[unlikely]] {
    next->ctx.fctx = bctx::make_fcontext(next->ctx.stack_top(), next->ctx.stack_size, &worker::fiber_entry);
    if (rt_.fp_in_frame()) set_first_frame_fp(next->ctx.fctx, rt_.initial_fp());
  }
  // Leaving the idle context happens only right after find_work(), whose
  // counter read is recent enough: a second read would cost the wake-up
  // path as much as the rest of this function.
  if (prev == &idle_ && next != &idle_) account_idle_busy(false, found_cycles_);
  if (prev != &idle_ && next == &idle_) account_idle_busy(true, cycles());
  current_ = next;
  pending_prev_ = prev;
  pending_exit_ = prev_exits;
  publish_run(next);
  bctx::transfer_t t = jump(prev->ctx, next->ctx, this, prev_exits);
  // Resumed, possibly on another worker: that worker passed itself as data.
  static_cast<worker*>(t.data)->finish_switch(t.fctx);
}

// finish_switch() runs first thing in the context that was just switched
// into, on behalf of the context that was left.
[[gnu::always_inline]] inline void worker::finish_switch(bctx::fcontext_t from) noexcept {
  fiber* prev = pending_prev_;
  prev->ctx.fctx = from;
  if (pending_exit_) {
    prev->on_cpu.store(false, std::memory_order_relaxed);
    rt_.recycle(prev, *this);
  } else {
    prev->on_cpu.store(false, std::memory_order_release);
  }
}

void worker::fiber_entry(bctx::transfer_t t) {
  entered();
  auto* w = static_cast<worker*>(t.data);
  w->finish_switch(t.fctx);
  fiber* self = w->current_;
  // Where the first frame could not be given the runtime's floating-point
  // state (see fp_control), take it now.
  if (!w->rt_.fp_in_frame()) [[unlikely]] w->rt_.initial_fp().load();
  self->task->invoke(self->task);
  // Its fiber_local values end with it, on its own stack (their destructors
  // may block), before anyone learns it is done. The table stays for the
  // next fiber this one's memory serves.
  if (self->locals) [[unlikely]] self->locals->clear();
  // The task may have moved to another worker: look again, once.
  w = worker_of_this_thread();
  fiber* joiner = w->rt_.fiber_done(self, w);
  w->exit_current(joiner);
}

// switch_current() is yield_current() with the event's clock given: a
// preempt point has just read the counter, and a second read would cost it
// as much again (a preemption that a wake-up asked for is on that
// wake-up's latency).
[[gnu::always_inline]] inline void worker::switch_current(prev_action action, const now_source& now) {
  fiber* self = current_;
  engine& e = rt_.eng();
  if (has_timers_) [[unlikely]] run_timers(now_ns());
  if (io_busy()) [[unlikely]] {
    poll_io(false);
    arm_io_look();
  }
  const pick_result r = e.schedule(index_, self, action, now);
  if (r.pushed_to >= 0) rt_.worker_at(r.pushed_to).notify();
  auto* next = static_cast<fiber*>(r.next);
  if (next == self) {
    publish_run(self);
    return;
  }
  // An active balance may have pushed this fiber away and left nothing
  // queued here: then the worker goes idle.
  switch_to(next ? next : &idle_, false);
}

void worker::yield_current(prev_action action) { switch_current(action, switch_clock(rt_.eng())); }

void worker::block_current(fiber* self, std::uint64_t token, std::int64_t deadline_ns, fiber* joined) {
  if (has_timer(deadline_ns)) add_timer(deadline_ns, self, token);
  if (has_timers_) run_timers(now_ns());
  // The call a fiber blocks for is in the reactor's submission queue; it
  // goes to the kernel with the next batch (reactor_uring.cpp). The next
  // fiber's preempt points reap it.
  if (io_busy()) [[unlikely]] {
    poll_io(false);
    arm_io_look();
  }
  // An active balance asked of this worker is served at this switch too:
  // the worker it handed a fiber to must be woken.
  const pick_result r = rt_.eng().schedule(index_, self, prev_action::block, switch_clock(rt_.eng()), joined);
  if (r.pushed_to >= 0) rt_.worker_at(r.pushed_to).notify();
  auto* next = static_cast<fiber*>(r.next);
  // A wake-up that arrived before we got here turned the block into a
  // requeue; if nothing else is queued, we are picked again: keep running.
  if (next == self) {
    publish_run(self);
    return;
  }
  switch_to(next ? next : &idle_, false);
}

void worker::exit_current(fiber* joiner) {
  engine& e = rt_.eng();
  if (io_busy()) [[unlikely]] {
    poll_io(false);
    arm_io_look();
  }
  pick_result r;
  if (joiner && e.hands_back(*joiner, index_)) {
    // The join hand-off: the joiner runs next, in this switch.
    r = e.exit_to_joiner(index_, current_, joiner, switch_clock(e));
    if (r.kick) rt_.kick_idle(index_, this);
  } else {
    // A joiner elsewhere is woken first, as any wake-up, then the exit
    // picks what runs here.
    if (joiner) rt_.try_to_wake_up(joiner, placement_kind::wake, wake_reason::join, this);
    r = e.schedule(index_, current_, prev_action::exit, switch_clock(e));
  }
  if (r.pushed_to >= 0) rt_.worker_at(r.pushed_to).notify();
  auto* next = static_cast<fiber*>(r.next);
  switch_to(next ? next : &idle_, true);
  __builtin_unreachable();
}

void worker::request_by_monitor(std::uint64_t bits, std::uint64_t mark) noexcept {
  if ((bits & request_slice) == 0) {
    request_preempt(bits);
    return;
  }
  // The slice request names its run: it replaces an older run's, and keeps
  // a look asked for by anyone else.
  std::uint64_t was = preempt_request_.load(std::memory_order_relaxed);
  std::uint64_t want;
  do {
    want = (was & request_look) | bits | (mark << request_mark_shift);
  } while (!preempt_request_.compare_exchange_weak(was, want, std::memory_order_release, std::memory_order_relaxed));
}

void worker::preempt_check() {
  // Taken whole: the monitor asks again at its next look if it still must.
  // Acquire: a waker's need_resched, written before its request, is seen
  // by should_preempt below.
  const std::uint64_t req = preempt_request_.exchange(0, std::memory_order_acquire);
  if (current_ == &idle_) [[unlikely]] return;
  looks_.store(looks_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  // Completions first: a fiber they wake may be what ends this slice, and
  // none waits behind a fiber that runs long (docs/io.md, "Who reaps").
  // While I/O is in flight every preempt point looks, as before the
  // monitor: the next one is asked for now.
  if (io_busy()) [[unlikely]] {
    poll_io(true);
    arm_io_look();
  }
  const std::uint64_t now_c = cycles();
  const bool ticked = now_c >= next_tick_cycles_.load(std::memory_order_relaxed);
  if (ticked) tick(engine_now_ns(now_c));
  // The engine decides (a wake-up's request, or the slice used up while
  // others wait). The monitor measured the slice: it says so for this run
  // only (its mark), so a request left from the run before counts as none.
  const bool slice_over = (req & request_slice) != 0 &&
                          (req >> request_mark_shift) == (run_mark_.load(std::memory_order_relaxed) &
                                                          (~std::uint64_t{0} >> request_mark_shift));
  const std::int64_t ran_ns = slice_over ? std::numeric_limits<std::int64_t>::max() : 0;
  const engine& e = rt_.eng();
  if (!e.should_preempt(index_, ran_ns)) return;
  // The switch's clock is the reading above, unless the tick's work (a
  // balance pass) came between: then the time it took is the fiber's too.
  if (ticked || !e.keeps_time()) {
    yield_current(prev_action::requeue);
  } else {
    switch_current(prev_action::requeue, now_source(engine_now_ns(now_c)));
  }
}

// tick(): the worker's periodic work (the scheduler tick), all of it the
// engine's: load tracking, the periodic balance, and the nohz kick, which
// the backend carries out by waking a parked worker.
unsigned worker::tick(std::int64_t now) {
  next_tick_cycles_.store(cycles() + rt_.tick_cycles(), std::memory_order_relaxed);
  // A stack without a guard page is checked for an overflow here, at the
  // tick's pace, and when its fiber exits.
  if (current_ != &idle_) check_stack_canary(current_, rt_.config().stack_size / 1024);
  if (io_busy()) poll_io_uncharged(true);
  const tick_result r = rt_.eng().tick(index_, now, next_random(), scratch_);
  if (r.kick) rt_.kick_idle(index_, this);
  return r.pulled;
}

// ---- idle ------------------------------------------------------------------

fiber* worker::find_work() {
  if (has_timers_) run_timers(now_ns());
  // Idle: whatever waits to be submitted goes now, and what completed is
  // reaped before the engine looks for work.
  if (io_busy()) io_->poll(*this, true);
  // One counter read serves the tick check and the idle accounting: this is
  // the wake-up path of an idle worker.
  const std::uint64_t c = cycles();
  found_cycles_ = c;
  if (c >= next_tick_cycles_.load(std::memory_order_relaxed)) {
    const std::int64_t now = engine_now_ns(c);
    tick(now);
    return static_cast<fiber*>(rt_.eng().find_work(index_, now, next_random(), scratch_, std::exchange(kicked_, false)));
  }
  // The counter is converted only if the engine needs the time (the FIFO
  // disciplines never do here).
  return static_cast<fiber*>(rt_.eng().find_work(index_, engine_clock(), next_random(), scratch_, std::exchange(kicked_, false)));
}

void worker::idle_wait() {
  engine& e = rt_.eng();

  // Spin: a fiber is often made runnable again within microseconds (a reply,
  // a released lock), and waking from a futex costs far more than that.
  // The loop's clock is the engine's (a counter read): a wake-up that
  // arrives while the loop is away from its poll waits for it, so that
  // part is kept short. Timer deadlines are on the steady clock, read only
  // when some worker has a timer; the poll fires the due timers of every
  // worker, since a busy one cannot fire its own.
  // A worker that does not balance by itself while it spins opens its spin
  // word first, so that a pull kick reaches it (kick_idle); it leaves the
  // spin when kicked, to balance in find_work().
  const bool kickable = !e.idle_pulls_by_itself();
  if (e.tracing()) [[unlikely]] e.trace_idle(index_, idle_kind::spin, engine_clock());
  // The spawn placement prefers a spinning worker to a parked one, and of
  // equals the one idle the shortest time (find_idlest_group_cpu()): the
  // idle period began when this worker last left a fiber for its idle
  // context, and a park or an unpark does not move it.
  const std::int64_t idle_since = engine_now_ns(phase_start_cycles_);
  e.set_idle_state(index_, 0, idle_since);
  if (kickable) spin_word_.store(spin_open, std::memory_order_seq_cst);
  rt_.nr_spinning.fetch_add(1, std::memory_order_seq_cst);
  const std::int64_t spin_until = engine_now_ns() + rt_.spin_ns();
  bool found = false;
  for (unsigned i = 1;; ++i) {
    if (e.has_queued(index_) || rt_.stopping() ||
        spin_word_.load(std::memory_order_relaxed) == spin_kicked) {
      found = true;
      break;
    }
    if (i % spin_poll_iterations == 0) {
      const std::int64_t now = engine_now_ns();
      if (fire_due_timers()) {
        found = true;
        break;
      }
      // A completion's fiber may be placed here (then it is queued, and
      // the next look finds it) or elsewhere.
      if (io_busy() && io_->ready()) io_->poll(*this, true);
      // The engine decides what an idle poll does (engine::idle_poll):
      // a work stealer pulls again, only when some worker has a fiber
      // queued that could be pulled (engine::overloaded, the kernel's
      // rd->overload): a balance pass snapshots every runqueue and asks the
      // policy; skipping it when there is nothing to take keeps this check
      // short, and a wake-up that arrives during it waits less. The CFS
      // family balances an idle worker from its tick, as the kernel does.
      if (e.idle_poll(index_, now, next_random(), scratch_) > 0) {
        found = true;
        break;
      }
      if (cycles() >= next_tick_cycles_.load(std::memory_order_relaxed) && tick(now) > 0) {
        found = true;
        break;
      }
      if (now >= spin_until) break;
      // With more workers than hardware threads, a spinning worker takes
      // the CPU from one that has work; let the OS run that one.
      if (rt_.oversubscribed()) sched_yield();
    }
    cpu_relax();
  }
  rt_.nr_spinning.fetch_sub(1, std::memory_order_seq_cst);
  // A kick that arrived after the last poll is taken now rather than lost.
  if (kickable && spin_word_.exchange(spin_none, std::memory_order_seq_cst) == spin_kicked) found = kicked_ = true;
  if (found) return;

  // Park. Announce it, then look once more: a pusher that queued work before
  // seeing the announcement is seen here; one that queues after sees the
  // announcement and wakes us. Every access on both sides of this hand-shake
  // is seq_cst, so in their single total order one side reads the other's
  // write (the pusher: runqueue insert, then notify()). Work queued
  // elsewhere only cancels the park if this worker can actually pull it: a
  // policy may refuse (cfs-v5.9 does, by design), and an idle worker that
  // cannot pull must sleep, not spin.
  // With I/O in flight the worker sleeps in its reactor, which a completion
  // ends as well as a notify(); without, on its futex, as before any I/O.
  const bool in_io = io_busy();
  park_word_.store(in_io ? park_io : park_futex, std::memory_order_seq_cst);
  rt_.nr_parked.fetch_add(1, std::memory_order_seq_cst);
  // The overload flag is read seq_cst after the park announcement: an
  // enqueue that overloads a busy worker after this read sees the parked
  // count and kicks (runtime_impl::kick_idle).
  bool work = e.has_queued(index_, std::memory_order_seq_cst) || rt_.stopping();
  if (!work) work = e.idle_poll(index_, engine_clock(), next_random(), scratch_) > 0;
  bool slept = false;  // for the trace's park and unpark
  if (!work) {
    // Sleep until this worker's own earliest timer; the watcher (one parked
    // worker, the first to find the post free) until the earliest timer of
    // any worker that is not parked, which it then fires from its idle loop.
    std::int64_t until = earliest_timer();
    if (!watching_) {
      int none = -1;
      watching_ = rt_.timer_watcher.compare_exchange_strong(none, index_, std::memory_order_seq_cst);
    }
    if (watching_) {
      pass_watch_ = false;
      // Publish, then look: a deadline added after the look reads this
      // watch_until and wakes us if it is earlier (runtime_impl::watch_timer).
      for (;;) {
        rt_.watch_until.store(until, std::memory_order_seq_cst);
        const std::int64_t seen = rt_.watched_deadline(*this);
        if (seen >= until) break;
        until = seen;
      }
    }
    std::int64_t timeout = -1;
    if (until != far_deadline_ns) timeout = std::max<std::int64_t>(0, until - now_ns());
    slept = in_io || timeout != 0;
    if (e.tracing() && slept) [[unlikely]] e.trace_idle(index_, idle_kind::park, engine_clock());
    if (slept) e.set_idle_state(index_, engine::parked_exit_latency_ns, idle_since);
    if (in_io) {
      parks_.add();
      io_->wait(*this, timeout);
    } else if (timeout != 0) {
      parks_.add();
      futex_wait(park_word_, park_futex, timeout);
    }
  }
  // seq_cst: the watcher skips parked workers' timers; this store comes
  // before this worker runs a fiber and reads the watch (leaving_idle).
  park_word_.store(0, std::memory_order_seq_cst);
  rt_.nr_parked.fetch_sub(1, std::memory_order_seq_cst);
  if (e.tracing() && slept) [[unlikely]] e.trace_idle(index_, idle_kind::unpark, engine_clock());
  // Awake again, as the kernel's CPU out of its cpuidle state
  // (idle_set_state(rq, NULL)): polling until it finds work or parks anew.
  if (slept) e.set_idle_state(index_, 0, idle_since);
  // A monitor asleep because every worker was parked looks again.
  rt_.wake_monitor_if_asleep();
  // Woken for a pull kick (mark_pull()): balance unrationed.
  if (kickable && spin_word_.exchange(spin_none, std::memory_order_seq_cst) == spin_kicked) kicked_ = true;
  if (watching_) {
    // Whatever woke us, the watch is open again: a worker that parks takes
    // it, and if this one goes to run a fiber it passes it on.
    watching_ = false;
    rt_.timer_watcher.store(-1, std::memory_order_seq_cst);
    pass_watch_ = true;
  } else if (rt_.timer_watcher.load(std::memory_order_seq_cst) < 0) {
    // Woken while nobody watches, perhaps to take the watch (watch_timer,
    // pass_watch): if this worker now runs a fiber instead of parking
    // again, it must pass the duty on, or a busy worker's due timer waits
    // until some worker happens to idle.
    pass_watch_ = true;
  }
}

void worker::notify() noexcept {
  if (park_word_.load(std::memory_order_seq_cst) == 0) return;
  const std::uint32_t was = park_word_.exchange(0);
  if (was == park_futex) {
    futex_wake(park_word_);
  } else if (was == park_io) {
    io_->wake();
  }
}

void worker::poll_io_uncharged(bool eager) {
  engine& e = rt_.eng();
  fiber* self = current_fiber();
  if (!self || !e.fair()) {
    io_->poll(*this, eager);
    return;
  }
  const engine::foreign_mark m = e.foreign_begin(index_, self, engine_clock());
  io_->poll(*this, eager);
  e.foreign_end(index_, m, engine_clock());
}

void worker::make_reactor() {
  io_poll_interval_cycles_ =
      static_cast<std::uint64_t>(static_cast<double>(io_switch_poll_ns) * rt_.cycles_per_ns());
  if (rt_.io_backend() == options::io_backend::io_uring) {
    try {
      io_ = make_uring_reactor(*this);
      return;
    } catch (const std::system_error& e) {
      // Out of descriptors or memory now is not a kernel that refuses
      // rings: the call fails with that errno, and the next one tries again.
      const int err = e.code().value();
      if (err == EMFILE || err == ENFILE || err == ENOMEM) throw;
      rt_.log().warn("worker {}: no io_uring ({}); this worker's I/O uses epoll", index_, e.what());
    }
  }
  io_ = make_epoll_reactor(*this);
}

void worker::main() {
  tls_worker = this;
  alt_signal_stack alt;
  // A write to a socket or pipe whose reader has gone is an EPIPE error for
  // the fiber that made it, never a SIGPIPE that ends the process: the
  // signal stays blocked (and is taken back where it was raised).
  {
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
  }
  if (rt_.config().pin && rt_.pinned()) {
    if (!rt_.topo().bind_current_thread(place_, rt_.unit())) {
      rt_.log().warn("worker {}: could not pin to PU {}; running unpinned", index_, place_.os_pu);
    }
  }
  idle_.ctx.tsan_fiber = sanitizer_current_fiber();
  {
    // ASan needs the bounds of the thread's own stack to switch back to it.
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      void* addr = nullptr;
      std::size_t size = 0;
      pthread_attr_getstack(&attr, &addr, &size);
      idle_.ctx.stack_bottom = addr;
      idle_.ctx.stack_size = size;
      pthread_attr_destroy(&attr);
    }
  }
  phase_start_cycles_ = cycles();
  next_tick_cycles_.store(cycles() + rt_.tick_cycles(), std::memory_order_relaxed);
  if (tracer* t = rt_.trace()) t->bind_thread(index_);
  for (;;) {
    fiber* next = find_work();
    if (next) {
      if (has_timers_ || pass_watch_) [[unlikely]] leaving_idle();
      switch_to(next, false);
      continue;
    }
    if (rt_.stopping()) break;
    idle_wait();
  }
  if (io_) {
    io_->drain(*this);
    io_.reset();
  }
  // Return cached fibers to the pool for a tidy teardown.
  rt_.pool().give(fiber_cache_.data(), fiber_cache_.size());
  fiber_cache_.clear();
  if (tracer* t = rt_.trace()) t->unbind_thread();
  tls_worker = nullptr;
}

}  // namespace usched::detail

namespace usched::this_fiber {

// Here rather than with the rest of this_fiber (this_fiber.cpp): in the same
// translation unit as worker::yield_current(), a yield is one call and one
// context switch deep.
void yield() {
  detail::worker* w = detail::worker_of_this_thread();
  if (w && w->current_fiber()) {
    w->yield_current();
  } else {
    std::this_thread::yield();
  }
}

}  // namespace usched::this_fiber

