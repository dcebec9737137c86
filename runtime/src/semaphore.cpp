// semaphore.cpp: counting_semaphore's permits and waiters on the wait
// protocol (usched/detail/wait.hpp).
#include <mutex>
#include <stdexcept>

#include <usched/semaphore.hpp>

namespace usched::detail {

void semaphore_state::release(std::ptrdiff_t update, std::ptrdiff_t max) {
  std::lock_guard<spinlock> g(lock_);
  if (update < 0) throw std::logic_error("usched::counting_semaphore::release: negative update");
  if (update > max - count_) throw std::logic_error("usched::counting_semaphore::release: the count would pass max()");
  // One permit per waiter won: notify_first() claims the wait before it
  // counts as served, and skips the waiters a timer or a stop ended, so a
  // permit is neither given to one that has gone nor lost with it. The
  // permit itself is the waiter's `ok`; nothing else is handed over.
  while (update > 0 && notify_first(waiters_)) --update;
  count_ += update;
}

bool semaphore_state::try_acquire() noexcept {
  std::lock_guard<spinlock> g(lock_);
  if (count_ == 0) return false;
  --count_;
  return true;
}

bool semaphore_state::acquire(std::int64_t deadline_ns, const std::stop_token& stop) {
  std::unique_lock<spinlock> lk(lock_);
  // A positive count means nobody waits (release() serves waiters first),
  // so taking it overtakes no one.
  if (count_ > 0) {
    --count_;
    return true;
  }
  if (stop.stop_requested()) return false;
  waiter w;
  if (!wait_in(lk, waiters_, w, wait_kind::semaphore, this, deadline_ns, stop)) return false;
  // Handed a permit by a release() that may still hold lock_ while it
  // serves the next waiters: once we have had lock_, it is done with the
  // semaphore, which the caller may now destroy.
  lk.lock();
  lk.unlock();
  return true;
}

}  // namespace usched::detail
