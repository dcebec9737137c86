// spinlock.hpp: the lock that protects runqueues and wait lists.
//
// Critical sections under these locks are a handful of pointer updates and are
// never held across a context switch, so a test-and-test-and-set spinlock
// beats a futex mutex: no syscall, one atomic RMW when uncontended. After a
// bounded spin the waiter yields its OS thread, which matters when there are
// more workers than cores and the holder has been preempted by the kernel.
#pragma once

#include <atomic>
#include <sched.h>

#include <usched/detail/cpu_relax.hpp>

namespace usched::detail {

class spinlock {
 public:
  void lock() noexcept {
    for (;;) {
      if (!locked_.exchange(true, std::memory_order_acquire)) return;
      unsigned spins = 0;
      // Spin on a plain load so the line stays shared until it is released.
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins < spins_before_yield) {
          cpu_relax();
        } else {
          sched_yield();
          spins = 0;
        }
      }
    }
  }
  bool try_lock() noexcept {
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  // Roughly a few microseconds of pause instructions before giving the core
  // to whoever holds the lock.
  static constexpr unsigned spins_before_yield = 256;
  std::atomic<bool> locked_{false};
};

}  // namespace usched::detail
