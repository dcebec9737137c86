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
#include <cfenv>
#include <cstddef>
#include <cstdint>
#include <cstring>

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

// The floating-point control state: on x86-64 the SSE control and status
// register and the x87 control word (rounding, precision, exception masks,
// flush-to-zero and denormals-are-zero), elsewhere the rounding mode.
//
// jump_fcontext() keeps each context's state (it saves and restores it with
// the registers), but make_fcontext() gives a new context the state current
// when it is made, and a fiber's first frame is made by the worker that first
// runs it, inside whatever fiber ran there before (worker::switch_to). A
// fiber that changed its rounding mode or set flush-to-zero and then exited
// would hand that state to the next new fiber its worker started. Instead
// every fiber starts with the state of the thread that created the runtime
// (runtime_impl::initial_fp), as tasks of a TBB arena start with the state
// captured when the arena was made; what a fiber changes stays with it.
struct fp_control {
#if defined(__x86_64__)
  std::uint32_t mxcsr = 0x1f80;  // the x86-64 ABI's initial values
  std::uint16_t x87_cw = 0x037f;

  // Reading MXCSR waits for the floating-point work in flight (about 8 ns
  // here), so the switch path never reads it: a new fiber's state is
  // written into its first frame instead (set_first_frame_fp).
  static fp_control current() noexcept {
    fp_control c;
    c.mxcsr = __builtin_ia32_stmxcsr();
    asm volatile("fnstcw %0" : "=m"(c.x87_cw));
    return c;
  }
  void load() const noexcept {
    __builtin_ia32_ldmxcsr(mxcsr);
    asm volatile("fldcw %0" : : "m"(x87_cw));
  }
#else
  int rounding = FE_TONEAREST;

  static fp_control current() noexcept { return fp_control{std::fegetround()}; }
  void load() const noexcept { std::fesetround(rounding); }
#endif
};

// Where make_fcontext() keeps the state a new context starts with. Boost's
// x86-64 System V frame starts with MXCSR (4 bytes) and the x87 control word
// (2 bytes), which jump_fcontext() loads when it first resumes the context.
// That layout is Boost's, not a documented interface, so it is checked once
// (fp_in_first_frame) before anything relies on it; where the check fails,
// and off x86-64, the fiber's entry loads the state itself.
inline void set_first_frame_fp(bctx::fcontext_t frame, const fp_control& fp) noexcept {
#if defined(__x86_64__)
  std::memcpy(static_cast<char*>(static_cast<void*>(frame)), &fp.mxcsr, sizeof fp.mxcsr);
  std::memcpy(static_cast<char*>(static_cast<void*>(frame)) + 4, &fp.x87_cw, sizeof fp.x87_cw);
#else
  (void)frame;
  (void)fp;
#endif
}

// True if make_fcontext() stores the current state where set_first_frame_fp()
// writes it: a frame made on a scratch area under a distinctive state must
// carry that state there. Asked once per runtime (runtime_impl::fp_in_frame).
bool fp_in_first_frame() noexcept;

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

// switch_fcontext() is bctx::jump_fcontext(), called so that the return-
// address predictor stays in step.
//
// Boost.Context's x86-64 switch is entered by a call, which pushes an entry on
// the CPU's return stack buffer, but it leaves by an indirect jump to the
// resumed context's saved address, which pops nothing. Each switch so leaves
// one stale entry on top of the buffer, and the next `ret` executed (the
// return out of the switching function, in the context just resumed) is
// predicted to go to that stale address and mispredicts. On the 2-vCPU EPYC
// the benchmarks run on, two fibers swapping through a non-inlined function
// take 18 ns a switch against 9.4 ns when the call is balanced: the
// misprediction was half of every switch.
//
// The balanced form pushes the return address by hand and jumps, so nothing is
// pushed on the buffer and the next `ret` pops the right entry. It is the same
// call as far as the ABI is concerned: jump_fcontext() saves and restores the
// callee-saved registers and the x87/SSE control words, and leaves with the
// stack pointer where the call left it, its address popped; everything else
// is listed as clobbered. The 128 bytes below the stack pointer are skipped
// first, since the compiler may keep values in that red zone. Under shadow
// stacks (-fcf-protection=return) a hand-pushed return address would not be
// on the shadow stack, so there, and off x86-64, it is an ordinary call.
#if defined(__x86_64__) && defined(__ELF__) && !(defined(__CET__) && (__CET__ & 2))
inline bctx::transfer_t switch_fcontext(bctx::fcontext_t to, void* data) noexcept {
  void* from;
  void* passed;
  asm volatile(
      "leaq -128(%%rsp), %%rsp\n\t"
      "leaq 1f(%%rip), %%rcx\n\t"
      "pushq %%rcx\n\t"
      "jmp jump_fcontext@PLT\n"
      "1:\n\t"
      "leaq 128(%%rsp), %%rsp"
      : "=a"(from), "=d"(passed), "+D"(to), "+S"(data)
      :
      : "rcx", "r8", "r9", "r10", "r11", "memory", "cc",  //
        "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",  //
        "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15",  //
        "st", "st(1)", "st(2)", "st(3)", "st(4)", "st(5)", "st(6)", "st(7)");
  return bctx::transfer_t{static_cast<bctx::fcontext_t>(from), passed};
}
#else
inline bctx::transfer_t switch_fcontext(bctx::fcontext_t to, void* data) noexcept {
  return bctx::jump_fcontext(to, data);
}
#endif

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
  bctx::transfer_t t = switch_fcontext(to.fctx, data);
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
