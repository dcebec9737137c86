// usched/condition_variable.hpp: a condition variable over usched::mutex.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stop_token>
#include <utility>

#include <usched/detail/deadline.hpp>
#include <usched/detail/spinlock.hpp>
#include <usched/detail/wait.hpp>
#include <usched/mutex.hpp>

namespace usched {

// condition_variable blocks fibers (and plain threads) until notified; the
// interface is std::condition_variable's, with std::unique_lock<usched::mutex>.
// Spurious wake-ups do not happen, but a notification may be consumed by a
// waiter whose predicate is still false, so waiting with a predicate is the
// normal use. Timeouts use the steady clock.
class condition_variable {
 public:
  condition_variable() noexcept = default;
  condition_variable(const condition_variable&) = delete;
  condition_variable& operator=(const condition_variable&) = delete;

  // wait() releases `lk`, blocks until notified, then re-acquires it.
  void wait(std::unique_lock<mutex>& lk);
  template <class Pred>
  void wait(std::unique_lock<mutex>& lk, Pred pred) {
    while (!pred()) wait(lk);
  }

  // wait_until()/wait_for() also return at the deadline, with
  // std::cv_status::timeout. A deadline already past times out at once; one
  // beyond the end of the steady clock (seconds::max(), time_point::max())
  // waits for a notification only. Time points of other clocks are taken as
  // the time left until them, on that clock, when the call is made.
  std::cv_status wait_until(std::unique_lock<mutex>& lk,
                            std::chrono::steady_clock::time_point deadline);
  template <class Clock, class Duration>
  std::cv_status wait_until(std::unique_lock<mutex>& lk,
                            const std::chrono::time_point<Clock, Duration>& deadline) {
    return wait_impl(lk, detail::deadline_at(deadline));
  }
  template <class Clock, class Duration, class Pred>
  bool wait_until(std::unique_lock<mutex>& lk, const std::chrono::time_point<Clock, Duration>& deadline,
                  Pred pred) {
    return wait_pred(lk, detail::deadline_at(deadline), std::move(pred));
  }
  template <class Rep, class Period>
  std::cv_status wait_for(std::unique_lock<mutex>& lk, const std::chrono::duration<Rep, Period>& d) {
    return wait_impl(lk, detail::deadline_after(d));
  }
  template <class Rep, class Period, class Pred>
  bool wait_for(std::unique_lock<mutex>& lk, const std::chrono::duration<Rep, Period>& d, Pred pred) {
    return wait_pred(lk, detail::deadline_after(d), std::move(pred));
  }

  void notify_one() noexcept;
  void notify_all() noexcept;

 private:
  // wait_impl() waits until notified or `deadline_ns` (see detail::block).
  std::cv_status wait_impl(std::unique_lock<mutex>& lk, std::int64_t deadline_ns);
  template <class Pred>
  bool wait_pred(std::unique_lock<mutex>& lk, std::int64_t deadline_ns, Pred pred) {
    while (!pred()) {
      if (wait_impl(lk, deadline_ns) == std::cv_status::timeout) return pred();
    }
    return true;
  }

  detail::spinlock lock_;
  detail::wait_list waiters_;
};

// condition_variable_any is std::condition_variable_any for fibers: it
// waits with any lock that has lock() and unlock() (usched::mutex,
// shared_mutex through std::shared_lock, timed_mutex, a std::mutex on a
// plain thread, a user's own), and has the C++20 std::stop_token
// overloads: a wait given a stop token returns once stop is requested,
// with the predicate's value then.
//
// Notifications are never lost to a wait that ended otherwise: a waiter
// whose deadline or stop request ended its wait first is passed over, and
// notify_one() wakes the next one. As with condition_variable there are no
// spurious wake-ups, but waiting with a predicate is still the normal use.
class condition_variable_any {
 public:
  condition_variable_any() noexcept = default;
  condition_variable_any(const condition_variable_any&) = delete;
  condition_variable_any& operator=(const condition_variable_any&) = delete;

  void notify_one() noexcept {
    std::lock_guard<detail::spinlock> g(lock_);
    detail::notify_first(waiters_);
  }
  void notify_all() noexcept {
    std::lock_guard<detail::spinlock> g(lock_);
    detail::notify_all(waiters_);
  }

  template <class Lock>
  void wait(Lock& lk) {
    (void)wait_impl(lk, detail::no_deadline, {});
  }
  template <class Lock, class Pred>
  void wait(Lock& lk, Pred pred) {
    while (!pred()) wait(lk);
  }
  template <class Lock, class Clock, class Duration>
  std::cv_status wait_until(Lock& lk, const std::chrono::time_point<Clock, Duration>& t) {
    return wait_impl(lk, detail::deadline_at(t), {});
  }
  template <class Lock, class Clock, class Duration, class Pred>
  bool wait_until(Lock& lk, const std::chrono::time_point<Clock, Duration>& t, Pred pred) {
    return wait_pred(lk, detail::deadline_at(t), {}, std::move(pred));
  }
  template <class Lock, class Rep, class Period>
  std::cv_status wait_for(Lock& lk, const std::chrono::duration<Rep, Period>& d) {
    return wait_impl(lk, detail::deadline_after(d), {});
  }
  template <class Lock, class Rep, class Period, class Pred>
  bool wait_for(Lock& lk, const std::chrono::duration<Rep, Period>& d, Pred pred) {
    return wait_pred(lk, detail::deadline_after(d), {}, std::move(pred));
  }

  // The stop-token overloads (std's "interruptible waits"): they wait until
  // the predicate holds, stop is requested, or (timed) the time comes, and
  // return the predicate's value.
  template <class Lock, class Pred>
  bool wait(Lock& lk, std::stop_token stop, Pred pred) {
    return wait_pred(lk, detail::no_deadline, stop, std::move(pred));
  }
  template <class Lock, class Clock, class Duration, class Pred>
  bool wait_until(Lock& lk, std::stop_token stop, const std::chrono::time_point<Clock, Duration>& t, Pred pred) {
    return wait_pred(lk, detail::deadline_at(t), stop, std::move(pred));
  }
  template <class Lock, class Rep, class Period, class Pred>
  bool wait_for(Lock& lk, std::stop_token stop, const std::chrono::duration<Rep, Period>& d, Pred pred) {
    return wait_pred(lk, detail::deadline_after(d), stop, std::move(pred));
  }

 private:
  // wait_impl(): one wait, until notified (no_timeout), or `deadline_ns` or
  // a stop request (timeout). The waiter is linked before the user's lock
  // is released: a notifier that changes the predicate under that lock
  // after this point finds it in the list.
  template <class Lock>
  std::cv_status wait_impl(Lock& lk, std::int64_t deadline_ns, const std::stop_token& stop) {
    detail::waiter w;
    lock_.lock();
    const bool notified = detail::wait_in(lock_, waiters_, w, detail::wait_kind::condition_variable_any, this,
                                          deadline_ns, stop, [&lk] { lk.unlock(); });
    // A notifier wakes under lock_: taking it once means it has let go of
    // this object, which its owner may destroy once the waits it notified
    // have returned (std's rule for a condition variable).
    lock_.lock();
    lock_.unlock();
    lk.lock();
    return notified ? std::cv_status::no_timeout : std::cv_status::timeout;
  }
  template <class Lock, class Pred>
  bool wait_pred(Lock& lk, std::int64_t deadline_ns, const std::stop_token& stop, Pred pred) {
    while (!pred()) {
      if (stop.stop_requested()) return false;
      if (wait_impl(lk, deadline_ns, stop) == std::cv_status::timeout && !stop.stop_requested()) return pred();
    }
    return true;
  }

  detail::spinlock lock_;
  detail::wait_list waiters_;
};

}  // namespace usched
