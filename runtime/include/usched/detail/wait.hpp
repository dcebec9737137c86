// usched/detail/wait.hpp: the blocking protocol the synchronization
// primitives are built on. Not part of the public API.
//
// A primitive keeps its blocked callers in a wait_list under its own
// spinlock. To block, a caller arms a token on itself (prepare_wait), links a
// waiter carrying that token, drops the lock and calls block(). A waker pops a
// waiter under the lock and calls wake() with its token; the token can be
// claimed once only, so a notify racing with a timeout resumes the waiter
// exactly once. Fibers and plain OS threads block through the same calls.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <stop_token>

#include <usched/detail/deadline.hpp>
#include <usched/wake_reason.hpp>

namespace usched::detail {

// What a blocked caller waits in. Recorded on every wait (one byte and one
// pointer stored, on lines the waiter owns) so that a runtime whose
// destructor has waited long for its fibers can say which ones are blocked
// and on what (runtime_impl::report_hang).
enum class wait_kind : std::uint8_t {
  none,
  channel_send,
  channel_recv,
  mutex,
  condition_variable,
  wait_group,
  join,   // the object is the fiber joined
  sleep,  // no object
  future,             // future / shared_future wait, get
  latch,              // latch::wait
  barrier,            // barrier::arrive_and_wait, wait
  semaphore,          // counting_semaphore::acquire
  shared_mutex,       // shared_mutex::lock, lock_shared
  condition_variable_any,
  select,             // usched::select over channel operations
  blocking,           // usched::blocking: a call running on the blocking pool
  io,                 // usched::io / usched::net: an I/O call in a worker's reactor
  task_group,         // task_group::wait: the object is the group, not a fiber
};

// reason_of() is why a waker that ends a wait in `kind` wakes its waiter
// (usched/wake_reason.hpp): what the waiter waited in names it. A timer or
// a stop request ending the wait is not read from here: those wakers pass
// wake_reason::timer or wake_reason::stop themselves. A sleep only a
// timer ends. No default: a new kind does not compile until it is given
// its reason. A switch of constants, which the compiler makes a table.
constexpr wake_reason reason_of(wait_kind kind) noexcept {
  switch (kind) {
    case wait_kind::mutex:
    case wait_kind::condition_variable:
    case wait_kind::condition_variable_any:
    case wait_kind::shared_mutex:
    case wait_kind::semaphore:
    case wait_kind::latch:
    case wait_kind::barrier:
    case wait_kind::wait_group:
      return wake_reason::sync;
    case wait_kind::channel_send:
    case wait_kind::channel_recv:
    case wait_kind::select:
      return wake_reason::channel;
    case wait_kind::join:
    case wait_kind::task_group:
      return wake_reason::join;
    case wait_kind::future:
      return wake_reason::future;
    case wait_kind::sleep:
      return wake_reason::timer;
    case wait_kind::blocking:
      return wake_reason::blocking;
    case wait_kind::io:
      return wake_reason::io;
    case wait_kind::none:
      return wake_reason::other;
  }
  return wake_reason::other;
}

// Anything that can block in a usched primitive: a fiber, or an OS thread
// outside the runtime (through its thread_parker); both are the runtime's
// internals, derived from this.
//
// The wait token makes every wake-up race safe. A waiter arms the token
// (prepare_wait, an odd value) before it publishes itself anywhere; each
// would-be waker (a notify, a timer, a channel transfer) tries to claim that
// exact value with one CAS, and only the winner resumes it. The token only
// ever grows, also across the reuse of a pooled fiber, so a stale timer entry
// or a late notifier can never claim a later wait.
struct waitable {
  std::atomic<std::uint64_t> wait_token{0};
  bool is_fiber = false;
  // What the current (or last) wait is in, set by prepare_wait; in the
  // padding after is_fiber, on the line the token already dirties. Read only
  // by the hang report, from another thread: relaxed, a snapshot is enough.
  std::atomic<wait_kind> waiting_in{wait_kind::none};
};

// The caller's waitable: its fiber, or its thread's parker.
waitable& current_waitable() noexcept;
// Arm the caller for one wait in `kind` on `object` (the primitive); returns
// the token a waker must claim.
std::uint64_t prepare_wait(waitable& me, wait_kind kind, const void* object) noexcept;
// Suspend until the token is claimed by a waker, or until `deadline_ns`
// when the caller claims it itself. `deadline_ns` is no_deadline (or any
// negative value) for none, else a deadline of usched/detail/deadline.hpp:
// steady-clock ns, 0 due now, far_deadline_ns never (no timer is armed).
void block(waitable& me, std::uint64_t token, std::int64_t deadline_ns);
// The `deadline_ns` of a wait that only a waker ends.
inline constexpr std::int64_t no_deadline = -1;
// Whether a wait with this deadline arms a timer.
constexpr bool has_timer(std::int64_t deadline_ns) noexcept {
  return deadline_ns >= 0 && deadline_ns != far_deadline_ns;
}
// Claim `token` and make `w` runnable; false if already claimed. The
// wake-up's reason is `why`, or, without it, what `w` waits in
// (reason_of(w.waiting_in)).
bool wake(waitable& w, std::uint64_t token) noexcept;
bool wake(waitable& w, std::uint64_t token, wake_reason why) noexcept;
// The two halves of wake(), for a waker that must know it won the wait
// before it hands anything over (a wait a timer or a stop request may end).
// Between them the waiter stays blocked, so what the waker writes for it is
// seen when it resumes.
// claim_wait() wins the right to resume the wait armed with `token`; false
// if someone else already did (or the wait is over).
inline bool claim_wait(waitable& w, std::uint64_t token) noexcept {
  std::uint64_t expected = token;
  return w.wait_token.compare_exchange_strong(expected, token + 1, std::memory_order_acq_rel,
                                              std::memory_order_relaxed);
}
// resume_wait() makes a claimed waiter run again: a fiber is placed on a
// runqueue by its runtime's wake placement, a thread is unparked. A
// fiber's wake-up is counted by `why` (runtime::stats()); the first form
// takes it from what the waiter waits in (reason_of(w.waiting_in)), read
// here, while the claim still keeps the waiter from arming another wait.
void resume_wait(waitable& w) noexcept;
void resume_wait(waitable& w, wake_reason why) noexcept;

// block() that also ends when `stop` is requested: a stop callback claims
// the wait as a waker would (wake(), as wake_reason::stop). A stop
// requested already ends it at once. The callback's destructor waits for a
// callback running on another thread, so nothing touches the waiter after
// this returns.
inline void block(waitable& me, std::uint64_t token, std::int64_t deadline_ns, const std::stop_token& stop) {
  if (!stop.stop_possible()) {
    block(me, token, deadline_ns);
    return;
  }
  std::stop_callback on_stop(stop, [&me, token]() noexcept { wake(me, token, wake_reason::stop); });
  block(me, token, deadline_ns);
}

// One blocked caller, linked in a wait_list while it waits. It lives on the
// caller's stack, which stays valid until the caller is resumed.
struct waiter {
  waiter* next = nullptr;
  waiter* prev = nullptr;
  waitable* who = nullptr;
  std::uint64_t token = 0;
  bool linked = false;
  // Channel transfer: the item a waiting sender offers, or the slot a waiting
  // receiver gets its item in; `ok` says whether the transfer happened.
  void* item = nullptr;
  bool ok = false;
};

// notify() ends `w`'s wait as a waker (the owner's lock held, w already
// unlinked): if the wait is still the waker's to end, `w.ok` is set and the
// waiter resumed; false when a timer or a stop request ended it first (the
// waiter is then on its way back, and will find itself unlinked and not
// ok). `deliver` runs between the claim and the resume: the hand-over a
// waiter may see only if it won (an item, a lock, a permit).
template <class Deliver>
bool notify(waiter& w, Deliver&& deliver) noexcept {
  waitable& who = *w.who;
  if (!claim_wait(who, w.token)) return false;
  deliver();
  w.ok = true;
  // Last: once resumed the waiter may return and its node (on its stack)
  // be gone.
  resume_wait(who);
  return true;
}
inline bool notify(waiter& w) noexcept {
  return notify(w, [] {});
}

// FIFO of waiters; every operation requires the owner's lock.
class wait_list {
 public:
  bool empty() const noexcept { return head_ == nullptr; }
  void push_back(waiter& w) noexcept {
    w.next = nullptr;
    w.prev = tail_;
    if (tail_) {
      tail_->next = &w;
    } else {
      head_ = &w;
    }
    tail_ = &w;
    w.linked = true;
  }
  void remove(waiter& w) noexcept {
    if (w.prev) {
      w.prev->next = w.next;
    } else {
      head_ = w.next;
    }
    if (w.next) {
      w.next->prev = w.prev;
    } else {
      tail_ = w.prev;
    }
    w.next = w.prev = nullptr;
    w.linked = false;
  }
  waiter* pop_front() noexcept {
    waiter* w = head_;
    if (w) remove(*w);
    return w;
  }
  // size() counts the waiters linked: a walk, for a report, not a hot path.
  std::size_t size() const noexcept {
    std::size_t n = 0;
    for (const waiter* w = head_; w; w = w->next) ++n;
    return n;
  }

 private:
  waiter* head_ = nullptr;
  waiter* tail_ = nullptr;
};

// wait_in() is the waiter's half of a wait on `list`, for a caller that
// holds `lk` (the owner's lock) and found it must wait: it links `w` for
// the calling waitable, releases `lk`, runs `unlocked()` (a condition
// variable releases its user's lock there), and blocks until a waker
// notify()s it, `deadline_ns` passes (usched/detail/deadline.hpp;
// no_deadline for none) or `stop` is requested. Returns with `lk` released
// and true if a waker notified it (what the waker delivered is in place),
// false after a timeout or a stop. A wait that only a waker can end never
// takes `lk` again: the waker, not the waiter, unlinked it.
template <class Lock, class Unlocked>
bool wait_in(Lock& lk, wait_list& list, waiter& w, wait_kind kind, const void* object, std::int64_t deadline_ns,
             const std::stop_token& stop, Unlocked&& unlocked) {
  waitable& me = current_waitable();
  w.who = &me;
  w.ok = false;
  w.token = prepare_wait(me, kind, object);
  list.push_back(w);
  lk.unlock();
  try {
    unlocked();
  } catch (...) {
    // The wait never began (no timer, no stop callback yet): leave the
    // list, or, if a waker took us off already, take the resume it owes
    // us, so that neither the node nor the token outlives this frame.
    lk.lock();
    const bool linked = w.linked;
    if (linked) list.remove(w);
    lk.unlock();
    if (linked) {
      (void)claim_wait(me, w.token);
    } else {
      block(me, w.token, no_deadline);
    }
    throw;
  }
  block(me, w.token, deadline_ns, stop);
  if (has_timer(deadline_ns) || stop.stop_possible()) {
    // Still linked: nobody notified us, and nobody can now (we hold lk).
    // Unlinked and not ok: a waker took us off but lost the claim to the
    // timer or the stop, and went on to the next waiter.
    lk.lock();
    if (w.linked) list.remove(w);
    lk.unlock();
  }
  return w.ok;
}
template <class Lock>
bool wait_in(Lock& lk, wait_list& list, waiter& w, wait_kind kind, const void* object, std::int64_t deadline_ns,
             const std::stop_token& stop = {}) {
  return wait_in(lk, list, w, kind, object, deadline_ns, stop, [] {});
}

// notify_first() notifies the first waiter of `list` still waiting (those a
// timer or a stop request ended are dropped), `deliver(w)` handing it what
// it waited for; false if none was left. The owner's lock is held.
template <class Deliver>
bool notify_first(wait_list& list, Deliver&& deliver) noexcept {
  while (waiter* w = list.pop_front()) {
    if (notify(*w, [&] { deliver(*w); })) return true;
  }
  return false;
}
inline bool notify_first(wait_list& list) noexcept {
  return notify_first(list, [](waiter&) {});
}
// notify_all() notifies every waiter of `list`; returns how many.
inline unsigned notify_all(wait_list& list) noexcept {
  unsigned n = 0;
  while (waiter* w = list.pop_front()) n += notify(*w) ? 1 : 0;
  return n;
}

}  // namespace usched::detail
