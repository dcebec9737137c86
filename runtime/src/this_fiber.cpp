// this_fiber.cpp: usched::this_fiber, the calling fiber's view of itself:
// its id, its worker, its preempt point (the fast path; the slow one is
// worker::preempt_check), and sleeping (yield() is in worker.cpp, beside
// the switch it inlines).
#include <stop_token>
#include <thread>

#include <usched/fiber.hpp>

#include "clock.hpp"
#include "runtime_impl.hpp"

namespace usched::detail {

void sleep_until_deadline(std::int64_t deadline_ns) {
  worker* w = worker_of_this_thread();
  fiber* f = w ? w->current_fiber() : nullptr;
  if (!f) {
    // A thread sleeps in the kernel; time_point::max() (far_deadline_ns) is
    // a sleep the kernel itself clamps to the end of its clock.
    std::this_thread::sleep_until(
        std::chrono::steady_clock::time_point(std::chrono::nanoseconds(deadline_ns)));
    return;
  }
  if (deadline_ns <= now_ns()) return;
  // A far deadline arms no timer: nothing ever resumes this wait.
  const std::uint64_t token = prepare_wait(*f, wait_kind::sleep, nullptr);
  w->block_current(f, token, deadline_ns);
}

bool sleep_until_deadline(std::int64_t deadline_ns, const std::stop_token& stop) {
  if (stop.stop_requested()) return false;
  if (!stop.stop_possible()) {
    sleep_until_deadline(deadline_ns);
    return true;
  }
  if (has_timer(deadline_ns) && deadline_ns <= now_ns()) return true;
  // A sleep that may end two ways is a wait on the protocol, on a thread
  // too (its parker's futex, with the deadline as its timeout), not the
  // kernel's sleep: the timer (the parker's own timeout) and the stop
  // callback race for the one claim of the token, and the winner alone
  // resumes the sleeper, so a stop that lands as the time comes ends it
  // once, and says which ended it.
  waitable& me = current_waitable();
  const std::uint64_t token = prepare_wait(me, wait_kind::sleep, nullptr);
  bool stopped = false;
  {
    // Set by the callback before it resumes us; read after the callback's
    // destructor, which waits for a callback running on another thread.
    std::stop_callback on_stop(stop, [&me, &stopped, token]() noexcept {
      if (!claim_wait(me, token)) return;
      stopped = true;
      resume_wait(me, wake_reason::stop);
    });
    block(me, token, deadline_ns);
  }
  return !stopped;
}

}  // namespace usched::detail

namespace usched {
namespace this_fiber {

// yield() is defined in worker.cpp, beside the switch it inlines.

void sleep_until(std::chrono::steady_clock::time_point deadline) {
  detail::sleep_until_deadline(detail::deadline_at(deadline));
}

fiber_id get_id() noexcept {
  detail::worker* w = detail::worker_of_this_thread();
  detail::fiber* f = w ? w->current_fiber() : nullptr;
  return fiber_id(f ? f->id.load(std::memory_order_relaxed) : 0);
}

int worker_index() noexcept {
  detail::worker* w = detail::worker_of_this_thread();
  return w && w->current_fiber() ? w->index() : -1;
}

// One relaxed load and a branch while nothing is asked: the monitor
// (monitor.hpp) measures the slice and asks for the tick, a wake-up asks
// for its preemption, and a worker with I/O in flight asks for every look;
// no clock is read here. A request that reaches the worker's own context
// (not a fiber) is dropped by the slow path.
void preempt_point() noexcept {
  detail::worker* w = detail::worker_of_this_thread();
  if (w && w->preempt_requested()) [[unlikely]] w->preempt_check();
}

}  // namespace this_fiber
}  // namespace usched
