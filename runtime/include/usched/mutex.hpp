// usched/mutex.hpp: a mutex that blocks fibers, not workers.
#pragma once

#include <atomic>
#include <cstdint>

#include <usched/detail/spinlock.hpp>
#include <usched/detail/wait.hpp>

namespace usched {

// mutex is a non-recursive lock for fibers (and plain threads). A fiber that
// finds it held spins briefly, then blocks: its worker runs other fibers until
// unlock() hands the wake-up to it. Meets the Lockable requirements, so it
// works with std::lock_guard, std::unique_lock and std::scoped_lock.
//
// Unlock wakes one waiter, which then competes for the lock with any newcomer
// (no hand-off): throughput over strict FIFO fairness, as with a futex mutex.
class mutex {
 public:
  mutex() noexcept = default;
  mutex(const mutex&) = delete;
  mutex& operator=(const mutex&) = delete;

  void lock();
  // try_lock() takes the lock if it is free, without spinning, blocking or
  // yielding: a `while (!try_lock())` loop keeps its worker, and a holder
  // queued on that worker never runs. Use lock(), or yield in the loop.
  bool try_lock() noexcept {
    std::uint32_t expected = unlocked;
    return state_.compare_exchange_strong(expected, locked, std::memory_order_acquire,
                                          std::memory_order_relaxed);
  }
  void unlock() noexcept;

 private:
  // Drepper's three-state futex mutex ("Futexes Are Tricky", mutex 3):
  // contended means "someone may be waiting, wake on unlock".
  static constexpr std::uint32_t unlocked = 0;
  static constexpr std::uint32_t locked = 1;
  static constexpr std::uint32_t contended = 2;

  std::atomic<std::uint32_t> state_{unlocked};
  detail::spinlock lock_;  // guards waiters_
  detail::wait_list waiters_;
};

}  // namespace usched
