// timers.cpp: the timers of timed waits (docs/architecture.md, "Timers"):
// each worker's heap, who fires a due timer, and the timer watcher.
#include <algorithm>
#include <functional>
#include <mutex>

#include "clock.hpp"
#include "runtime_impl.hpp"

namespace usched::detail {
namespace {

// Due timers a heap gives up per acquisition of its lock: their waits are
// resumed after the lock is dropped (a resume takes a runqueue lock and may
// wake a worker), so the heap's owner adding a timer never waits behind that.
constexpr std::size_t timer_batch = 16;

}  // namespace

// Each worker keeps the timers of the waits that blocked on it, and fires
// them from its switch paths and its idle loop. A worker running a fiber
// that does not yield fires nothing, so idle workers fire the due timers of
// every heap too (Go's findrunnable steals other Ps' timers the same way),
// and one parked worker, the watcher, sleeps only until the earliest timer
// of the workers that are not parked. A timer entry may therefore be popped
// by any worker, under its heap's lock, exactly once; its wait is resumed
// only if the claim of its token succeeds, so an entry whose wait was
// notified first, or whose fiber has finished and been reused since (tokens
// only grow, and pooled fibers are unmapped only after every worker has
// stopped), is dropped.

void worker::add_timer(std::int64_t deadline_ns, fiber* f, std::uint64_t token) {
  bool earliest = false;
  {
    std::lock_guard<spinlock> g(timer_lock_);
    timers_.push_back({deadline_ns, f, token});
    std::push_heap(timers_.begin(), timers_.end(), std::greater<>{});
    earliest = timers_.front().deadline == deadline_ns;
    if (earliest) earliest_timer_.store(deadline_ns, std::memory_order_seq_cst);
  }
  has_timers_ = true;
  // A new earliest deadline while this worker runs fibers: the watcher, if
  // it sleeps past it, must wake.
  if (earliest) rt_.watch_timer(deadline_ns, *this);
}

std::size_t worker::fire_timers(std::int64_t now, worker& by, bool try_only) {
  std::size_t resumed = 0;
  timer_entry due[timer_batch];
  for (;;) {
    if (try_only) {
      if (!timer_lock_.try_lock()) return resumed;
    } else {
      timer_lock_.lock();
    }
    std::size_t n = 0;
    while (n < timer_batch && !timers_.empty() && timers_.front().deadline <= now) {
      std::pop_heap(timers_.begin(), timers_.end(), std::greater<>{});
      due[n++] = timers_.back();
      timers_.pop_back();
    }
    const std::int64_t next = timers_.empty() ? far_deadline_ns : timers_.front().deadline;
    earliest_timer_.store(next, std::memory_order_seq_cst);
    timer_lock_.unlock();
    for (std::size_t i = 0; i < n; ++i) {
      // A stale entry (the wait was notified first) fails the claim.
      if (claim_wait(*due[i].f, due[i].token)) {
        rt_.try_to_wake_up(due[i].f, placement_kind::wake, wake_reason::timer, &by, index_);
        ++resumed;
      }
    }
    if (next > now) return resumed;
  }
}

void worker::run_timers(std::int64_t now) {
  // Relaxed: only this thread lowers the earliest deadline; a stale, lower
  // value read here costs a look under the lock that finds nothing due.
  const std::int64_t earliest = earliest_timer_.load(std::memory_order_relaxed);
  if (earliest <= now) {
    fire_timers(now, *this, false);
  } else if (earliest == far_deadline_ns) {
    has_timers_ = false;
  }
}

bool worker::fire_due_timers() {
  const auto n = static_cast<int>(rt_.nr_workers());
  std::int64_t now = -1;
  bool resumed = false;
  // Its own heap first, then the others.
  for (int i = 0; i < n; ++i) {
    worker& o = rt_.worker_at((index_ + i) % n);
    // Relaxed: a stale value delays a steal to the next look, and the
    // watcher's sleep (watched_deadline) reads seq_cst.
    const std::int64_t earliest = o.earliest_timer_.load(std::memory_order_relaxed);
    if (earliest == far_deadline_ns) continue;
    if (now < 0) now = now_ns();
    if (earliest > now) continue;
    resumed |= o.fire_timers(now, *this, &o != this) > 0;
  }
  if (has_timers_ && earliest_timer_.load(std::memory_order_relaxed) == far_deadline_ns) has_timers_ = false;
  return resumed;
}

void worker::leaving_idle() noexcept {
  if (has_timers_ && earliest_timer() != far_deadline_ns) rt_.watch_timer(earliest_timer(), *this);
  if (pass_watch_) {
    pass_watch_ = false;
    rt_.pass_watch(*this);
  }
}

// The watcher hand-shake. An adder (add_timer, leaving_idle) stores its
// earliest deadline, then reads timer_watcher and watch_until; a parker
// that becomes the watcher takes timer_watcher, stores watch_until, then
// reads every worker's park word and earliest deadline. All seq_cst, so in
// their total order either the parker reads the new deadline (and sleeps no
// later) or the adder reads the parker's watch_until (and wakes it if that
// is later). A worker the watcher skipped as parked clears its park word
// before it can run a fiber, and reads the watch after that (leaving_idle).
void runtime_impl::watch_timer(std::int64_t deadline, const worker& w) noexcept {
  const int watcher = timer_watcher.load(std::memory_order_seq_cst);
  if (watcher < 0) {
    // Nobody watches: a worker that parks from now on takes the watch and
    // sees this deadline; one already parked (under a watcher that has
    // since left) must be woken to re-park as the watcher.
    if (nr_parked.load(std::memory_order_seq_cst) > 0) {
      for (auto& o : workers_) {
        if (o.get() != &w && o->parked()) {
          o->notify();
          return;
        }
      }
    }
    return;
  }
  if (watch_until.load(std::memory_order_seq_cst) > deadline) worker_at(watcher).notify();
}

std::int64_t runtime_impl::watched_deadline(const worker& self) const noexcept {
  std::int64_t until = self.earliest_timer();
  for (const auto& o : workers_) {
    if (o.get() == &self || o->parked()) continue;
    until = std::min(until, o->earliest_timer());
  }
  return until;
}

void runtime_impl::pass_watch(const worker& self) noexcept {
  if (timer_watcher.load(std::memory_order_seq_cst) >= 0) return;
  if (nr_parked.load(std::memory_order_seq_cst) == 0) return;
  bool timers = false;
  for (const auto& o : workers_) {
    if (!o->parked() && o->earliest_timer() != far_deadline_ns) {
      timers = true;
      break;
    }
  }
  if (!timers) return;
  for (auto& o : workers_) {
    if (o.get() != &self && o->parked()) {
      o->notify();
      return;
    }
  }
}

}  // namespace usched::detail
