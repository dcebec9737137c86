// fiber_local.cpp: the tables behind usched::fiber_local: each fiber's
// (made on first use, cleared when it returns, and used by its
// usched::blocking calls on the pool's threads too), or its thread's.
#include <atomic>

#include <usched/fiber_local.hpp>

#include "runtime_impl.hpp"

namespace usched::detail {

namespace {

// The fiber whose usched::blocking call this thread, a blocking pool
// thread, is running (lend_fiber_locals), or null. Read only by its own
// thread, which runs no fiber: a plain thread_local is right here, unlike
// on a worker, where a fiber may resume on another thread.
thread_local fiber* lent_fiber = nullptr;

// The fiber whose table the caller uses: the fiber it runs, or the fiber
// whose blocking call it runs; null on any other thread.
fiber* fiber_of_caller() noexcept {
  if (worker* w = worker_of_this_thread()) {
    if (fiber* f = w->current_fiber()) return f;
  }
  return lent_fiber;
}

// The fiber_local table of the caller: its fiber's (made on first use), or
// its thread's.
fiber_locals& locals_of_caller() {
  if (fiber* f = fiber_of_caller()) {
    if (!f->locals) f->locals = new fiber_locals;
    return *f->locals;
  }
  thread_local fiber_locals of_thread;
  return of_thread;
}

}  // namespace

void lend_fiber_locals(fiber* f) noexcept { lent_fiber = f; }

void* fiber_local_find(std::uint64_t key) noexcept {
  fiber_locals* l = nullptr;
  if (fiber* f = fiber_of_caller()) {
    l = f->locals;
    if (!l) return nullptr;
  } else {
    l = &locals_of_caller();
  }
  for (auto it = l->entries.rbegin(); it != l->entries.rend(); ++it) {
    if (it->key == key) return it->value;
  }
  return nullptr;
}

void fiber_local_add(std::uint64_t key, void* value, void (*destroy)(void*) noexcept) {
  try {
    locals_of_caller().entries.push_back({key, value, destroy});
  } catch (...) {
    destroy(value);
    throw;
  }
}

void clear_fiber_locals() noexcept {
  if (worker* w = worker_of_this_thread(); w && w->current_fiber() && w->current_fiber()->locals) {
    w->current_fiber()->locals->clear();
  }
}

std::uint64_t new_fiber_local_key() noexcept {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace usched::detail
