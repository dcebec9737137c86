// usched/detail/core.hpp: the narrow, type-erased interface between the
// public templates (spawn, join_handle, sync primitives) and the compiled
// runtime. Not part of the public API; names here may change.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <stop_token>

#include <usched/detail/spinlock.hpp>

namespace usched {
struct spawn_options;
}

namespace usched::detail {

class runtime_impl;
struct fiber;
struct waitable;

// A fiber's join state: its completion, its joiner and its result or
// exception, kept apart from the fiber's stack so that a finished fiber
// costs only this until its result is collected. The stack goes back to
// the pool when the fiber returns; the join state lives on until both the
// fiber and its join_handle are done with it (two references), so a handle
// stays valid whatever outlives what, its runtime included. It is not the
// runtime's memory: a handle may release it after the runtime is gone.
// The typed result follows it (join_result<R> in usched/fiber.hpp).
struct join_state {
  std::atomic<std::uint32_t> refs{2};
  // Guards done's publication against the joiner's arrival and departure,
  // and `detached`.
  spinlock lock;
  std::atomic<bool> done{false};
  bool detached = false;
  bool has_value = false;
  waitable* joiner = nullptr;
  std::uint64_t joiner_token = 0;
  std::exception_ptr error;
  // The fiber's stop state, for a callable that takes a std::stop_token
  // (the typed state holds the source); null for the others.
  std::stop_source* stop = nullptr;
  // The fiber that runs it, until done: the join hand-off's candidate,
  // read under `lock`.
  fiber* runner = nullptr;
  std::uint64_t id = 0;
  const char* label = nullptr;
  // Destroys the typed state (its result, if any) and frees its memory
  // (free_join_state).
  void (*destroy)(join_state*) noexcept = nullptr;
};

// release_join_state() drops one reference; the last one destroys it.
inline void release_join_state(join_state* s) noexcept {
  if (s->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) s->destroy(s);
}
// Memory for a join state, from the calling thread's small cache of
// recently freed ones (plain heap memory, so any thread may free it, after
// any runtime is gone). free_join_state() takes the same size and
// alignment.
void* allocate_join_state(std::size_t size, std::size_t align);
void free_join_state(void* p, std::size_t size, std::size_t align) noexcept;

// A spawned callable with its bound arguments, placed in the memory of the
// fiber that runs it (at the top of its stack block), so a spawn takes
// nothing but a pooled fiber and a cached join state. It ends with the
// fiber's run; what it returns goes to the join state.
struct task_base {
  // Runs the callable, stores its result or exception in the join state,
  // then destroys the callable (on the fiber, so its destructor may block).
  void (*invoke)(task_base*) noexcept = nullptr;
};

// Memory for a task frame inside a fresh fiber, and its join state.
struct fiber_slot {
  fiber* f = nullptr;
  void* frame = nullptr;
  void* state = nullptr;
};

// runtime_of_current_fiber() returns the runtime of the fiber calling it, or
// null on a thread that is not running a fiber.
runtime_impl* runtime_of_current_fiber() noexcept;

// allocate_fiber() checks `opts` against `rt` (std::invalid_argument for a
// pin outside the workers), takes a fiber from `rt`'s pool, reserves
// `size` bytes aligned to `align` for its task frame and allocates
// `state_size` bytes aligned to `state_align` for its join state. Throws
// std::bad_alloc.
fiber_slot allocate_fiber(runtime_impl& rt, std::size_t size, std::size_t align, std::size_t state_size,
                          std::size_t state_align, const spawn_options& opts);

// discard_fiber() returns a fiber that was allocated but never started (its
// task frame or join state failed to construct), and frees the join
// state's memory.
void discard_fiber(runtime_impl& rt, const fiber_slot& slot, std::size_t state_size,
                   std::size_t state_align) noexcept;

// start_fiber() makes `f` runnable with `task` as its body, placed as the
// options and the policy say. `state` (constructed, two references: the
// fiber's and the caller's join_handle's) is its join state.
void start_fiber(runtime_impl& rt, fiber* f, task_base* task, join_state* state, const spawn_options& opts);

// join_wait() blocks the calling fiber or thread until the fiber of `s`
// has finished, giving up at `deadline_ns` (usched/detail/deadline.hpp; 0:
// do not wait) or once `stop` is requested: true if it has finished.
bool join_wait(join_state* s, std::int64_t deadline_ns, const std::stop_token& stop = {});
// detach_join_state() drops the join_handle's reference without joining.
// If the fiber ended (or later ends) with an exception, one line naming the
// fiber and the exception goes to stderr and the process aborts.
void detach_join_state(join_state* s) noexcept;

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
