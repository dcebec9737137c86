// stack_pool.hpp: fibers with their stacks, mmap'd in slabs, guarded, pooled.
//
// A fiber's control block lives at the top of its own block, above the
// stack, together with room for a small task frame: taking a fiber from the
// pool allocates nothing. Blocks are mapped a slab at a time (one mmap for
// several fibers) and only unmapped when the pool is destroyed, after every
// worker has stopped: whole slabs at once, adjacent slabs in one munmap.
//
// Guard pages. The lowest page of each block guards the stack above it: a
// fiber that runs off the end of its stack faults there, and the fault
// handler (overflow.cpp) names the fiber. Three ways, best first:
//
//  - Guard regions (Linux 6.13+, madvise MADV_GUARD_INSTALL): the page
//    faults on any access without a mapping of its own, so every stack is
//    guarded, however many are alive, for one madvise call per stack.
//  - mprotect(PROT_NONE): a protection boundary splits the mapping, so a
//    guarded stack costs the process two VMAs, and the kernel refuses
//    mappings past vm.max_map_count (65530 by default), which would cap a
//    process at ~32k live fibers. The pool guards stacks this way up to a
//    budget of a quarter of that limit (leaving the rest to malloc,
//    libraries and the application), as folly's GuardPageAllocator does.
//  - Past the budget, a canary: the top of the would-be guard page holds a
//    pattern that an overflow overwrites on its way down. It is checked at
//    the worker's tick for the running fiber and when a fiber exits, and
//    the fault handler also recognizes a stack pointer below the stack. An
//    overflow is then found after the fact, not at the faulting write, and
//    one that jumps over the canary or past the page into the neighbouring
//    block is found only if it faults later. The log says once when stacks
//    start going without a guard page.
//
// options::guard_pages = mprotect skips guard regions (the fallback of
// older kernels, for comparing them).
#pragma once

#include <atomic>
#include <cstddef>
#include <vector>

#include "fiber_impl.hpp"
#include <usched/detail/spinlock.hpp>

namespace usched::detail {

class stack_pool {
 public:
  // Task frames up to this size live in the fiber's mapping; larger ones are
  // allocated on the heap. Most closures capture a few pointers.
  static constexpr std::size_t inline_frame_bytes = 512;

  // How stacks are guarded (see above).
  enum class guard_method : unsigned char {
    automatic,  // guard regions where the kernel has them, else mprotect within the budget
    mprotect,   // mprotect within the budget, canaries past it
  };

  // `guard_budget`: how many stacks get an mprotect guard page; by default
  // a quarter of vm.max_map_count, two VMAs per guarded stack (see above).
  // Guard regions need no budget.
  explicit stack_pool(std::size_t stack_size, std::size_t guard_budget = default_guard_budget(),
                      guard_method method = guard_method::automatic);
  static std::size_t default_guard_budget();
  // Whether this kernel has guard regions (asked once per process).
  static bool kernel_has_guard_regions() noexcept;
  // Whether this pool guards with them.
  bool guard_regions() const noexcept { return regions_.load(std::memory_order_relaxed); }

  // The canary of an unguarded stack: intact, or overwritten from below by
  // an overflow. True for a guarded stack (it has none). Reads the top line
  // of the block's lowest page.
  static bool canary_intact(const fiber* f) noexcept;
  ~stack_pool();
  stack_pool(const stack_pool&) = delete;
  stack_pool& operator=(const stack_pool&) = delete;

  // take() returns a pooled fiber or maps a new one. Any thread; takes the
  // pool's lock. Throws std::bad_alloc when the kernel refuses a mapping.
  fiber* take();
  // take(out, max) takes up to `max` fibers (at least one) under one
  // acquisition of the lock, for a worker's cache; returns how many.
  std::size_t take(fiber** out, std::size_t max);
  // give() returns fibers to the pool. Any thread; takes the pool's lock.
  void give(fiber* const* list, std::size_t n);

  std::size_t stack_size() const noexcept { return stack_size_; }
  std::size_t page_size() const noexcept { return page_; }
  // Stacks mapped so far, and how many of them have a guard page (region or
  // mprotect).
  std::size_t mapped() const;
  std::size_t guarded() const;
  // Every fiber mapped so far, pooled or live, in no particular order. The
  // pointers stay valid until the pool is destroyed (blocks are never
  // unmapped before). Takes the pool's lock; for diagnostics, not hot paths.
  std::vector<fiber*> all_fibers() const;
  // The pool's books, marl's tracked allocator applied to fibers: each block
  // is one fiber's control block and its stack, so a block counts for both.
  // Once every fiber has been recycled and every worker has returned its
  // cache (after the runtime stops its workers), `handed_out == returned`
  // and `pooled == mapped`; a fiber that is never recycled shows as one
  // more handed out than returned. Counted under the pool's lock, which
  // every take and give already holds.
  struct ledger {
    std::size_t mapped = 0;      // blocks mapped so far
    std::size_t pooled = 0;      // ... of them in the pool now
    std::size_t handed_out = 0;  // blocks take() handed out, in all
    std::size_t returned = 0;    // blocks give() took back, in all
  };
  // books() reads the ledger. Takes the pool's lock; for diagnostics.
  ledger books() const;
  // True once, the first time it is asked after the guard budget ran out.
  // Costs one relaxed load otherwise (it is asked on every spawn).
  bool take_budget_exhausted_notice() noexcept {
    if (notice_.load(std::memory_order_relaxed) != 1) return false;
    int pending = 1;
    return notice_.compare_exchange_strong(pending, 2, std::memory_order_relaxed);
  }

  // A run of adjacent slabs, unmapped by the destructor in one call.
  struct mapping {
    char* base;
    std::size_t bytes;
  };
  // unmap_plan() orders `slabs` (the first bytes of slabs of `slab_bytes`
  // each) by address and joins neighbours: what the destructor unmaps.
  static std::vector<mapping> unmap_plan(std::vector<char*> slabs, std::size_t slab_bytes);
  // The plan for this pool's slabs now; under the lock.
  std::vector<mapping> unmap_plan() const;

  // Where the task frame of `f` goes: `size` bytes aligned to `align` right
  // below the control block, or null if it does not fit the inline area.
  static void* inline_frame(fiber* f, std::size_t size, std::size_t align) noexcept;

 private:
  // Fibers mapped per mmap call.
  static constexpr std::size_t slab_fibers = 16;

  void map_slab(std::vector<fiber*>& out);
  bool guard_block(char* block);
  // The first stack without a guard page: the notice is due (once).
  void note_unguarded() noexcept {
    int guarding = 0;
    notice_.compare_exchange_strong(guarding, 1, std::memory_order_relaxed);
  }
  fiber* place_fiber(char* block, bool guarded);

  std::size_t stack_size_;
  std::size_t page_;
  std::size_t map_size_;
  std::size_t guard_budget_;
  std::atomic<bool> regions_{false};
  std::atomic<int> notice_{0};  // 0: guarding, 1: budget ran out, 2: said so
  mutable spinlock lock_;
  std::size_t guarded_ = 0;    // stacks with a guard page, either kind
  std::size_t protected_ = 0;  // ... of which mprotect'd (the budget's)
  std::size_t handed_out_ = 0;  // blocks handed out by take(), in all
  std::size_t returned_ = 0;    // blocks given back by give(), in all
  std::vector<fiber*> free_;
  std::vector<fiber*> all_;
  // Every slab's first byte (each is map_size_ * slab_fibers long), for the
  // destructor's munmap.
  std::vector<char*> slabs_;
};

}  // namespace usched::detail
