// usched/condition_variable.hpp: a condition variable over usched::mutex.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

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
  // std::cv_status::timeout.
  std::cv_status wait_until(std::unique_lock<mutex>& lk,
                            std::chrono::steady_clock::time_point deadline);
  template <class Pred>
  bool wait_until(std::unique_lock<mutex>& lk, std::chrono::steady_clock::time_point deadline,
                  Pred pred) {
    while (!pred()) {
      if (wait_until(lk, deadline) == std::cv_status::timeout) return pred();
    }
    return true;
  }
  template <class Rep, class Period>
  std::cv_status wait_for(std::unique_lock<mutex>& lk, const std::chrono::duration<Rep, Period>& d) {
    return wait_until(lk, std::chrono::steady_clock::now() +
                              std::chrono::ceil<std::chrono::steady_clock::duration>(d));
  }
  template <class Rep, class Period, class Pred>
  bool wait_for(std::unique_lock<mutex>& lk, const std::chrono::duration<Rep, Period>& d, Pred pred) {
    return wait_until(lk,
                      std::chrono::steady_clock::now() +
                          std::chrono::ceil<std::chrono::steady_clock::duration>(d),
                      std::move(pred));
  }

  void notify_one() noexcept;
  void notify_all() noexcept;

 private:
  std::cv_status wait_impl(std::unique_lock<mutex>& lk, std::int64_t deadline_ns);

  detail::spinlock lock_;
  detail::wait_list waiters_;
};

}  // namespace usched
