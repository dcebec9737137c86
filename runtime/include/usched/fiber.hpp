// usched/fiber.hpp: spawning fibers, joining them, and what a fiber can do
// to itself (this_fiber).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <new>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <tuple>
#include <type_traits>
#include <utility>

#include <usched/detail/core.hpp>
#include <usched/detail/deadline.hpp>

namespace usched {

class runtime;

// Identity of a fiber, unique within its runtime (ids start at 1). The default value names
// no fiber (what this_fiber::get_id() returns outside a fiber).
class fiber_id {
 public:
  constexpr fiber_id() noexcept = default;
  constexpr explicit fiber_id(std::uint64_t v) noexcept : value_(v) {}
  constexpr std::uint64_t value() const noexcept { return value_; }
  friend constexpr auto operator<=>(fiber_id, fiber_id) noexcept = default;

 private:
  std::uint64_t value_ = 0;
};
std::ostream& operator<<(std::ostream& os, fiber_id id);

// Per-spawn settings.
struct spawn_options {
  // Pin the fiber to this worker index: it is queued there and never
  // migrated by any policy. -1 (default) lets the policy place it.
  int pin = -1;
  // Preferred NUMA node (0.. nodes-1), -1 for none. NUMA-aware policies place
  // the fiber on that node's workers when they can do so without making the
  // nodes too imbalanced (docs/policies/cfs-numa-mel.md).
  int numa_node = -1;
  // Scheduling weight (the kernel's nice-to-weight: 1024 is nice 0, each
  // nice level is about 1.25x), 15..88761. Fair policies give CPU time in
  // proportion to weight and count load as weight x runnable time.
  unsigned weight = 1024;
  // The slice the fiber asks for under the EEVDF discipline (the eevdf
  // policy): the kernel's sched_attr.sched_runtime for a fair task
  // (v6.12), EEVDF's latency knob. Its virtual deadlines are this far
  // apart, so a fiber with a shorter slice is picked sooner after it wakes
  // and runs in shorter turns, and a woken fiber whose slice is shorter
  // than the running one's preempts it (PREEMPT_SHORT). Its share of the
  // CPU is its weight's, whatever its slice. 0 (default): the runtime's
  // base slice (options::eevdf_base_slice). Accepted: 0, or 100 us..100 ms.
  // Other disciplines ignore it.
  std::chrono::nanoseconds slice{0};
  // A name for the fiber in the runtime's diagnostics (the line of a
  // detached fiber's uncaught exception, the destructor's report of
  // blocked fibers), e.g. where it was spawned: "http accept loop". Not
  // copied: it must outlive the fiber (a string literal does).
  const char* label = nullptr;
};

namespace detail {

// The typed part of a join state: where the fiber's result goes.
template <class R>
struct join_result : join_state {
  alignas(R) unsigned char storage[sizeof(R)];
  R& value() noexcept { return *std::launder(reinterpret_cast<R*>(storage)); }
};
// A callable that returns a reference: the fiber's result is the object
// referred to, which the callable's owner keeps alive.
template <class R>
struct join_result<R&> : join_state {
  R* target = nullptr;
  R& value() noexcept { return *target; }
};
template <>
struct join_result<void> : join_state {};

// Whether a callable takes a std::stop_token before its arguments (as
// std::jthread's does): the fiber is then given one, and its join_handle
// can request the stop. Preferred when the callable takes either.
template <class Fn, class... Args>
inline constexpr bool takes_stop_token_v = std::is_invocable_v<Fn, std::stop_token, Args...>;

// The whole join state of one spawn: the result, and the stop state of a
// fiber whose callable takes a stop token (none for the others: a
// std::stop_source allocates its state).
template <class R, bool Stoppable>
struct join_state_of;

// What the last reference does to a join_state_of: destroy the result (if
// any) and the state, and free its memory.
template <class R, bool Stoppable>
void drop_join_state(join_state* base) noexcept {
  using self_type = join_state_of<R, Stoppable>;
  auto* self = static_cast<self_type*>(base);
  if constexpr (!std::is_void_v<R> && !std::is_reference_v<R>) {
    if (self->has_value) self->value().~R();
  }
  self->~self_type();
  free_join_state(self, sizeof(self_type), alignof(self_type));
}

template <class R, bool Stoppable>
struct join_state_of final : join_result<R> {
  join_state_of() noexcept { this->destroy = &drop_join_state<R, Stoppable>; }
};
template <class R>
struct join_state_of<R, true> final : join_result<R> {
  std::stop_source source;
  join_state_of() noexcept {
    this->destroy = &drop_join_state<R, true>;
    this->stop = &source;
  }
};

// The frame of one spawned callable: the callable with its bound arguments,
// and where its result goes.
template <class R, class Fn, class... Args>
struct task final : task_base {
  static constexpr bool stoppable = takes_stop_token_v<Fn, Args...>;
  using state_type = join_state_of<R, stoppable>;
  using bound = std::tuple<Fn, Args...>;
  state_type* out;
  union {
    bound call;
  };

  template <class F, class... A>
  explicit task(state_type* s, F&& f, A&&... args) : out(s), call(std::forward<F>(f), std::forward<A>(args)...) {
    this->invoke = &task::run;
  }
  ~task() {}

  // The call, with the fiber's stop token first if the callable takes one.
  R call_once() {
    if constexpr (stoppable) {
      return std::apply(
          [this](auto&&... a) -> R { return invoke_first(out->source.get_token(), std::move(a)...); },
          std::move(call));
    } else {
      return std::apply([](auto&&... a) -> R { return std::invoke(std::move(a)...); }, std::move(call));
    }
  }
  template <class Fn2, class... A>
  static R invoke_first(std::stop_token token, Fn2&& fn, A&&... args) {
    return std::invoke(std::forward<Fn2>(fn), std::move(token), std::forward<A>(args)...);
  }

  static void run(task_base* base) noexcept {
    auto* self = static_cast<task*>(base);
    state_type* s = self->out;
    try {
      if constexpr (std::is_void_v<R>) {
        self->call_once();
      } else if constexpr (std::is_lvalue_reference_v<R>) {
        s->target = &self->call_once();
        s->has_value = true;
      } else {
        ::new (static_cast<void*>(s->storage)) R(self->call_once());
        s->has_value = true;
      }
    } catch (...) {
      s->error = std::current_exception();
    }
    self->call.~bound();
  }
};

template <class F, class... Args>
struct spawn_result {
  using type = std::invoke_result_t<std::decay_t<F>, std::decay_t<Args>...>;
};
template <class F, class... Args>
  requires takes_stop_token_v<std::decay_t<F>, std::decay_t<Args>...>
struct spawn_result<F, Args...> {
  using type = std::invoke_result_t<std::decay_t<F>, std::stop_token, std::decay_t<Args>...>;
};
template <class F, class... Args>
using spawn_result_t = typename spawn_result<F, Args...>::type;

// What try_join(), join_for() and join_until() return: the result if the
// fiber finished in time, nothing otherwise (for a void fiber: whether it
// finished; for a reference: a reference_wrapper).
template <class R>
struct timed_join {
  using type = std::optional<R>;
  static type of(R&& v) { return type(std::move(v)); }
};
template <class R>
struct timed_join<R&> {
  using type = std::optional<std::reference_wrapper<R>>;
  static type of(R& v) { return type(std::ref(v)); }
};
template <>
struct timed_join<void> {
  using type = bool;
};

}  // namespace detail

// join_handle<R> owns the right to collect a fiber's result. join() waits for
// it and returns the value or rethrows the exception; detach() gives the fiber
// up. A handle destroyed while still joinable detaches (like a Tokio
// JoinHandle, unlike std::jthread, whose destructor joins, and std::thread,
// whose destructor terminates). Move-only.
//
// A handle holds the fiber's join state, not the fiber: a finished fiber's
// stack is reused at once, and the state (the result, kept until collected)
// is freed when both the fiber and the handle are done with it. So a handle
// may outlive the fiber, its worker and its runtime: once the runtime is
// gone (its destructor waits for every fiber), done() is true and join()
// returns the result at once.
template <class R>
class join_handle {
 public:
  join_handle() noexcept = default;
  join_handle(join_handle&& o) noexcept : state_(std::exchange(o.state_, nullptr)) {}
  join_handle& operator=(join_handle&& o) noexcept {
    if (this != &o) {
      if (state_) detach();
      state_ = std::exchange(o.state_, nullptr);
    }
    return *this;
  }
  join_handle(const join_handle&) = delete;
  join_handle& operator=(const join_handle&) = delete;
  ~join_handle() {
    if (state_) detach();
  }

  bool joinable() const noexcept { return state_ != nullptr; }

  // True once the fiber has returned (join() will not block).
  bool done() const noexcept { return state_ && state_->done.load(std::memory_order_acquire); }

  fiber_id id() const noexcept { return fiber_id(state_ ? state_->id : 0); }

  // The result of try_join(), join_for(), join_until(): std::optional<R>
  // (std::optional<std::reference_wrapper<T>> for R = T&), bool for void.
  using timed_result = typename detail::timed_join<R>::type;

  // try_join() is join() if the fiber has finished, else it returns an
  // empty result at once and the handle stays joinable. join_for() and
  // join_until() wait for it at most until the time (any clock, as
  // condition_variable's waits); a fiber that threw rethrows here as from
  // join(). Require joinable().
  timed_result try_join() { return join_by(0); }
  template <class Rep, class Period>
  timed_result join_for(const std::chrono::duration<Rep, Period>& d) {
    return join_by(detail::deadline_after(d));
  }
  template <class Clock, class Duration>
  timed_result join_until(const std::chrono::time_point<Clock, Duration>& t) {
    return join_by(detail::deadline_at(t));
  }
  // join(stop) is join() that gives up once `stop` is requested (the
  // caller's token, not the joined fiber's): an empty result then.
  timed_result join(const std::stop_token& stop) { return join_by(detail::far_deadline_ns, stop); }

  // Cancellation, as std::jthread has it: a fiber whose callable takes a
  // std::stop_token first was given one; request_stop() asks it to stop
  // (true if this call made the request), get_stop_source() and
  // get_stop_token() share its stop state. For a fiber whose callable takes
  // no token there is no stop state: request_stop() is false and the
  // source is std::nostopstate. The request is a flag the fiber reads, and
  // every blocking wait of the task API has an overload that takes the
  // token and returns when stop is requested (docs/api.md).
  bool request_stop() noexcept { return state_ && state_->stop && state_->stop->request_stop(); }
  std::stop_source get_stop_source() const noexcept {
    return state_ && state_->stop ? *state_->stop : std::stop_source(std::nostopstate);
  }
  std::stop_token get_stop_token() const noexcept {
    return state_ && state_->stop ? state_->stop->get_token() : std::stop_token();
  }

  // join() blocks the calling fiber (or OS thread) until the fiber returns,
  // then returns its result or rethrows its exception. Requires joinable().
  R join() {
    if (!state_) throw std::logic_error("usched::join_handle::join: not joinable");
    if (!state_->done.load(std::memory_order_acquire)) (void)detail::join_wait(state_, detail::far_deadline_ns);
    return collect();
  }

  // detach() lets the fiber run on unobserved. If it ends with an exception,
  // the runtime writes one line with the fiber id and the exception's what()
  // to stderr (whatever USCHED_LOG says) and calls std::abort().
  void detach() noexcept {
    if (!state_) return;
    detail::detach_join_state(std::exchange(state_, nullptr));
  }

 private:
  template <class F, class... Args>
  friend auto detail_spawn(detail::runtime_impl& rt, const spawn_options& opts, F&& f,
                           Args&&... args) -> join_handle<detail::spawn_result_t<F, Args...>>;
  explicit join_handle(detail::join_result<R>* s) noexcept : state_(s) {}

  // The result of a finished fiber; the handle lets its state go.
  R collect() {
    detail::join_result<R>* s = std::exchange(state_, nullptr);
    struct release_on_exit {
      detail::join_state* s;
      ~release_on_exit() { detail::release_join_state(s); }
    } guard{s};
    if (s->error) {
      // Move the exception out: the joiner alone owns it from here, so it is
      // destroyed on the joining thread, not by whichever thread drops the
      // state's last reference.
      std::exception_ptr e = std::move(s->error);
      std::rethrow_exception(std::move(e));
    }
    if constexpr (std::is_void_v<R>) {
      return;
    } else if constexpr (std::is_lvalue_reference_v<R>) {
      return s->value();
    } else {
      return std::move(s->value());
    }
  }

  timed_result join_by(std::int64_t deadline_ns, const std::stop_token& stop = {}) {
    if (!state_) throw std::logic_error("usched::join_handle: not joinable");
    if (!state_->done.load(std::memory_order_acquire) && !detail::join_wait(state_, deadline_ns, stop)) {
      return timed_result{};
    }
    if constexpr (std::is_void_v<R>) {
      collect();
      return true;
    } else {
      return detail::timed_join<R>::of(collect());
    }
  }

  detail::join_result<R>* state_ = nullptr;
};

template <class F, class... Args>
auto detail_spawn(detail::runtime_impl& rt, const spawn_options& opts, F&& f, Args&&... args)
    -> join_handle<detail::spawn_result_t<F, Args...>> {
  using R = detail::spawn_result_t<F, Args...>;
  static_assert(!std::is_rvalue_reference_v<R>,
                "a spawned callable must return a value, an lvalue reference or void, not an rvalue reference");
  using frame = detail::task<R, std::decay_t<F>, std::decay_t<Args>...>;
  using state = typename frame::state_type;
  const detail::fiber_slot slot =
      detail::allocate_fiber(rt, sizeof(frame), alignof(frame), sizeof(state), alignof(state), opts);
  auto* s = ::new (slot.state) state();
  frame* t;
  try {
    t = ::new (slot.frame) frame(s, std::forward<F>(f), std::forward<Args>(args)...);
  } catch (...) {
    s->~state();
    detail::discard_fiber(rt, slot, sizeof(state), alignof(state));
    throw;
  }
  detail::start_fiber(rt, slot.f, t, s, opts);
  return join_handle<R>(s);
}

// spawn() starts `f(args...)` as a new fiber of the runtime the caller runs
// in, and returns its join handle. Must be called from a fiber; from any
// other thread use runtime::spawn. Throws std::logic_error outside a fiber.
template <class F, class... Args>
  requires(!std::is_same_v<std::decay_t<F>, spawn_options>)
auto spawn(F&& f, Args&&... args) {
  detail::runtime_impl* rt = detail::runtime_of_current_fiber();
  if (!rt) throw std::logic_error("usched::spawn called outside a fiber; use runtime::spawn");
  return detail_spawn(*rt, spawn_options{}, std::forward<F>(f), std::forward<Args>(args)...);
}

// spawn(opts, f, args...) is spawn() with per-fiber options (e.g. pinning).
template <class F, class... Args>
auto spawn(const spawn_options& opts, F&& f, Args&&... args) {
  detail::runtime_impl* rt = detail::runtime_of_current_fiber();
  if (!rt) throw std::logic_error("usched::spawn called outside a fiber; use runtime::spawn");
  return detail_spawn(*rt, opts, std::forward<F>(f), std::forward<Args>(args)...);
}

namespace this_fiber {

// yield() puts the calling fiber at the back of its worker's runqueue and runs
// the next one; it returns at once if there is none. Outside a fiber it is
// std::this_thread::yield().
void yield();

// sleep_until()/sleep_for() block the calling fiber until the time has come;
// its worker runs other fibers meanwhile. Outside a fiber they sleep the thread.
// A time already past (a negative duration, time_point::min()) returns at
// once; one beyond the end of the steady clock (seconds::max(),
// time_point::max()) sleeps forever. Time points of other clocks are taken
// as the time left until them, on that clock, when the call is made.
void sleep_until(std::chrono::steady_clock::time_point deadline);
template <class Clock, class Duration>
void sleep_until(const std::chrono::time_point<Clock, Duration>& deadline) {
  detail::sleep_until_deadline(detail::deadline_at(deadline));
}
template <class Rep, class Period>
void sleep_for(const std::chrono::duration<Rep, Period>& d) {
  detail::sleep_until_deadline(detail::deadline_after(d));
}
// sleep_until(t, stop)/sleep_for(d, stop) are the sleeps a stop request
// ends early (usched extension, as the other waits' stop_token forms):
// true when the time came, false when the request came first. A request
// made before the call returns false at once, even for a time already
// past. In a fiber the request wakes it at once (a wake-up of reason
// `stop`, where the time's is `timer`); a plain thread works the same.
template <class Clock, class Duration>
bool sleep_until(const std::chrono::time_point<Clock, Duration>& deadline, const std::stop_token& stop) {
  return detail::sleep_until_deadline(detail::deadline_at(deadline), stop);
}
template <class Rep, class Period>
bool sleep_for(const std::chrono::duration<Rep, Period>& d, const std::stop_token& stop) {
  return detail::sleep_until_deadline(detail::deadline_after(d), stop);
}

// get_id() names the calling fiber; fiber_id{} outside a fiber.
fiber_id get_id() noexcept;

// worker_index() is the index of the worker running the calling fiber, -1
// outside a fiber. A fiber may move between workers at any switch.
int worker_index() noexcept;

// preempt_point() yields if the calling fiber has used up its slice
// (options::slice) and costs a counter read otherwise. The runtime is
// cooperative: long CPU loops call this to stay fair.
void preempt_point() noexcept;

}  // namespace this_fiber
}  // namespace usched
