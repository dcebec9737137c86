// usched/barrier.hpp: a reusable phased barrier with a completion step
// (std::barrier).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <stop_token>
#include <type_traits>
#include <utility>

#include <usched/detail/spinlock.hpp>
#include <usched/detail/wait.hpp>

namespace usched {
namespace detail {

// The completion step of a barrier<> without one.
struct barrier_noop {
  void operator()() noexcept {}
};

}  // namespace detail

// barrier is std::barrier for fibers and plain threads. Each phase expects
// a number of arrivals; the last one runs the completion function, once,
// then releases every waiter of the phase, and the next phase begins with
// the expected count reset (less the participants that left with
// arrive_and_drop()). Waits block the calling fiber, not its worker.
//
// The completion function runs on the fiber (or thread) whose arrival
// completed the phase, outside the barrier's lock, so it may itself block,
// lock a usched::mutex or spawn fibers. Until it returns the phase is not
// over: no waiter of the phase is released, and every arrival of the phase
// (each one counted, none of the next phase's possible yet) happens before
// it runs.
//
// What std leaves undefined throws std::logic_error here, the barrier
// unchanged: a negative expected count; an arrival of 0 or less, or of more
// than the phase still expects (an arrival while the completion step runs
// is one: the phase expects nothing more); wait() with a token of another
// barrier, or one moved from.
//
// A barrier may be destroyed once every participant has returned from its
// last wait: the arrival that completes a phase wakes the waiters under the
// barrier's lock and touches nothing after releasing it, and every woken
// waiter passes through that lock before it returns.
template <class CompletionFunction = detail::barrier_noop>
class barrier {
  static_assert(std::is_nothrow_invocable_v<CompletionFunction&>,
                "a barrier's completion function must be invocable as an lvalue and noexcept (as std::barrier's)");
  static_assert(std::is_nothrow_destructible_v<CompletionFunction>,
                "a barrier's completion function must be nothrow destructible");

 public:
  // arrival_token names the phase an arrive() counted towards; wait() with
  // it returns once that phase has completed (at once if it has already).
  class arrival_token {
   public:
    arrival_token(arrival_token&& o) noexcept
        : owner_(std::exchange(o.owner_, nullptr)), phase_(o.phase_) {}
    arrival_token& operator=(arrival_token&& o) noexcept {
      owner_ = std::exchange(o.owner_, nullptr);
      phase_ = o.phase_;
      return *this;
    }
    arrival_token(const arrival_token&) = delete;
    arrival_token& operator=(const arrival_token&) = delete;
    ~arrival_token() = default;

   private:
    friend class barrier;
    arrival_token(const barrier* owner, std::uint64_t phase) noexcept : owner_(owner), phase_(phase) {}
    const barrier* owner_;
    std::uint64_t phase_;
  };

  static constexpr std::ptrdiff_t max() noexcept { return PTRDIFF_MAX; }

  // Requires 0 <= expected (std::logic_error otherwise). constexpr as std's.
  constexpr explicit barrier(std::ptrdiff_t expected, CompletionFunction f = CompletionFunction())
      : completion_(std::move(f)), expected_(expected), left_(expected) {
    if (expected < 0) throw std::logic_error("usched::barrier: negative expected count");
  }
  ~barrier() = default;
  barrier(const barrier&) = delete;
  barrier& operator=(const barrier&) = delete;

  // arrive() counts `n` arrivals towards the current phase and returns its
  // token; if they complete the phase, runs the completion step and
  // releases the phase's waiters first. Never blocks, except for the
  // completion function itself. Requires 0 < n <= the arrivals the phase
  // still expects.
  [[nodiscard]] arrival_token arrive(std::ptrdiff_t n = 1) {
    std::unique_lock<detail::spinlock> lk(lock_);
    const std::uint64_t phase = phase_;
    arrive_locked(lk, n, false);
    return arrival_token(this, phase);
  }

  // wait() blocks until the phase `token` names has completed; returns at
  // once if it has. Requires a token this barrier's arrive() returned.
  void wait(arrival_token&& token) const {
    if (token.owner_ != this) throw std::logic_error("usched::barrier::wait: a token of another barrier, or moved from");
    std::unique_lock<detail::spinlock> lk(lock_);
    // Phases only move forward, one completion at a time: any phase but the
    // current one has completed.
    if (token.phase_ != phase_) return;
    wait_locked(lk);
  }

  // usched extension: wait() that gives up once `stop` is requested; true
  // if the phase completed. The arrival stays counted either way: a
  // fiber that stops waiting does not hold the others back.
  [[nodiscard]] bool wait(arrival_token&& token, const std::stop_token& stop) const {
    if (token.owner_ != this) throw std::logic_error("usched::barrier::wait: a token of another barrier, or moved from");
    std::unique_lock<detail::spinlock> lk(lock_);
    if (token.phase_ != phase_) return true;
    return wait_locked(lk, token.phase_, stop);
  }

  // arrive_and_wait() is wait(arrive()), in one step under the lock.
  void arrive_and_wait() {
    std::unique_lock<detail::spinlock> lk(lock_);
    if (!arrive_locked(lk, 1, false)) wait_locked(lk);
  }
  // ... and with a stop token (usched extension), as wait(token, stop).
  [[nodiscard]] bool arrive_and_wait(const std::stop_token& stop) {
    std::unique_lock<detail::spinlock> lk(lock_);
    const std::uint64_t phase = phase_;
    if (arrive_locked(lk, 1, false)) return true;
    return wait_locked(lk, phase, stop);
  }

  // arrive_and_drop() leaves the barrier: one fewer arrival is expected in
  // every later phase, and this call is one arrival of the current phase.
  // Requires the phase to expect at least one more arrival.
  void arrive_and_drop() {
    std::unique_lock<detail::spinlock> lk(lock_);
    arrive_locked(lk, 1, true);
  }

 private:
  // arrive_locked() requires `lk` holding lock_ and returns with it held.
  // It checks `n`, counts it (and a drop), and if the phase is complete
  // runs the completion step and begins the next phase; returns whether it
  // did.
  bool arrive_locked(std::unique_lock<detail::spinlock>& lk, std::ptrdiff_t n, bool drop) {
    if (n <= 0) throw std::logic_error("usched::barrier::arrive: update must be positive");
    if (n > left_) throw std::logic_error("usched::barrier::arrive: more arrivals than the phase expects");
    if (drop) --expected_;
    left_ -= n;
    if (left_ != 0) return false;
    // left_ stays 0 while the completion function runs: an arrival now
    // would exceed what the phase expects, and throws, so the phase's
    // arrivals are all there is and none of the next phase's can start.
    // Running it unlocked lets it block or take seconds without every
    // arriving fiber spinning on lock_.
    lk.unlock();
    completion_();
    lk.lock();
    left_ = expected_;
    ++phase_;
    detail::notify_all(waiters_);
    return true;
  }

  // The stoppable wait: until phase `phase` completes (true) or stop is
  // requested (false). Requires `lk` holding lock_; returns with it
  // released.
  bool wait_locked(std::unique_lock<detail::spinlock>& lk, std::uint64_t phase, const std::stop_token& stop) const {
    if (stop.stop_requested()) return false;
    detail::waiter w;
    (void)detail::wait_in(lk, waiters_, w, detail::wait_kind::barrier, this, detail::no_deadline, stop);
    // Completed or not, the phase number tells (a stop that raced the
    // completion still sees it completed); holding lock_ once also means
    // the completing arrival is done with the barrier.
    lk.lock();
    const bool completed = phase_ != phase;
    lk.unlock();
    return completed;
  }

  // wait_locked() requires `lk` holding lock_ and the current phase not
  // complete; it waits until it is, and returns with lock_ released.
  void wait_locked(std::unique_lock<detail::spinlock>& lk) const {
    detail::waiter w;
    detail::wait_in(lk, waiters_, w, detail::wait_kind::barrier, this, detail::no_deadline);
    // The arrival that completed the phase woke us under lock_ and may hold
    // it still: once we have had it, it is done with the barrier.
    lk.lock();
    lk.unlock();
  }

  [[no_unique_address]] CompletionFunction completion_;
  mutable detail::spinlock lock_;
  std::ptrdiff_t expected_;  // arrivals each later phase expects; guarded by lock_
  std::ptrdiff_t left_;      // arrivals the current phase still expects; guarded by lock_
  std::uint64_t phase_ = 0;  // phases completed; guarded by lock_
  mutable detail::wait_list waiters_;  // the current phase's; guarded by lock_
};

}  // namespace usched
