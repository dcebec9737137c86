// wait_probe.hpp: whether a fiber (or a plain thread) is blocked in a
// primitive, for tests that need a waiter registered before they act.
//
// A test that requests a stop, unlocks or releases "once the other fiber
// blocks" must not guess with a sleep: a sleep makes the interleaving likely,
// not certain, and costs wall-clock time on every run. It watches the
// waiter's wait instead, the way the runtime's hang report does
// (runtime_impl::report_hang): a waiter arms its wait token (an odd value)
// and records what it waits in (prepare_wait) under the primitive's own
// lock, in the same critical section in which it links itself into the
// primitive's queue (detail::wait_in). So once the token reads armed, any
// operation on the primitive (each takes that lock) finds the waiter queued,
// or finds it already woken and on its way back.
#pragma once

#include <atomic>

#include <usched/detail/wait.hpp>

#include "fiber_impl.hpp"

namespace usched::test {

class wait_probe {
 public:
  // attach() is called by the fiber or thread to watch, before it waits:
  // the probe then follows that caller's waits. The caller must stay alive
  // (not return from its fiber) while others read the probe, since a pooled
  // fiber is reused by later spawns.
  void attach() noexcept { who_.store(&detail::current_waitable(), std::memory_order_release); }

  // blocked_in(kind): whether the attached caller is blocked now in a wait
  // of `kind` (false before attach()). The armed token says it is in a
  // wait; the kind, a relaxed snapshot as the hang report reads it, says
  // which. A test attaches a caller whose only wait is the one it watches.
  bool blocked_in(detail::wait_kind kind) const noexcept {
    const detail::waitable* w = who_.load(std::memory_order_acquire);
    if (w == nullptr) return false;
    if ((w->wait_token.load(std::memory_order_acquire) & 1) == 0) return false;
    return w->waiting_in.load(std::memory_order_relaxed) == kind;
  }

 private:
  std::atomic<const detail::waitable*> who_{nullptr};
};

}  // namespace usched::test
