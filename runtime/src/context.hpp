// context.hpp: one execution context switch, annotated for the sanitizers.
//
// Every switch between fibers (or between a fiber and a worker's own stack)
// goes through jump(). ASan must be told which stack is about to become
// current (__sanitizer_start_switch_fiber / __sanitizer_finish_switch_fiber)
// or it reports the new stack's frames as stack-buffer overflows; TSan must be
// told which logical thread continues (__tsan_switch_to_fiber) or it mixes the
// histories of every fiber a worker runs. With the annotations in one place,
// no switch can miss them.
#pragma once

#include <boost/context/detail/fcontext.hpp>
#include <cstddef>

#if defined(__SANITIZE_ADDRESS__)
#define USCHED_ASAN 1
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(__SANITIZE_THREAD__)
#define USCHED_TSAN 1
#include <sanitizer/tsan_interface.h>
#endif

namespace usched::detail {

namespace bctx = boost::context::detail;

// A stack a context runs on, and its sanitizer bookkeeping.
struct exec_context {
  bctx::fcontext_t fctx = nullptr;   // where the context was suspended
  const void* stack_bottom = nullptr;  // lowest usable address (ASan)
  std::size_t stack_size = 0;          // usable bytes (ASan)
  void* asan_fake_stack = nullptr;     // ASan's fake-stack handle while suspended
  void* tsan_fiber = nullptr;          // TSan's logical thread of this context

  // The top of the stack: where a context's first frame is made.
  void* stack_top() const noexcept {
    return static_cast<char*>(const_cast<void*>(stack_bottom)) + stack_size;
  }
};

// jump() suspends `from` and resumes `to`, handing it `data`. It returns when
// something resumes `from`, with the suspended context of whoever did and the
// data it passed. `from_exits` says `from` will never be resumed, so ASan can
// drop its fake stack.
inline bctx::transfer_t jump(exec_context& from, exec_context& to, void* data,
                             bool from_exits) noexcept {
#if USCHED_ASAN
  __sanitizer_start_switch_fiber(from_exits ? nullptr : &from.asan_fake_stack, to.stack_bottom,
                                 to.stack_size);
#else
  (void)from;
  (void)from_exits;
#endif
#if USCHED_TSAN
  __tsan_switch_to_fiber(to.tsan_fiber, 0);
#endif
  bctx::transfer_t t = bctx::jump_fcontext(to.fctx, data);
#if USCHED_ASAN
  __sanitizer_finish_switch_fiber(from.asan_fake_stack, nullptr, nullptr);
#endif
  return t;
}

// entered() completes the switch into a context that starts for the first
// time (its entry function calls it before anything else).
inline void entered() noexcept {
#if USCHED_ASAN
  __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
}

// Create / destroy TSan's logical thread for a fiber (no-ops otherwise).
inline void* sanitizer_create_fiber() noexcept {
#if USCHED_TSAN
  return __tsan_create_fiber(0);
#else
  return nullptr;
#endif
}
inline void sanitizer_destroy_fiber(void* tsan_fiber) noexcept {
#if USCHED_TSAN
  if (tsan_fiber) __tsan_destroy_fiber(tsan_fiber);
#else
  (void)tsan_fiber;
#endif
}
// A pooled stack is reused by the next fiber. The frames its last fiber
// never returned from (it left for good from inside them) keep their ASan
// redzones poisoned; clear them before the stack runs anything new, or the
// new fiber's locals are reported as overflows.
inline void sanitizer_unpoison_stack(const void* bottom, std::size_t size) noexcept {
#if USCHED_ASAN
  __asan_unpoison_memory_region(bottom, size);
#else
  (void)bottom;
  (void)size;
#endif
}

// The logical thread of the calling OS thread (a worker's own context).
inline void* sanitizer_current_fiber() noexcept {
#if USCHED_TSAN
  return __tsan_get_current_fiber();
#else
  return nullptr;
#endif
}

}  // namespace usched::detail
