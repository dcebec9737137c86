// wait.cpp: the wait protocol (usched/detail/wait.hpp) for fibers and plain
// threads alike: arming a wait, blocking until it is claimed (a fiber
// switches away, a thread sleeps on its parker's futex), and waking it.
#include "clock.hpp"
#include "futex.hpp"
#include "runtime_impl.hpp"

namespace usched::detail {
namespace {

thread_local thread_parker tls_parker;

}  // namespace

waitable& current_waitable() noexcept {
  worker* w = worker_of_this_thread();
  if (w) {
    if (fiber* f = w->current_fiber()) return *f;
  }
  return tls_parker;
}

void block(waitable& me, std::uint64_t token, std::int64_t deadline_ns) {
  if (me.is_fiber) {
    auto& f = static_cast<fiber&>(me);
    worker_of_this_thread()->block_current(&f, token, deadline_ns);
    return;
  }
  auto& p = static_cast<thread_parker&>(me);
  for (;;) {
    if (p.word.load(std::memory_order_acquire) == 1) {
      p.word.store(0, std::memory_order_relaxed);
      return;
    }
    if (!has_timer(deadline_ns)) {
      futex_wait(p.word, 0);
      continue;
    }
    const std::int64_t left = deadline_ns - now_ns();
    if (left <= 0) {
      // Time is up: claim our own wait. If a waker claimed it first, its
      // resume_wait() is on the way; wait for it so the counts stay paired.
      if (claim_wait(me, token)) return;
      deadline_ns = -1;
      continue;
    }
    futex_wait(p.word, 0, left);
  }
}

std::uint64_t prepare_wait(waitable& me, wait_kind kind, const void* object) noexcept {
  // What the wait is in, for the hang report only: relaxed stores, before
  // the token that says the wait is armed.
  me.waiting_in.store(kind, std::memory_order_relaxed);
  if (me.is_fiber) static_cast<fiber&>(me).waiting_on.store(object, std::memory_order_relaxed);
  // Only the waiter writes an armed value; publication under the primitive's
  // lock orders it for wakers, so relaxed is enough.
  const std::uint64_t armed = me.wait_token.load(std::memory_order_relaxed) + 1;
  me.wait_token.store(armed, std::memory_order_relaxed);
  return armed;
}

bool wake(waitable& w, std::uint64_t token) noexcept {
  if (!claim_wait(w, token)) return false;
  resume_wait(w);
  return true;
}

bool wake(waitable& w, std::uint64_t token, wake_reason why) noexcept {
  if (!claim_wait(w, token)) return false;
  resume_wait(w, why);
  return true;
}

void resume_wait(waitable& w) noexcept {
  // The waiter's own record of its wait: stored before the token it armed,
  // which the waker read under the primitive's lock (or from the joinee),
  // so this reads the wait being ended; relaxed, as for the hang report.
  resume_wait(w, reason_of(w.waiting_in.load(std::memory_order_relaxed)));
}

void resume_wait(waitable& w, wake_reason why) noexcept {
  if (w.is_fiber) {
    auto& f = static_cast<fiber&>(w);
    f.rt->try_to_wake_up(&f, placement_kind::wake, why);
    return;
  }
  auto& p = static_cast<thread_parker&>(w);
  p.word.store(1, std::memory_order_release);
  futex_wake(p.word);
}

}  // namespace usched::detail
