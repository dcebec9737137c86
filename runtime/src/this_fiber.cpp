// this_fiber.cpp: usched::this_fiber, the calling fiber's view of itself:
// its id, its worker, its preempt point, and sleeping (yield() is in
// worker.cpp, beside the switch it inlines).
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

void preempt_point() noexcept {
  detail::worker* w = detail::worker_of_this_thread();
  if (w && w->current_fiber()) w->preempt_check();
}

}  // namespace this_fiber
}  // namespace usched
