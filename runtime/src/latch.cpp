// latch.cpp: usched::latch on the wait protocol (usched/detail/wait.hpp).
#include <mutex>
#include <stdexcept>

#include <usched/latch.hpp>

namespace usched {
namespace {

// check_count_down() throws for what std leaves undefined: a negative
// `n`, or one that would take the count `left` below zero.
void check_count_down(std::ptrdiff_t n, std::ptrdiff_t left) {
  if (n < 0) throw std::logic_error("usched::latch::count_down: negative update");
  if (n > left) throw std::logic_error("usched::latch::count_down: the count would go negative");
}

}  // namespace

void latch::count_down(std::ptrdiff_t n) {
  std::lock_guard<detail::spinlock> g(lock_);
  count_down_locked(n);
}

void latch::count_down_locked(std::ptrdiff_t n) {
  // count_ changes under lock_ only, so relaxed reads it here.
  const std::ptrdiff_t left = count_.load(std::memory_order_relaxed);
  check_count_down(n, left);
  // Release: a waiter that reads zero without the lock sees every write
  // made before each count_down().
  count_.store(left - n, std::memory_order_release);
  // Under lock_, as notify_all() requires: a stoppable waiter whose stop
  // races this wake-up takes lock_ before it returns, so its node stays
  // valid while we hold it.
  if (left == n) detail::notify_all(waiters_);
}

bool latch::try_wait() const noexcept {
  if (count_.load(std::memory_order_acquire) != 0) return false;
  pass_lock();
  return true;
}

void latch::wait() const {
  if (try_wait()) return;
  std::unique_lock<detail::spinlock> lk(lock_);
  if (count_.load(std::memory_order_relaxed) == 0) return;
  wait_locked(lk, {});
}

bool latch::wait(std::stop_token stop) const {
  if (try_wait()) return true;
  std::unique_lock<detail::spinlock> lk(lock_);
  if (count_.load(std::memory_order_relaxed) == 0) return true;
  // A stop already requested ends the wait before it links anything.
  if (stop.stop_requested()) return false;
  return wait_locked(lk, stop);
}

void latch::arrive_and_wait(std::ptrdiff_t n) {
  std::unique_lock<detail::spinlock> lk(lock_);
  count_down_locked(n);
  if (count_.load(std::memory_order_relaxed) == 0) return;
  wait_locked(lk, {});
}

bool latch::wait_locked(std::unique_lock<detail::spinlock>& lk, const std::stop_token& stop) const {
  detail::waiter w;
  if (detail::wait_in(lk, waiters_, w, detail::wait_kind::latch, this, detail::no_deadline, stop)) {
    // Woken by the count_down() that zeroed the count, which may still hold
    // lock_ while it wakes the others.
    pass_lock();
    return true;
  }
  // The stop ended the wait; the count may have reached zero meanwhile (its
  // wake-up then lost the claim to the stop), and the caller is told so.
  return try_wait();
}

void latch::pass_lock() const noexcept {
  lock_.lock();
  lock_.unlock();
}

}  // namespace usched
