// usched/wait_group.hpp: wait for a set of fibers to finish (Go's WaitGroup).
#pragma once

#include <chrono>
#include <cstdint>
#include <stop_token>

#include <usched/detail/deadline.hpp>
#include <usched/detail/spinlock.hpp>
#include <usched/detail/wait.hpp>

namespace usched {

// wait_group counts outstanding work: add(n) before starting n pieces, done()
// as each finishes, wait() blocks until the count is zero. The count must not
// go negative (std::logic_error). wait() on a zero count returns at once.
// A wait_group may be destroyed as soon as a wait() returns, even while the
// done() that released it is still returning.
class wait_group {
 public:
  explicit wait_group(std::int64_t initial = 0);
  wait_group(const wait_group&) = delete;
  wait_group& operator=(const wait_group&) = delete;

  void add(std::int64_t n = 1);
  void done() { add(-1); }
  void wait() { (void)wait_until_ns(detail::no_deadline, {}); }
  // wait_for()/wait_until(): wait() that gives up at the time (any clock);
  // true if the count reached zero. wait(stop) gives up once stop is
  // requested.
  template <class Rep, class Period>
  bool wait_for(const std::chrono::duration<Rep, Period>& d) {
    return wait_until_ns(detail::deadline_after(d), {});
  }
  template <class Clock, class Duration>
  bool wait_until(const std::chrono::time_point<Clock, Duration>& t) {
    return wait_until_ns(detail::deadline_at(t), {});
  }
  [[nodiscard]] bool wait(const std::stop_token& stop) { return wait_until_ns(detail::no_deadline, stop); }
  // The current count (a snapshot).
  std::int64_t count() const noexcept;

 private:
  bool wait_until_ns(std::int64_t deadline_ns, const std::stop_token& stop);

  mutable detail::spinlock lock_;
  std::int64_t count_ = 0;
  detail::wait_list waiters_;
};

}  // namespace usched
