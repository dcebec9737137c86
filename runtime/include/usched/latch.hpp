// usched/latch.hpp: a single-use count-down barrier (std::latch).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <stop_token>

#include <usched/detail/spinlock.hpp>
#include <usched/detail/wait.hpp>

namespace usched {

// latch is std::latch for fibers and plain threads: a counter set once at
// construction, counted down by count_down(), and waiters released when it
// reaches zero; it never resets. wait() blocks the calling fiber, not its
// worker.
//
// What std leaves undefined throws std::logic_error here, as wait_group
// does: a negative expected count, and a count_down() by a negative amount
// or by more than is left (the count would go negative). The count is left
// unchanged when it throws.
//
// usched extension: wait(std::stop_token) also returns when a stop is
// requested, with false, as condition_variable_any::wait with a stop token
// does in std.
//
// The latch may be destroyed as soon as a wait() or try_wait() has seen the
// count at zero, although the count_down() that brought it there may still
// be waking the other waiters (the usual pattern: a latch on the waiter's
// stack, counted down by the fibers it started). Every path that sees zero
// therefore passes through lock_ after the last count_down() released it:
// count_down() wakes under lock_ and touches nothing after releasing it.
class latch {
 public:
  static constexpr std::ptrdiff_t max() noexcept { return PTRDIFF_MAX; }

  // Requires 0 <= expected (std::logic_error otherwise). constexpr as std's:
  // a latch at namespace scope may be constinit.
  constexpr explicit latch(std::ptrdiff_t expected) : count_(expected) {
    if (expected < 0) throw std::logic_error("usched::latch: negative expected count");
  }
  ~latch() = default;
  latch(const latch&) = delete;
  latch& operator=(const latch&) = delete;

  // count_down() lowers the count by `n` and, if that brings it to zero,
  // releases every waiter. Requires 0 <= n <= the count left
  // (std::logic_error otherwise, the count unchanged). Never blocks.
  void count_down(std::ptrdiff_t n = 1);

  // try_wait() is whether the count has reached zero. Never blocks (beyond
  // the lock of a count_down() finishing its wake-ups), never fails
  // spuriously.
  bool try_wait() const noexcept;

  // wait() blocks until the count is zero; returns at once if it is.
  void wait() const;

  // wait(stop) blocks until the count is zero or a stop is requested on
  // `stop`. Returns whether the count is zero: true when it reached zero,
  // even if a stop was requested too (already, or at the same time);
  // false when the stop ended the wait first.
  bool wait(std::stop_token stop) const;

  // arrive_and_wait() is count_down(n) then wait(), in one step under the
  // lock. Requires what count_down() requires.
  void arrive_and_wait(std::ptrdiff_t n = 1);

 private:
  // Requires lock_ held: checks `n` against count_ and applies it, waking
  // every waiter if the count reaches zero.
  void count_down_locked(std::ptrdiff_t n);
  // Requires `lk` holding lock_ and count_ > 0: waits until count_ is zero
  // or `stop` is requested, releasing lock_; true if the count reached zero.
  bool wait_locked(std::unique_lock<detail::spinlock>& lk, const std::stop_token& stop) const;
  // pass_lock() takes and drops lock_, for a caller that saw the count at
  // zero without it: the count_down() that zeroed it has then released
  // lock_ and is done with the object.
  void pass_lock() const noexcept;

  mutable detail::spinlock lock_;
  // The count left. Written under lock_ only; read without it by
  // try_wait() and wait(), which need lock_ only once they see zero.
  std::atomic<std::ptrdiff_t> count_;
  mutable detail::wait_list waiters_;  // guarded by lock_
};

}  // namespace usched
