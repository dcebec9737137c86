// sync.cpp: mutex, condition_variable and wait_group on the wait protocol
// (usched/detail/wait.hpp), and the one-line reports of their misuse (and
// of a channel's, whose template cannot reach the runtime's fatal path).
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <string>

#include <usched/condition_variable.hpp>
#include <usched/detail/cpu_relax.hpp>
#include <usched/mutex.hpp>
#include <usched/shared_mutex.hpp>
#include <usched/wait_group.hpp>

#include "fatal.hpp"

namespace usched {
namespace {

// Attempts to take a held mutex by spinning before blocking. A critical
// section on another worker usually ends within a few hundred nanoseconds,
// far less than a block and wake-up round trip.
constexpr int mutex_spin_attempts = 64;

// Whether mutex and timed_mutex record their holder at lock and check the
// caller of unlock() against it (futex_lock::own, disown): in builds
// without NDEBUG only, since finding the caller doubles the cost of the
// fastest uncontended lock+unlock. An unlock of a mutex nobody holds is caught
// in every build (futex_lock::release_uncontended). The decision is this
// file's alone: every call that records or checks is made here, so a
// program built with another NDEBUG than the library sees the same.
#ifdef NDEBUG
constexpr bool check_mutex_owner = false;
#else
constexpr bool check_mutex_owner = true;
#endif

}  // namespace

namespace detail {

[[noreturn]] void report_unlock_by_non_owner(const char* kind, const void* m, bool locked) noexcept {
  const waitable& me = current_waitable();
  const std::string caller =
      me.is_fiber ? "fiber " + fiber_name(static_cast<const fiber*>(&me)) : std::string("a plain thread");
  char where[32];
  std::snprintf(where, sizeof where, "%p", m);
  die(std::string(kind) + "::unlock() of " + where + " by " + caller + ", which does not hold it (" +
      (locked ? "another fiber or thread does" : "nobody does") + "); aborting");
}

[[noreturn]] void report_channel_destroyed_with_waiters(std::size_t receivers, std::size_t senders) noexcept {
  const std::size_t n = receivers + senders;
  const char* who = n == 1 ? " fiber or thread was" : " fibers or threads were";
  die("a channel was destroyed while " + std::to_string(n) + who + " blocked in it (" + std::to_string(receivers) +
      " receiving, " + std::to_string(senders) +
      " sending); close() it and let the waiters return before destroying it; aborting");
}

bool futex_lock::try_lock() noexcept {
  if (!acquire()) return false;
  if constexpr (check_mutex_owner) own();
  return true;
}

bool futex_lock::spin_acquire() noexcept {
  if (acquire()) return true;
  for (int i = 0; i < mutex_spin_attempts; ++i) {
    cpu_relax();
    if (state_.load(std::memory_order_relaxed) == unlocked && acquire()) return true;
  }
  return false;
}

}  // namespace detail

void mutex::lock() {
  if (spin_acquire()) {
    if constexpr (check_mutex_owner) own();
    return;
  }
  detail::waitable& me = detail::current_waitable();
  for (;;) {
    lock_.lock();
    if (claim_contended()) {
      lock_.unlock();
      if constexpr (check_mutex_owner) own();
      return;
    }
    detail::waiter w;
    w.who = &me;
    w.token = detail::prepare_wait(me, detail::wait_kind::mutex, this);
    waiters_.push_back(w);
    lock_.unlock();
    detail::block(me, w.token, detail::no_deadline);
  }
}

void mutex::unlock() noexcept {
  if constexpr (check_mutex_owner) disown("mutex");
  if (release_uncontended("mutex")) return;
  lock_.lock();
  release_contended();
  detail::waiter* w = waiters_.pop_front();
  lock_.unlock();
  // Nothing else can claim a mutex waiter (it has no timeout), so it stays
  // blocked, and its node valid, until this wake.
  if (w) detail::wake(*w->who, w->token);
}

bool timed_mutex::lock_until(std::int64_t deadline_ns, const std::stop_token& stop) {
  if (spin_acquire()) {
    if constexpr (check_mutex_owner) own();
    return true;
  }
  for (;;) {
    lock_.lock();
    if (claim_contended()) {
      lock_.unlock();
      if constexpr (check_mutex_owner) own();
      return true;
    }
    // Given up only here, after the retry: a waiter an unlock woke must try
    // once (it took that unlock's wake-up); if the lock is taken again, the
    // holder's unlock sees it contended and wakes another.
    if (stop.stop_requested()) {
      lock_.unlock();
      return false;
    }
    detail::waiter w;
    if (!detail::wait_in(lock_, waiters_, w, detail::wait_kind::mutex, this, deadline_ns, stop)) {
      // The time came or stop was requested. The state may say contended
      // with nobody left waiting: the next unlock then looks at an empty
      // queue, which is all it costs. One last try, as the time is up.
      std::uint32_t expected = unlocked;
      if (stop.stop_requested() || !state_.compare_exchange_strong(expected, contended, std::memory_order_acquire,
                                                                   std::memory_order_relaxed)) {
        return false;
      }
      if constexpr (check_mutex_owner) own();
      return true;
    }
  }
}

void timed_mutex::unlock() noexcept {
  if constexpr (check_mutex_owner) disown("timed_mutex");
  if (release_uncontended("timed_mutex")) return;
  // The wake is under lock_, unlike mutex's: a waiter a timer may claim
  // takes lock_ before it returns, so its node stays valid while we hold
  // it, and one that lost its wait to the timer is passed over for the
  // next.
  std::lock_guard<detail::spinlock> g(lock_);
  release_contended();
  detail::notify_first(waiters_);
}

bool shared_mutex::try_lock() noexcept {
  std::lock_guard<detail::spinlock> g(lock_);
  if (writer_ || readers_ > 0) return false;
  writer_ = true;
  return true;
}

bool shared_mutex::lock_until(std::int64_t deadline_ns, const std::stop_token& stop) {
  lock_.lock();
  if (!writer_ && readers_ == 0) {
    writer_ = true;
    lock_.unlock();
    return true;
  }
  if (stop.stop_requested()) {
    lock_.unlock();
    return false;
  }
  ++writers_waiting_;
  detail::waiter w;
  // The waker that notifies us has made us the writer (release_locked).
  if (detail::wait_in(lock_, writers_, w, detail::wait_kind::shared_mutex, this, deadline_ns, stop)) return true;
  std::lock_guard<detail::spinlock> g(lock_);
  // Readers queue behind a waiting writer: if we were the last one, the
  // readers that queued behind us may go, unless a writer holds it.
  if (--writers_waiting_ == 0 && !writer_) {
    while (detail::waiter* r = readers_waiting_.pop_front()) detail::notify(*r, [this] { ++readers_; });
  }
  return false;
}

void shared_mutex::unlock() noexcept {
  std::lock_guard<detail::spinlock> g(lock_);
  writer_ = false;
  release_locked();
}

bool shared_mutex::try_lock_shared() noexcept {
  std::lock_guard<detail::spinlock> g(lock_);
  if (writer_ || writers_waiting_ > 0) return false;
  ++readers_;
  return true;
}

bool shared_mutex::lock_shared_until(std::int64_t deadline_ns, const std::stop_token& stop) {
  lock_.lock();
  if (!writer_ && writers_waiting_ == 0) {
    ++readers_;
    lock_.unlock();
    return true;
  }
  if (stop.stop_requested()) {
    lock_.unlock();
    return false;
  }
  detail::waiter w;
  // The waker that notifies us has counted us in readers_.
  return detail::wait_in(lock_, readers_waiting_, w, detail::wait_kind::shared_mutex, this, deadline_ns, stop);
}

void shared_mutex::unlock_shared() noexcept {
  std::lock_guard<detail::spinlock> g(lock_);
  if (--readers_ == 0) release_locked();
}

void shared_mutex::release_locked() noexcept {
  // A writer first: it may have waited while readers held the lock, and
  // the readers behind it waited for it.
  if (writers_waiting_ > 0 && detail::notify_first(writers_, [this](detail::waiter&) {
        writer_ = true;
        --writers_waiting_;
      })) {
    return;
  }
  // No writer is left in the queue (a writer passed over here is on its
  // way out, and lets the readers go itself if it was the last): every
  // waiting reader now holds it.
  while (detail::waiter* r = readers_waiting_.pop_front()) detail::notify(*r, [this] { ++readers_; });
}

void condition_variable::wait(std::unique_lock<mutex>& lk) { wait_impl(lk, detail::no_deadline); }

std::cv_status condition_variable::wait_until(std::unique_lock<mutex>& lk,
                                              std::chrono::steady_clock::time_point deadline) {
  return wait_impl(lk, detail::deadline_at(deadline));
}

std::cv_status condition_variable::wait_impl(std::unique_lock<mutex>& lk, std::int64_t deadline_ns) {
  if (!lk.owns_lock()) throw std::logic_error("usched::condition_variable: wait without the lock");
  detail::waitable& me = detail::current_waitable();
  detail::waiter w;
  w.who = &me;
  lock_.lock();
  w.token = detail::prepare_wait(me, detail::wait_kind::condition_variable, this);
  waiters_.push_back(w);
  lock_.unlock();
  // Enqueued before the mutex is released: a notifier that changes the
  // predicate under the mutex after this point finds us in the list.
  lk.unlock();
  detail::block(me, w.token, deadline_ns);
  std::cv_status status = std::cv_status::no_timeout;
  // Taken even when only a notifier can have ended the wait: the notifier
  // wakes under lock_, and once we have held it, it has let go of this
  // object, which its owner may destroy when the waits it notified have
  // returned (std's rule for a condition variable).
  lock_.lock();
  if (w.linked) {
    // Still in the list: the deadline claimed the wait, nobody notified us.
    waiters_.remove(w);
    status = std::cv_status::timeout;
  }
  lock_.unlock();
  lk.lock();
  return status;
}

// Waking happens under lock_: a waiter whose deadline claimed its own wait
// may be resuming at the same moment, and it takes lock_ before it can
// return, so its node and its waitable stay valid while we hold it. A
// notification that loses that race is consumed by the waiter, which returns
// no_timeout, and is not lost.
void condition_variable::notify_one() noexcept {
  lock_.lock();
  if (detail::waiter* w = waiters_.pop_front()) detail::wake(*w->who, w->token);
  lock_.unlock();
}

void condition_variable::notify_all() noexcept {
  lock_.lock();
  while (detail::waiter* w = waiters_.pop_front()) detail::wake(*w->who, w->token);
  lock_.unlock();
}

wait_group::wait_group(std::int64_t initial) : count_(initial) {
  if (initial < 0) throw std::logic_error("usched::wait_group: negative initial count");
}

void wait_group::add(std::int64_t n) {
  std::lock_guard<detail::spinlock> g(lock_);
  if (count_ + n < 0) throw std::logic_error("usched::wait_group: count would go negative");
  count_ += n;
  if (count_ == 0) detail::notify_all(waiters_);
}

bool wait_group::wait_until_ns(std::int64_t deadline_ns, const std::stop_token& stop) {
  lock_.lock();
  if (count_ == 0) {
    lock_.unlock();
    return true;
  }
  detail::waiter w;
  if (!detail::wait_in(lock_, waiters_, w, detail::wait_kind::wait_group, this, deadline_ns, stop)) {
    // A deadline or stop that raced the last done(): zero is zero.
    std::lock_guard<detail::spinlock> g(lock_);
    return count_ == 0;
  }
  // Woken by the done() that brought the count to zero, which wakes under
  // lock_: take lock_ once before returning, so that a caller that destroys
  // the wait_group next (the usual pattern: it lives on the waiter's
  // stack) does so only after that done() has let go of it.
  lock_.lock();
  lock_.unlock();
  return true;
}

std::int64_t wait_group::count() const noexcept {
  std::lock_guard<detail::spinlock> g(lock_);
  return count_;
}

}  // namespace usched
