// overflow.cpp
#include "overflow.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <mutex>

#include "fatal.hpp"
#include "runtime_impl.hpp"
#include "stack_pool.hpp"

namespace usched::detail {
namespace {

struct sigaction previous_segv;
struct sigaction previous_bus;

// Room for the handler itself; the handler formats with stack buffers only.
constexpr std::size_t alt_stack_bytes = 64 * 1024;

// Async-signal-safe formatting: append a decimal or hex number.
char* put_str(char* p, const char* s) {
  while (*s) *p++ = *s++;
  return p;
}
char* put_dec(char* p, std::uint64_t v) {
  char tmp[24];
  int n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v);
  while (n) *p++ = tmp[--n];
  return p;
}
char* put_hex(char* p, std::uintptr_t v) {
  static const char digits[] = "0123456789abcdef";
  p = put_str(p, "0x");
  char tmp[20];
  int n = 0;
  do {
    tmp[n++] = digits[v & 0xf];
    v >>= 4;
  } while (v);
  while (n) *p++ = tmp[--n];
  return p;
}

void chain(int sig, siginfo_t* info, void* uctx) {
  const struct sigaction& prev = sig == SIGBUS ? previous_bus : previous_segv;
  if (prev.sa_flags & SA_SIGINFO) {
    if (prev.sa_sigaction) {
      prev.sa_sigaction(sig, info, uctx);
      return;
    }
  } else if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN) {
    prev.sa_handler(sig);
    return;
  }
  // Default action: restore it and return; the faulting instruction runs
  // again and the kernel ends the process with the original signal.
  signal(sig, SIG_DFL);
}

// The one-line report, then the end: "usched: fiber N ("label") overflowed
// its K KiB stack (<what>); raise ...", where <what> says which of the
// guards caught it and where. Async-signal-safe: every part is formatted
// into one buffer on the alternate signal stack and written with one
// write().
class overflow_report {
 public:
  overflow_report(const fiber* f, std::size_t stack_kib) noexcept : rt_(f->rt) {
    p_ = put_str(p_, "usched: fiber ");
    p_ = put_fiber_name(p_, buf_ + label_room, f);
    p_ = put_str(p_, " overflowed its ");
    p_ = put_dec(p_, stack_kib);
    p_ = put_str(p_, " KiB stack (");
  }
  overflow_report& str(const char* s) noexcept {
    p_ = put_str(p_, s);
    return *this;
  }
  overflow_report& dec(std::uint64_t v) noexcept {
    p_ = put_dec(p_, v);
    return *this;
  }
  overflow_report& hex(std::uintptr_t v) noexcept {
    p_ = put_hex(p_, v);
    return *this;
  }
  [[noreturn]] void die() noexcept {
    p_ = put_str(p_, "); raise USCHED_STACK_KB or options::stack_size\n");
    ssize_t ignored = write(STDERR_FILENO, buf_, static_cast<std::size_t>(p_ - buf_));
    (void)ignored;
    // Its runtime's trace, raw: nothing else can be written from here.
    if (rt_) rt_->dump_raw_in_signal();
    signal(SIGABRT, SIG_DFL);
    abort();
  }

 private:
  // The id and the label end within label_room bytes (a longer label is cut
  // short); the rest of the line, numbers and fixed words, fits the other
  // 256.
  static constexpr std::size_t label_room = 256;
  const runtime_impl* rt_;
  char buf_[label_room + 256];
  char* p_ = buf_;
};

// The stack pointer at the fault, from the signal's context.
std::uintptr_t stack_pointer_of(void* uctx) noexcept {
  const auto* uc = static_cast<const ucontext_t*>(uctx);
#if defined(__x86_64__)
  return static_cast<std::uintptr_t>(uc->uc_mcontext.gregs[REG_RSP]);
#elif defined(__aarch64__)
  return static_cast<std::uintptr_t>(uc->uc_mcontext.sp);
#else
  (void)uc;
  return 0;
#endif
}

// The stacks of the calling thread that are not a fiber's: the thread's own
// (a worker's scheduling loop and idle context run on it) and the
// alternate signal stack, set by alt_signal_stack for a worker's thread.
// Plain values in initial-exec TLS: the handler reads them as it reads the
// worker pointer.
struct thread_stacks {
  std::uintptr_t own_lo = 0, own_hi = 0;
  std::uintptr_t alt_lo = 0, alt_hi = 0;
  bool holds(std::uintptr_t sp) const noexcept {
    return (sp >= own_lo && sp < own_hi) || (sp >= alt_lo && sp < alt_hi);
  }
};
thread_local thread_stacks this_thread_stacks;

// on_fault() decides whether a SIGSEGV or SIGBUS is the running fiber's
// stack overflow. Every case, and why it is (or is not) one:
//
//  - Not a worker thread, or a worker with no fiber running (its own loop,
//    idle): not a fiber's fault, whatever the addresses. A plain thread's
//    stack may well lie below some fiber's block; it is never compared.
//  - The fault address in the fiber's guard page, or in the page below it
//    (a frame may step over part of the guard before its first touch): the
//    guard caught it, a guard region or a PROT_NONE page alike.
//  - The stack pointer below the fiber's stack: a frame moved it there,
//    past the guard page (a frame bigger than a page, entered without
//    stack-clash probes, or any frame of a stack that has only a canary).
//    Whatever faulted next (the neighbouring block's guard page, memory
//    below the slab) faulted because the fiber ran off its stack: it is the
//    overflow, reported with the stack pointer and the fault address. The
//    stack pointer inside the neighbouring fiber's block is this case too:
//    it is the overflowing fiber that runs there, not the neighbour, which
//    is not running (a block's stack is used only by its own fiber).
//  - The stack pointer below the stack but inside this thread's own stack
//    or its alternate signal stack: the worker was switching (the current
//    fiber is set before the switch lands on its stack), or a handler of
//    the application's runs on the alternate stack. Not an overflow.
//  - The stack pointer inside the fiber's stack, or above it: an ordinary
//    fault (a null pointer, a use after free) of code running normally.
// Anything that is not an overflow goes on to the handler installed before
// ours, or to the default action.
void on_fault(int sig, siginfo_t* info, void* uctx) {
  worker* w = worker_of_this_thread();
  fiber* f = w ? w->current_fiber() : nullptr;
  if (f && f->block) {
    const std::size_t kib = w->rt().config().stack_size / 1024;
    const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
    const auto page = static_cast<std::uintptr_t>(w->rt().pool().page_size());
    const auto guard = reinterpret_cast<std::uintptr_t>(f->block);
    if (f->guarded && addr + page >= guard && addr < guard + page) {
      overflow_report(f, kib).str("fault at ").hex(addr).die();
    }
    const std::uintptr_t sp = stack_pointer_of(uctx);
    const auto bottom = reinterpret_cast<std::uintptr_t>(f->ctx.stack_bottom);
    if (sp != 0 && sp < bottom && !this_thread_stacks.holds(sp)) {
      overflow_report r(f, kib);
      if (!f->guarded) r.str("no guard page; ");
      r.str("stack pointer at ").hex(sp).str(", ").dec((bottom - sp + 1023) / 1024).str(" KiB below it");
      r.str("; fault at ").hex(addr).die();
    }
  }
  chain(sig, info, uctx);
}

}  // namespace

void check_stack_canary(const fiber* f, std::size_t stack_kib) noexcept {
  if (stack_pool::canary_intact(f)) [[likely]] return;
  overflow_report(f, stack_kib)
      .str("no guard page; its canary overwritten below ")
      .hex(reinterpret_cast<std::uintptr_t>(f->ctx.stack_bottom))
      .die();
}

void install_overflow_handler() noexcept {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = &on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &previous_segv);
    sigaction(SIGBUS, &sa, &previous_bus);
  });
}

alt_signal_stack::alt_signal_stack() noexcept {
  thread_stacks& mine = this_thread_stacks;
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    void* lo = nullptr;
    std::size_t size = 0;
    if (pthread_attr_getstack(&attr, &lo, &size) == 0) {
      mine.own_lo = reinterpret_cast<std::uintptr_t>(lo);
      mine.own_hi = mine.own_lo + size;
    }
    pthread_attr_destroy(&attr);
  }
  void* p = mmap(nullptr, alt_stack_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
  if (p == MAP_FAILED) return;
  stack_t ss{};
  ss.ss_sp = p;
  ss.ss_size = alt_stack_bytes;
  if (sigaltstack(&ss, nullptr) != 0) {
    munmap(p, alt_stack_bytes);
    return;
  }
  mem_ = p;
  size_ = alt_stack_bytes;
  mine.alt_lo = reinterpret_cast<std::uintptr_t>(p);
  mine.alt_hi = mine.alt_lo + alt_stack_bytes;
}

alt_signal_stack::~alt_signal_stack() {
  this_thread_stacks = {};
  if (!mem_) return;
  stack_t ss{};
  ss.ss_flags = SS_DISABLE;
  sigaltstack(&ss, nullptr);
  munmap(mem_, size_);
}

}  // namespace usched::detail
