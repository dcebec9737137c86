// usched/detail/core.hpp: the narrow, type-erased interface between the
// public templates (spawn, join_handle, sync primitives) and the compiled
// runtime. Not part of the public API; names here may change.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <stop_token>

namespace usched {
struct spawn_options;
}

namespace usched::detail {

class runtime_impl;
struct fiber;

// A spawned callable and its result, placed in the memory of the fiber that
// runs it (at the top of its stack block), so a spawn allocates nothing but
// the fiber it reuses from a pool.
struct task_base {
  // Runs the callable, stores its result or exception, then destroys the
  // callable (on the fiber, so its destructor may block).
  void (*invoke)(task_base*) noexcept = nullptr;
  // Destroys the stored result.
  void (*destroy)(task_base*) noexcept = nullptr;
  std::exception_ptr error;
  // The fiber's stop state, for a callable that takes a std::stop_token
  // (its frame holds the source); null for the others.
  std::stop_source* stop = nullptr;
};

// Memory for a task frame inside a fresh fiber.
struct fiber_slot {
  fiber* f = nullptr;
  void* frame = nullptr;
};

// runtime_of_current_fiber() returns the runtime of the fiber calling it, or
// null on a thread that is not running a fiber.
runtime_impl* runtime_of_current_fiber() noexcept;

// allocate_fiber() checks `opts` against `rt` (std::invalid_argument for a
// pin outside the workers), takes a fiber from `rt`'s pool and reserves
// `size` bytes aligned to `align` for its task frame. Throws std::bad_alloc.
fiber_slot allocate_fiber(runtime_impl& rt, std::size_t size, std::size_t align,
                          const spawn_options& opts);

// discard_fiber() returns a fiber that was allocated but never started (its
// task frame failed to construct).
void discard_fiber(runtime_impl& rt, fiber* f) noexcept;

// start_fiber() makes `f` runnable with `task` as its body, placed as the
// options and the policy say. `f` then holds one reference for the caller's
// join_handle.
void start_fiber(runtime_impl& rt, fiber* f, task_base* task, const spawn_options& opts);

// join_fiber() blocks the calling fiber or thread until `f` has finished.
void join_fiber(fiber* f);
// join_fiber_until() is join_fiber() that gives up at `deadline_ns`
// (usched/detail/deadline.hpp; 0: do not wait) or once `stop` is
// requested: true if `f` has finished.
bool join_fiber_until(fiber* f, std::int64_t deadline_ns, const std::stop_token& stop = {});
// fiber_finished() tells whether `f` has finished, without blocking.
bool fiber_finished(const fiber* f) noexcept;
// release_fiber() drops the join_handle's reference after a join.
void release_fiber(fiber* f) noexcept;
// detach_fiber() drops the join_handle's reference without joining. If the
// fiber ended (or later ends) with an exception, one line naming the fiber
// and the exception goes to stderr and the process aborts.
void detach_fiber(fiber* f) noexcept;
std::uint64_t fiber_id_of(const fiber* f) noexcept;

// The calling fiber's fiber_local values (or, on a plain thread, the
// thread's): fiber_local_find() is the value of the fiber_local `key`, or
// null if the caller has none yet; fiber_local_add() records a new one,
// destroyed with `destroy` when the fiber returns (the thread exits). On
// bad_alloc it destroys `value` and rethrows. new_fiber_local_key() is a
// key no other fiber_local has had in this process.
void* fiber_local_find(std::uint64_t key) noexcept;
void fiber_local_add(std::uint64_t key, void* value, void (*destroy)(void*) noexcept);
std::uint64_t new_fiber_local_key() noexcept;
// clear_fiber_locals() destroys the calling fiber's fiber_local values now
// (newest first), as its return would: for a fiber whose completion is
// announced before it returns (a task_group's task, an async call), so
// that nothing of it outlives the announcement. No-op outside a fiber.
void clear_fiber_locals() noexcept;

// A call usched::blocking() runs on the blocking pool: `run` makes the
// call (and keeps its result or exception); then the pool thread resumes
// `who`, which armed `token` and blocked. It lives on the caller's stack.
struct waitable;
struct blocking_job {
  void (*run)(blocking_job*) noexcept = nullptr;
  waitable* who = nullptr;
  std::uint64_t token = 0;
  blocking_job* next = nullptr;  // the pool's queue
};
// run_blocking() runs `job` on `rt`'s blocking pool and blocks the calling
// fiber until it has run.
void run_blocking(runtime_impl& rt, blocking_job& job);

// sleep_until_deadline() blocks the calling fiber (or thread) until
// `deadline_ns` (usched/detail/deadline.hpp: steady-clock ns, 0 is due now,
// far_deadline_ns never comes).
void sleep_until_deadline(std::int64_t deadline_ns);
// sleep_until_deadline(deadline_ns, stop) is that sleep ended early by a
// request on `stop`: true if the time came, false if the request came
// first (one made before the call: false at once, whatever the time). A
// fiber's request wakes it through the wait protocol, as
// wake_reason::stop; a thread's unparks it.
bool sleep_until_deadline(std::int64_t deadline_ns, const std::stop_token& stop);

}  // namespace usched::detail
