// overflow.cpp
#include "overflow.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <mutex>

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

// The one-line report, then the end: "usched: fiber N overflowed its K KiB
// stack (<what> 0x...); raise ...". Async-signal-safe.
[[noreturn]] void die_of_overflow(const fiber* f, std::size_t stack_kib, const char* what, std::uintptr_t at) {
  char buf[256];
  char* p = buf;
  p = put_str(p, "usched: fiber ");
  p = put_dec(p, f->id.load(std::memory_order_relaxed));
  p = put_str(p, " overflowed its ");
  p = put_dec(p, stack_kib);
  p = put_str(p, " KiB stack (");
  p = put_str(p, what);
  p = put_hex(p, at);
  p = put_str(p, "); raise USCHED_STACK_KB or options::stack_size\n");
  ssize_t ignored = write(STDERR_FILENO, buf, static_cast<std::size_t>(p - buf));
  (void)ignored;
  signal(SIGABRT, SIG_DFL);
  abort();
}

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

void on_fault(int sig, siginfo_t* info, void* uctx) {
  worker* w = worker_of_this_thread();
  fiber* f = w ? w->current_fiber() : nullptr;
  if (f && f->block) {
    const std::size_t kib = w->rt().config().stack_size / 1024;
    const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
    const auto page = static_cast<std::uintptr_t>(w->rt().pool().page_size());
    const auto guard = reinterpret_cast<std::uintptr_t>(f->block);
    if (f->guarded) {
      // A frame may step over part of the guard page before touching
      // memory, so accept a fault anywhere from one page below the guard to
      // its end.
      if (addr + page >= guard && addr < guard + page) die_of_overflow(f, kib, "fault at ", addr);
    } else {
      // No guard page: the overflow ran on through the blocks below until
      // something faulted; the stack pointer says whose stack it was.
      const std::uintptr_t sp = stack_pointer_of(uctx);
      const auto bottom = reinterpret_cast<std::uintptr_t>(f->ctx.stack_bottom);
      if (sp != 0 && sp < bottom) die_of_overflow(f, kib, "no guard page; stack pointer at ", sp);
    }
  }
  chain(sig, info, uctx);
}

}  // namespace

void check_stack_canary(const fiber* f, std::size_t stack_kib) noexcept {
  if (stack_pool::canary_intact(f)) [[likely]] return;
  die_of_overflow(f, stack_kib, "no guard page; its canary overwritten below ",
                  reinterpret_cast<std::uintptr_t>(f->ctx.stack_bottom));
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
}

alt_signal_stack::~alt_signal_stack() {
  if (!mem_) return;
  stack_t ss{};
  ss.ss_flags = SS_DISABLE;
  sigaltstack(&ss, nullptr);
  munmap(mem_, size_);
}

}  // namespace usched::detail
