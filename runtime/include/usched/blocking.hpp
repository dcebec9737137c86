// usched/blocking.hpp: running a blocking call without blocking a worker.
#pragma once

#include <exception>
#include <functional>
#include <new>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include <usched/detail/core.hpp>

namespace usched {

// blocking(f, args...) runs f(args...) on one of the runtime's blocking
// threads (a bounded pool of OS threads beside the workers:
// options::blocking_threads, USCHED_BLOCKING_THREADS) while the calling
// fiber waits, and returns its result or rethrows its exception. A call that
// blocks in the kernel (a read(), a database client, a DNS lookup) then
// stalls only its caller: the worker runs other fibers meanwhile. marl's
// blocking_call and Tokio's spawn_blocking do the same.
//
// f runs as its caller: a fiber_local it reads is the calling fiber's,
// and one it makes first belongs to that fiber (destroyed when the fiber
// returns), not to the pool thread, which serves other fibers next.
//
// Calls run in the order they were made; the pool grows to its bound as
// calls need threads, and past it a call waits for a free one. Outside a
// fiber (a plain thread) f runs right there: the thread is already one the
// kernel may block. f must not wait for a fiber (a usched primitive would
// block the pool thread in the kernel, which works, but holds a pool thread
// for it). It cannot be cancelled once running: a stop request cannot
// interrupt the kernel call.
template <class F, class... Args>
std::invoke_result_t<F, Args...> blocking(F&& f, Args&&... args) {
  using R = std::invoke_result_t<F, Args...>;
  static_assert(!std::is_rvalue_reference_v<R>,
                "usched::blocking: the call must return a value, an lvalue reference or void");
  detail::runtime_impl* rt = detail::runtime_of_current_fiber();
  if (!rt) return std::invoke(std::forward<F>(f), std::forward<Args>(args)...);

  // The call's frame, on this fiber's stack: the callable and its
  // arguments by reference (the fiber waits until the call is over), and
  // the result.
  struct job : detail::blocking_job {
    std::tuple<F&&, Args&&...> call;
    std::exception_ptr error;
    std::conditional_t<std::is_void_v<R>, char, std::conditional_t<std::is_reference_v<R>,
                                                                   std::add_pointer_t<std::remove_reference_t<R>>,
                                                                   std::optional<R>>>
        result{};
    explicit job(F&& fn, Args&&... a) : call(std::forward<F>(fn), std::forward<Args>(a)...) {
      run = [](detail::blocking_job* base) noexcept {
        auto* self = static_cast<job*>(base);
        try {
          if constexpr (std::is_void_v<R>) {
            std::apply([](auto&&... c) { std::invoke(std::forward<decltype(c)>(c)...); }, std::move(self->call));
          } else if constexpr (std::is_reference_v<R>) {
            self->result = &std::apply([](auto&&... c) -> R { return std::invoke(std::forward<decltype(c)>(c)...); },
                                       std::move(self->call));
          } else {
            self->result.emplace(std::apply(
                [](auto&&... c) -> R { return std::invoke(std::forward<decltype(c)>(c)...); }, std::move(self->call)));
          }
        } catch (...) {
          self->error = std::current_exception();
        }
      };
    }
  } j(std::forward<F>(f), std::forward<Args>(args)...);
  detail::run_blocking(*rt, j);
  if (j.error) std::rethrow_exception(j.error);
  if constexpr (std::is_void_v<R>) {
    return;
  } else if constexpr (std::is_reference_v<R>) {
    return static_cast<R>(*j.result);
  } else {
    return std::move(*j.result);
  }
}

}  // namespace usched
