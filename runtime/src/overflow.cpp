// overflow.cpp
#include "overflow.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <mutex>

#include "runtime_impl.hpp"

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

void on_fault(int sig, siginfo_t* info, void* uctx) {
  worker* w = worker_of_this_thread();
  fiber* f = w ? w->current_fiber() : nullptr;
  if (f && f->block && f->guarded) {
    const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
    const auto page = static_cast<std::uintptr_t>(w->rt().pool().page_size());
    const auto guard = reinterpret_cast<std::uintptr_t>(f->block);
    // A frame may step over part of the guard page before touching memory,
    // so accept a fault anywhere from one page below the guard to its end.
    if (addr + page >= guard && addr < guard + page) {
      char buf[256];
      char* p = buf;
      p = put_str(p, "usched: fiber ");
      p = put_dec(p, f->id.load(std::memory_order_relaxed));
      p = put_str(p, " overflowed its ");
      p = put_dec(p, w->rt().config().stack_size / 1024);
      p = put_str(p, " KiB stack (fault at ");
      p = put_hex(p, addr);
      p = put_str(p, "); raise USCHED_STACK_KB or options::stack_size\n");
      ssize_t ignored = write(STDERR_FILENO, buf, static_cast<std::size_t>(p - buf));
      (void)ignored;
      signal(SIGABRT, SIG_DFL);
      abort();
    }
  }
  chain(sig, info, uctx);
}

}  // namespace

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
