// usched/task_group.hpp: structured concurrency: fibers that cannot outlive
// the scope that started them.
#pragma once

#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <tuple>
#include <type_traits>
#include <utility>

#include <usched/detail/core.hpp>
#include <usched/detail/spinlock.hpp>
#include <usched/detail/wait.hpp>
#include <usched/fiber.hpp>
#include <usched/runtime.hpp>

namespace usched {

namespace detail {
// An exception a task of a task_group threw that no wait() rethrew, at the
// group's destruction: one line on stderr, then abort (as for a detached
// fiber's: an error nobody sees is not silently dropped).
[[noreturn]] void report_unobserved_group_exception(const std::exception_ptr& e) noexcept;
}  // namespace detail

// task_group runs fibers as one unit of work, as TBB's task_group and
// Trio's nursery do: spawn() starts a fiber in the group, wait() joins every
// fiber the group has started and rethrows the first exception any of them
// threw. The first exception also requests stop on the group's stop source,
// which every task whose callable takes a std::stop_token first was given:
// the others can give up early. The destructor waits too, so no fiber of
// the group outlives its scope; leaving the scope by an exception first
// requests stop.
//
// A task's exception that no wait() rethrew (the group was destroyed
// without a wait() after a task threw) ends the process with one line on
// stderr, as a detached fiber's does; while the scope is left by another
// exception it is dropped instead, that exception taking precedence.
//
// Results are not collected (spawn a fiber and join its handle for that);
// the group only counts its running fibers, so it may start any number of
// them in its life at constant memory.
class task_group {
 public:
  // The calling fiber's runtime (std::logic_error outside a fiber).
  task_group() : task_group(current_runtime()) {}
  // Usable from any thread.
  explicit task_group(runtime& rt) : rt_(&rt), unwinding_at_start_(std::uncaught_exceptions()) {}
  task_group(const task_group&) = delete;
  task_group& operator=(const task_group&) = delete;
  ~task_group() {
    const bool unwinding = std::uncaught_exceptions() > unwinding_at_start_;
    if (unwinding) stop_.request_stop();
    join_all();
    if (first_error_ && !unwinding) detail::report_unobserved_group_exception(first_error_);
  }

  // spawn() starts f(args...) (or f(token, args...) for a callable that
  // takes the group's std::stop_token first) as a fiber of the group.
  template <class F, class... Args>
    requires(!std::is_same_v<std::decay_t<F>, spawn_options>)
  void spawn(F&& f, Args&&... args) {
    spawn(spawn_options{}, std::forward<F>(f), std::forward<Args>(args)...);
  }
  template <class F, class... Args>
  void spawn(const spawn_options& opts, F&& f, Args&&... args) {
    using Fn = std::decay_t<F>;
    {
      std::lock_guard<detail::spinlock> g(lock_);
      ++running_;
    }
    using Bound = std::tuple<std::decay_t<Args>...>;
    try {
      rt_->spawn(opts, [this, fn = std::optional<Fn>(std::in_place, std::forward<F>(f)),
                        bound = std::optional<Bound>(std::in_place, std::forward<Args>(args)...)]() mutable noexcept {
        try {
          if constexpr (detail::takes_stop_token_v<Fn, std::decay_t<Args>...>) {
            std::apply([&](auto&... a) { std::invoke(*fn, stop_.get_token(), std::move(a)...); }, *bound);
          } else {
            std::apply([&](auto&... a) { std::invoke(*fn, std::move(a)...); }, *bound);
          }
        } catch (...) {
          fail(std::current_exception());
        }
        // Everything of the task ends before the group learns it is over:
        // its callable and arguments (whose destructors may use what the
        // group's scope owns) and its fiber_local values. The fiber's own
        // return, after finish(), then has nothing of the user's left.
        fn.reset();
        bound.reset();
        detail::clear_fiber_locals();
        finish();
      }).detach();
    } catch (...) {
      finish();  // it never started
      throw;
    }
  }

  // wait() blocks until every fiber the group has started has returned,
  // then rethrows the first exception one of them threw (once: a later
  // wait() of the same group does not see it again). The group may be
  // used again after it.
  void wait() {
    join_all();
    if (std::exception_ptr e = std::exchange(first_error_, nullptr)) std::rethrow_exception(e);
  }

  // The group's stop state: requested by the first exception, by the
  // destructor on unwinding, or here.
  bool request_stop() noexcept { return stop_.request_stop(); }
  std::stop_token get_stop_token() const noexcept { return stop_.get_token(); }
  bool stop_requested() const noexcept { return stop_.stop_requested(); }

 private:
  static runtime& current_runtime() {
    runtime* rt = runtime::current();
    if (!rt) throw std::logic_error("usched::task_group() constructed outside a fiber; use task_group(rt)");
    return *rt;
  }
  void fail(std::exception_ptr e) noexcept {
    bool first = false;
    {
      std::lock_guard<detail::spinlock> g(lock_);
      if (!first_error_) {
        first_error_ = std::move(e);
        first = true;
      }
    }
    if (first) stop_.request_stop();
  }
  // The last thing a task does with the group: once it lets go of lock_,
  // the group may be gone.
  void finish() noexcept {
    std::lock_guard<detail::spinlock> g(lock_);
    if (--running_ == 0) detail::notify_all(waiters_);
  }
  void join_all() {
    lock_.lock();
    while (running_ > 0) {
      detail::waiter w;
      (void)detail::wait_in(lock_, waiters_, w, detail::wait_kind::task_group, this, detail::no_deadline);
      // The last finish() woke us under lock_; holding it again means that
      // task has let go of the group.
      lock_.lock();
    }
    lock_.unlock();
  }

  runtime* rt_;
  const int unwinding_at_start_;
  std::stop_source stop_;
  detail::spinlock lock_;       // guards running_, first_error_, waiters_
  std::size_t running_ = 0;
  std::exception_ptr first_error_;
  detail::wait_list waiters_;
};

}  // namespace usched
