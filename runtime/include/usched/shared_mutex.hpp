// usched/shared_mutex.hpp: a readers-writer lock that blocks fibers, not
// workers.
#pragma once

#include <chrono>
#include <cstdint>
#include <stop_token>

#include <usched/detail/deadline.hpp>
#include <usched/detail/spinlock.hpp>
#include <usched/detail/wait.hpp>

namespace usched {

// shared_mutex is std::shared_mutex (and, with the timed attempts,
// std::shared_timed_mutex) for fibers and threads: any number of readers
// hold it together (lock_shared), a writer alone (lock).
//
// Writers are preferred: once a writer waits, new readers queue behind it,
// so a steady stream of readers cannot starve writers. A writer's unlock
// hands the lock to the first waiting writer if there is one, else to
// every waiting reader at once; the last reader's unlock hands it to the
// first waiting writer. Hand-off is direct (the woken waiter already holds
// the lock), so no newcomer can take it between the unlock and the waiter's
// resumption; a waiter whose deadline or stop request ended its wait first
// is passed over. The state is kept under one spinlock: an uncontended
// lock_shared costs one lock round trip, not one atomic add.
//
// Also usched extensions: lock(std::stop_token) and
// lock_shared(std::stop_token), which give up (false) once stop is
// requested.
class shared_mutex {
 public:
  shared_mutex() noexcept = default;
  shared_mutex(const shared_mutex&) = delete;
  shared_mutex& operator=(const shared_mutex&) = delete;

  void lock() { (void)lock_until(detail::no_deadline, {}); }
  [[nodiscard]] bool lock(const std::stop_token& stop) { return lock_until(detail::no_deadline, stop); }
  bool try_lock() noexcept;
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    return lock_until(detail::deadline_after(d), {});
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& t) {
    return lock_until(detail::deadline_at(t), {});
  }
  void unlock() noexcept;

  void lock_shared() { (void)lock_shared_until(detail::no_deadline, {}); }
  [[nodiscard]] bool lock_shared(const std::stop_token& stop) {
    return lock_shared_until(detail::no_deadline, stop);
  }
  bool try_lock_shared() noexcept;
  template <class Rep, class Period>
  bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& d) {
    return lock_shared_until(detail::deadline_after(d), {});
  }
  template <class Clock, class Duration>
  bool try_lock_shared_until(const std::chrono::time_point<Clock, Duration>& t) {
    return lock_shared_until(detail::deadline_at(t), {});
  }
  void unlock_shared() noexcept;

 private:
  bool lock_until(std::int64_t deadline_ns, const std::stop_token& stop);
  bool lock_shared_until(std::int64_t deadline_ns, const std::stop_token& stop);
  // release_locked(): the lock is free (no writer, no reader): hand it to
  // the first waiting writer, or else to every waiting reader. Under lock_.
  void release_locked() noexcept;

  detail::spinlock lock_;         // guards everything below
  unsigned readers_ = 0;          // readers holding it
  bool writer_ = false;           // a writer holds it
  unsigned writers_waiting_ = 0;  // writers linked in writers_, or on their way out of it
  detail::wait_list writers_;
  detail::wait_list readers_waiting_;
};

// std::shared_timed_mutex's name: the same type (it has the timed
// attempts, and costs nothing more for having them).
using shared_timed_mutex = shared_mutex;

}  // namespace usched
