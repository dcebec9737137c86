// usched/mutex.hpp: a mutex that blocks fibers, not workers.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stop_token>

#include <usched/detail/deadline.hpp>
#include <usched/detail/spinlock.hpp>
#include <usched/detail/wait.hpp>

namespace usched {

namespace detail {

// The owner of a mutex is the calling waitable: its fiber, which keeps its
// identity as it moves between workers (a thread id would change with the
// worker), or the calling thread's parker.
inline const void* current_owner() noexcept { return &current_waitable(); }

// report_unlock_by_non_owner() ends the process for an unlock() of `m` (a
// `kind`: "mutex", "timed_mutex", "recursive_mutex") by a caller that does
// not hold it, `locked` saying whether someone else does: one line on
// stderr naming the caller, then abort(). std leaves such an unlock
// undefined; here it would release another fiber's critical section.
[[noreturn]] void report_unlock_by_non_owner(const char* kind, const void* m, bool locked) noexcept;

// futex_lock is what mutex and timed_mutex share: Drepper's three-state
// futex mutex ("Futexes Are Tricky", mutex 3), where contended means
// "someone may be waiting, wake on unlock", with the queue of waiters
// under a spinlock. The two differ only in how a waiter waits and how an
// unlock wakes one.
class futex_lock {
 public:
  futex_lock(const futex_lock&) = delete;
  futex_lock& operator=(const futex_lock&) = delete;

  // try_lock() takes the lock if it is free, without spinning, blocking or
  // yielding: a `while (!try_lock())` loop keeps its worker, and a holder
  // queued on that worker never runs. Use lock(), or yield in the loop.
  // Out of line (sync.cpp), with lock() and unlock(): whether it records
  // its caller as the holder is the library's build's decision (own()).
  bool try_lock() noexcept;

 protected:
  static constexpr std::uint32_t unlocked = 0;
  static constexpr std::uint32_t locked = 1;
  static constexpr std::uint32_t contended = 2;

  futex_lock() noexcept = default;
  // Waits for an unlock still inside its critical section: it may have
  // released the lock to the thread now destroying the mutex (see
  // release_contended()).
  ~futex_lock() {
    lock_.lock();
    lock_.unlock();
  }
  // acquire(): try_lock() without recording the holder.
  bool acquire() noexcept {
    std::uint32_t expected = unlocked;
    return state_.compare_exchange_strong(expected, locked, std::memory_order_acquire, std::memory_order_relaxed);
  }
  // spin_acquire(): acquire(), then a few attempts while spinning; true
  // if one took it. A critical section on another worker usually ends
  // within a few hundred nanoseconds, far less than a block and a wake-up.
  bool spin_acquire() noexcept;
  // claim_contended(), under lock_: marks the lock contended, which takes
  // it if it was free (our unlock then wakes the next waiter, whom we
  // cannot see from here).
  bool claim_contended() noexcept { return state_.exchange(contended, std::memory_order_acquire) == unlocked; }
  // release_uncontended(): unlock() when nobody may be waiting; false if
  // someone may, and release_contended() must follow. A lock found
  // unlocked (nobody holds it) ends the process, a `kind`'s unlock()
  // misused: the check costs nothing, as it is made only where the
  // exchange failed, which a correct unlock reaches only when contended.
  bool release_uncontended(const char* kind) noexcept {
    std::uint32_t expected = locked;
    if (state_.compare_exchange_strong(expected, unlocked, std::memory_order_release, std::memory_order_relaxed)) {
      return true;
    }
    if (expected == unlocked) [[unlikely]] report_unlock_by_non_owner(kind, this, false);
    return false;
  }
  // release_contended(), under lock_: the lock is released under lock_,
  // not before it. Released first, it could be taken, released and the
  // mutex destroyed by another thread (the last reference dropped under
  // it, which std allows) while this one still has lock_ to take; the
  // destructor passes through lock_, so the object outlives this section.
  void release_contended() noexcept { state_.store(unlocked, std::memory_order_release); }

  // own(), by the caller that has just taken the lock: records it as the
  // holder. disown(), by the caller about to release it: ends the process
  // (report_unlock_by_non_owner) unless it is the holder, then clears the
  // record before the release, so that a late unlock by the holder finds
  // someone else's (or no) record, never its own. One word written at
  // lock and compared at unlock, but finding the caller costs two calls
  // and a thread-local read each time, which doubled the fastest
  // uncontended lock+unlock (usched_micro's mutex/2, about 5 ns to 11):
  // sync.cpp calls them only where the library is built without NDEBUG
  // (docs/api.md, "Misuse").
  // Relaxed is enough for the same reason as recursive_lock's owner_:
  // only the caller's own store can equal the caller, and its own later
  // load sees it.
  void own() noexcept { owner_.store(current_owner(), std::memory_order_relaxed); }
  void disown(const char* kind) noexcept {
    if (owner_.load(std::memory_order_relaxed) != current_owner()) [[unlikely]] {
      report_unlock_by_non_owner(kind, this, state_.load(std::memory_order_relaxed) != unlocked);
    }
    owner_.store(nullptr, std::memory_order_relaxed);
  }

  std::atomic<std::uint32_t> state_{unlocked};
  std::atomic<const void*> owner_{nullptr};  // own(), disown()
  spinlock lock_;  // guards waiters_
  wait_list waiters_;
};

}  // namespace detail

// mutex is a non-recursive lock for fibers (and plain threads). A fiber that
// finds it held spins briefly, then blocks: its worker runs other fibers until
// unlock() hands the wake-up to it. Meets the Lockable requirements, so it
// works with std::lock_guard, std::unique_lock and std::scoped_lock.
//
// Unlock wakes one waiter, which then competes for the lock with any newcomer
// (no hand-off): throughput over strict FIFO fairness, as with a futex mutex.
class mutex : public detail::futex_lock {
 public:
  mutex() noexcept = default;

  void lock();
  // unlock() releases the lock the caller holds. By a fiber or thread that
  // does not hold it (another's lock, or one nobody holds) it ends the
  // process with one line on stderr, as std leaves it undefined.
  void unlock() noexcept;
};

// timed_mutex is mutex with std::timed_mutex's timed attempts: a waiter
// whose deadline passes leaves the queue and returns false, and an unlock
// wakes the first waiter still waiting (one whose deadline claimed its
// wait first is passed over, so no wake-up is lost to a timeout). As with
// mutex, the woken waiter competes for the lock again (no hand-off).
// Also a usched extension: lock(std::stop_token) gives up when stop is
// requested.
class timed_mutex : public detail::futex_lock {
 public:
  timed_mutex() noexcept = default;

  void lock() { (void)lock_until(detail::no_deadline, {}); }
  // lock(stop): lock(), or false once `stop` is requested first.
  [[nodiscard]] bool lock(const std::stop_token& stop) { return lock_until(detail::no_deadline, stop); }
  // try_lock_for()/try_lock_until(): false if the lock could not be taken
  // before the time; any clock (usched/detail/deadline.hpp's rules).
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    return lock_until(detail::deadline_after(d), {});
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& t) {
    return lock_until(detail::deadline_at(t), {});
  }
  // unlock(): as mutex::unlock(), the same check of the caller.
  void unlock() noexcept;

 private:
  // lock_until() takes the lock, or returns false at `deadline_ns` (see
  // detail::wait_in) or once `stop` is requested.
  bool lock_until(std::int64_t deadline_ns, const std::stop_token& stop);
};

namespace detail {

// recursive_lock<Mutex> adds std's recursive ownership to a usched mutex:
// the owner may lock again, and the lock is released by the matching
// number of unlocks. owner_ is read without the lock by whoever tries: it
// equals the caller only if the caller stored it (then the caller's own
// read sees its own store), so relaxed is enough; any other value means
// "not me" whatever it is.
template <class Mutex>
class recursive_lock {
 public:
  void lock() {
    if (mine()) {
      ++depth_;
      return;
    }
    mutex_.lock();
    own();
  }
  bool try_lock() noexcept {
    if (mine()) {
      ++depth_;
      return true;
    }
    if (!mutex_.try_lock()) return false;
    own();
    return true;
  }
  // unlock() by a caller that does not own it ends the process
  // (report_unlock_by_non_owner): depth_ is the owner's alone.
  void unlock() noexcept {
    if (!mine()) [[unlikely]] {
      report_unlock_by_non_owner("recursive_mutex", this, owner_.load(std::memory_order_relaxed) != nullptr);
    }
    if (--depth_ > 0) return;
    owner_.store(nullptr, std::memory_order_relaxed);
    mutex_.unlock();
  }
  // lock() that gives up once `stop` is requested (false); the owner's
  // own relock succeeds at once.
  [[nodiscard]] bool lock(const std::stop_token& stop)
    requires requires(Mutex& m) { m.lock(stop); }
  {
    if (mine()) {
      ++depth_;
      return true;
    }
    if (!mutex_.lock(stop)) return false;
    own();
    return true;
  }

 protected:
  bool mine() const noexcept { return owner_.load(std::memory_order_relaxed) == current_owner(); }
  void own() noexcept {
    owner_.store(current_owner(), std::memory_order_relaxed);
    depth_ = 1;
  }
  Mutex mutex_;

 private:
  std::atomic<const void*> owner_{nullptr};
  std::size_t depth_ = 0;  // under mutex_
};

}  // namespace detail

// recursive_mutex: std::recursive_mutex for fibers: the fiber (or thread)
// holding it may lock it again, and it is released by as many unlocks. An
// unlock by any other caller ends the process with one line on stderr.
// Built on timed_mutex, whose waits a stop request may end: lock(stop)
// (usched extension) gives up once stop is requested.
class recursive_mutex : public detail::recursive_lock<timed_mutex> {
 public:
  recursive_mutex() noexcept = default;
  recursive_mutex(const recursive_mutex&) = delete;
  recursive_mutex& operator=(const recursive_mutex&) = delete;
};

// recursive_timed_mutex: recursive_mutex with timed_mutex's timed attempts.
class recursive_timed_mutex : public detail::recursive_lock<timed_mutex> {
 public:
  recursive_timed_mutex() noexcept = default;
  recursive_timed_mutex(const recursive_timed_mutex&) = delete;
  recursive_timed_mutex& operator=(const recursive_timed_mutex&) = delete;

  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    if (mine()) return try_lock();
    if (!mutex_.try_lock_for(d)) return false;
    own();
    return true;
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& t) {
    if (mine()) return try_lock();
    if (!mutex_.try_lock_until(t)) return false;
    own();
    return true;
  }
};

}  // namespace usched
