// usched/condition_variable.hpp: a condition variable over usched::mutex.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
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

}  // namespace usched
