// overflow.hpp: turning a fiber stack overflow into a clear death.
//
// A fiber's stack has a guard page below it (a guard region or a PROT_NONE
// page, stack_pool.hpp). Running into it raises SIGSEGV on a stack that is,
// by definition, full, so the handler runs on a per-worker alternate signal
// stack. The handler (on_fault in overflow.cpp, which lists every case)
// takes a fault of the running fiber for its overflow when the fault
// address is in the fiber's guard page, or when the fiber's stack pointer
// is below its stack (outside the worker thread's own stacks): it writes
// one line naming the fiber (its id and label) and its stack size and ends
// the process. Any other fault, and every fault of a thread that is not a
// worker, goes to whatever handler was installed before ours (or the
// default action). A stack without a guard page has a canary instead,
// which check_stack_canary() verifies.
//
// The guard is one page (4 KiB). A frame that skips more than that before its
// first access (a big local array written at its low end, an alloca) jumps
// over it: code built with -fstack-clash-protection (the library and its own
// programs are, see the top-level CMakeLists.txt) touches each page as its
// frame grows, so its first touch past the stack is in the guard; code built
// without moves the stack pointer below the stack in one step, and its first
// fault there (the neighbouring block's guard page, memory below the slab)
// is recognised by that stack pointer. A jump that lands on mapped memory
// and faults nowhere (the neighbour's stack, written over) is seen only if
// it overwrites a canary, or not at all.
#pragma once

#include <cstddef>

namespace usched::detail {

// install_overflow_handler() installs the SIGSEGV/SIGBUS handler once per
// process (signal dispositions are process-wide); later calls do nothing.
void install_overflow_handler() noexcept;

struct fiber;

// check_stack_canary() ends the process with the one-line overflow report
// if `f` has no guard page and its canary was overwritten; `stack_kib` is
// the stack size the report names. Called for the running fiber at the
// tick and when a fiber exits.
void check_stack_canary(const fiber* f, std::size_t stack_kib) noexcept;

// alt_signal_stack gives the calling thread an alternate signal stack for its
// lifetime (workers create one first thing), and tells the fault handler
// where that stack and the thread's own are: a stack pointer in either is
// not a fiber's, whatever fiber the worker is about to run.
class alt_signal_stack {
 public:
  alt_signal_stack() noexcept;
  ~alt_signal_stack();
  alt_signal_stack(const alt_signal_stack&) = delete;
  alt_signal_stack& operator=(const alt_signal_stack&) = delete;

 private:
  void* mem_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace usched::detail
