// stack_pool.hpp: fibers with their stacks, mmap'd with a guard page, pooled.
//
// A fiber's control block lives at the top of its own mapping, above the
// stack, together with room for a small task frame: taking a fiber from the
// pool allocates nothing. Mappings are only unmapped when the pool is
// destroyed, after every worker has stopped.
#pragma once

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

  explicit stack_pool(std::size_t stack_size);
  ~stack_pool();
  stack_pool(const stack_pool&) = delete;
  stack_pool& operator=(const stack_pool&) = delete;

  // take() returns a pooled fiber or maps a new one. Any thread; takes the
  // pool's lock. Throws std::bad_alloc when the kernel refuses a mapping.
  fiber* take();
  // give() returns fibers to the pool. Any thread; takes the pool's lock.
  void give(fiber* const* list, std::size_t n);

  std::size_t stack_size() const noexcept { return stack_size_; }
  std::size_t page_size() const noexcept { return page_; }

  // Where the task frame of `f` goes: `size` bytes aligned to `align` right
  // below the control block, or null if it does not fit the inline area.
  static void* inline_frame(fiber* f, std::size_t size, std::size_t align) noexcept;

 private:
  fiber* map_one();

  std::size_t stack_size_;
  std::size_t page_;
  std::size_t map_size_;
  spinlock lock_;
  std::vector<fiber*> free_;
  std::vector<fiber*> all_;
};

}  // namespace usched::detail
