// usched/fiber_local.hpp: storage with one instance per fiber.
#pragma once

#include <cstdint>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

#include <usched/detail/core.hpp>

namespace usched {

// fiber_local<T> is to a fiber what thread_local is to a thread: every
// fiber that uses it gets its own T, made on its first use (a copy of the
// initial value given at construction, or value-initialized) and destroyed
// when that fiber returns, on the fiber. A thread_local would be the wrong
// tool: a fiber moves between workers, so it would see another worker's
// object after a switch, and two fibers on one worker would share one.
// Used from a plain thread, it is per thread, destroyed at the thread's exit.
// Inside usched::blocking(f), f sees its calling fiber's values, though a
// pool thread runs it.
//
// The object must outlive every fiber that uses it (a namespace-scope or
// static fiber_local, typically). Access is a short search of the calling
// fiber's table, most recent first: cheap, but not a thread_local's single
// load; keep the reference in a hot loop.
template <class T>
class fiber_local {
  static_assert(!std::is_reference_v<T> && !std::is_array_v<T>, "fiber_local<T> needs an object type");

 public:
  // Each fiber's T is value-initialized.
  fiber_local() : fiber_local(std::in_place) {}
  // Each fiber's T is a copy of `initial`.
  explicit fiber_local(const T& initial)
    requires std::is_copy_constructible_v<T>
      : key_(detail::new_fiber_local_key()), make_(&make_copy), initial_(initial) {}
  fiber_local(const fiber_local&) = delete;
  fiber_local& operator=(const fiber_local&) = delete;

  // get() is the calling fiber's T, made now if it has none yet.
  T& get() {
    if (void* v = detail::fiber_local_find(key_)) return *static_cast<T*>(v);
    T* made = make_(initial_ ? &*initial_ : nullptr);
    detail::fiber_local_add(key_, made, &destroy);
    return *made;
  }
  T& operator*() { return get(); }
  T* operator->() { return &get(); }

 private:
  explicit fiber_local(std::in_place_t) : key_(detail::new_fiber_local_key()), make_(&make_value) {}
  static T* make_value(const T*) { return new T(); }
  static T* make_copy(const T* initial) { return new T(*initial); }
  static void destroy(void* v) noexcept { delete static_cast<T*>(v); }

  const std::uint64_t key_;
  T* (*make_)(const T*);
  std::optional<T> initial_;  // what each fiber's T is copied from, if given
};

}  // namespace usched
