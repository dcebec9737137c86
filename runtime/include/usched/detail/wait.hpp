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

#include <cstdint>

#include <usched/detail/deadline.hpp>

namespace usched::detail {

struct waitable;  // a fiber, or a thread's parker (runtime internals)

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
// Claim `token` and make `w` runnable; false if already claimed.
bool wake(waitable& w, std::uint64_t token) noexcept;

// One blocked caller, linked in a wait_list while it waits. It lives on the
// caller's stack, which stays valid until the caller is resumed.
struct waiter {
  waiter* next = nullptr;
  waiter* prev = nullptr;
  waitable* who = nullptr;
  std::uint64_t token = 0;
  bool linked = false;
  // Channel hand-off: the item a waiting sender offers, or the slot a waiting
  // receiver gets its item in; `ok` says whether the hand-off happened.
  void* item = nullptr;
  bool ok = false;
};

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

 private:
  waiter* head_ = nullptr;
  waiter* tail_ = nullptr;
};

}  // namespace usched::detail
