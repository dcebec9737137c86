// usched/semaphore.hpp: counting and binary semaphores (std::counting_semaphore,
// std::binary_semaphore).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <stop_token>

#include <usched/detail/deadline.hpp>
#include <usched/detail/spinlock.hpp>
#include <usched/detail/wait.hpp>

namespace usched {
namespace detail {

// semaphore_state is counting_semaphore's untemplated half: the permits and
// the waiters. `max` is the semaphore's max(), passed in rather than kept.
//
// Fairness: FIFO by direct hand-off. release() gives each permit to the
// first waiter still waiting (notify_first: the permit goes over only once
// the waiter's wait is claimed, so a waiter that timed out or was stopped
// at that moment takes none and the permit goes to the next one); only
// permits no waiter took are added to the count. So the count is positive
// only while nobody waits, an acquirer never overtakes a waiter, and no
// waiter starves. The cost is the one a FIFO mutex pays: a permit handed
// over is the waiter's while it is still queued to run, and a running
// fiber that asks meanwhile (try_acquire() too) finds none and blocks or
// fails, so under contention every permit costs a switch to its waiter
// where barging would let the fiber already running take it.
class semaphore_state {
 public:
  // Requires 0 <= desired <= max (std::logic_error otherwise).
  constexpr semaphore_state(std::ptrdiff_t desired, std::ptrdiff_t max) : count_(desired) {
    if (desired < 0 || desired > max) {
      throw std::logic_error("usched::counting_semaphore: desired count outside 0..max()");
    }
  }
  semaphore_state(const semaphore_state&) = delete;
  semaphore_state& operator=(const semaphore_state&) = delete;

  // release() adds `update` permits: one to each of the first `update`
  // waiters, the rest to the count. Requires 0 <= update <= max - count
  // (std::logic_error otherwise, nothing released). Never blocks.
  void release(std::ptrdiff_t update, std::ptrdiff_t max);
  // try_acquire() takes a permit if the count has one; never blocks.
  bool try_acquire() noexcept;
  // acquire() takes a permit, waiting for one until `deadline_ns`
  // (usched/detail/deadline.hpp; no_deadline for none) or a stop on `stop`;
  // false if it got none. A permit in the count is taken even if the
  // deadline has passed or the stop was requested.
  bool acquire(std::int64_t deadline_ns, const std::stop_token& stop);

 private:
  spinlock lock_;
  std::ptrdiff_t count_;  // guarded by lock_; never negative
  wait_list waiters_;     // guarded by lock_
};

}  // namespace detail

// counting_semaphore is std::counting_semaphore for fibers and plain
// threads: acquire() takes one of a number of permits, blocking the calling
// fiber (not its worker) while there are none, and release() gives permits
// back. max() is LeastMaxValue exactly, so binary_semaphore holds at most
// one permit.
//
// Permits go to waiters in the order they began to wait (see
// detail::semaphore_state: direct hand-off, FIFO, no barging), and
// try_acquire() never fails spuriously (std allows it to).
//
// What std leaves undefined throws std::logic_error here, the count
// unchanged: a desired count outside 0..max(), a negative release(), and a
// release() past max().
//
// usched extension: acquire(std::stop_token) also returns when a stop is
// requested, with false and no permit taken.
//
// A semaphore may be destroyed once every caller has returned: a release()
// wakes waiters under the semaphore's lock and touches nothing after
// releasing it, and every woken waiter passes through that lock before it
// returns.
template <std::ptrdiff_t LeastMaxValue = PTRDIFF_MAX>
class counting_semaphore {
  static_assert(LeastMaxValue >= 0, "counting_semaphore: LeastMaxValue must not be negative");

 public:
  static constexpr std::ptrdiff_t max() noexcept { return LeastMaxValue; }

  // Requires 0 <= desired <= max() (std::logic_error otherwise). constexpr
  // as std's: a semaphore at namespace scope may be constinit.
  constexpr explicit counting_semaphore(std::ptrdiff_t desired) : state_(desired, max()) {}
  ~counting_semaphore() = default;
  counting_semaphore(const counting_semaphore&) = delete;
  counting_semaphore& operator=(const counting_semaphore&) = delete;

  // release() gives back `update` permits, waking as many waiters.
  // Requires 0 <= update <= max() - the count.
  void release(std::ptrdiff_t update = 1) { state_.release(update, max()); }

  // acquire() takes a permit, blocking until there is one.
  void acquire() { state_.acquire(detail::no_deadline, {}); }
  // acquire(stop) takes a permit, blocking until there is one or a stop is
  // requested on `stop`; false (no permit taken) if the stop came first. A
  // permit free at the call is taken, stop requested or not.
  bool acquire(std::stop_token stop) { return state_.acquire(detail::no_deadline, stop); }

  bool try_acquire() noexcept { return state_.try_acquire(); }
  // try_acquire_for()/try_acquire_until() wait for a permit until the
  // deadline: false if none came. A deadline already past only takes a
  // free permit; one beyond the end of the clock waits for ever. Time points
  // of other clocks are the time left until them, on that clock, at the call.
  template <class Rep, class Period>
  bool try_acquire_for(const std::chrono::duration<Rep, Period>& rel_time) {
    return state_.acquire(detail::deadline_after(rel_time), {});
  }
  template <class Clock, class Duration>
  bool try_acquire_until(const std::chrono::time_point<Clock, Duration>& abs_time) {
    return state_.acquire(detail::deadline_at(abs_time), {});
  }

 private:
  detail::semaphore_state state_;
};

using binary_semaphore = counting_semaphore<1>;

}  // namespace usched
