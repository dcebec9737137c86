// stack_pool.cpp
#include "stack_pool.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <mutex>
#include <new>

namespace usched::detail {
namespace {

std::size_t round_up(std::size_t v, std::size_t to) { return (v + to - 1) / to * to; }

// Bytes above the stack: the control block and the inline task frame.
constexpr std::size_t top_area = sizeof(fiber) + stack_pool::inline_frame_bytes + 64;

}  // namespace

stack_pool::stack_pool(std::size_t stack_size)
    : stack_size_(stack_size), page_(static_cast<std::size_t>(sysconf(_SC_PAGESIZE))) {
  map_size_ = page_ + round_up(stack_size_ + top_area, page_);
}

stack_pool::~stack_pool() {
  for (fiber* f : all_) {
    char* block = f->block;
    const std::size_t size = f->block_size;
    sanitizer_destroy_fiber(f->ctx.tsan_fiber);
    f->~fiber();
    munmap(block, size);
  }
}

fiber* stack_pool::map_one() {
  void* p = mmap(nullptr, map_size_, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  char* block = static_cast<char*>(p);
  // The lowest page is the guard: a fiber that runs off the end of its stack
  // faults there instead of writing over its neighbour's memory.
  if (mprotect(block, page_, PROT_NONE) != 0) {
    munmap(block, map_size_);
    throw std::bad_alloc();
  }
  auto ctl_addr = reinterpret_cast<std::uintptr_t>(block + map_size_ - sizeof(fiber));
  ctl_addr &= ~std::uintptr_t{alignof(fiber) - 1};
  auto* f = ::new (reinterpret_cast<void*>(ctl_addr)) fiber();
  f->is_fiber = true;
  f->block = block;
  f->block_size = map_size_;
  // The stack gets everything between the guard page and the top area; that
  // is at least the requested size.
  auto top = reinterpret_cast<std::uintptr_t>(block + map_size_ - top_area);
  top &= ~std::uintptr_t{63};
  f->stack_top = reinterpret_cast<char*>(top);
  f->ctx.stack_bottom = block + page_;
  f->ctx.stack_size = static_cast<std::size_t>(f->stack_top - (block + page_));
  // TSan's logical thread lives as long as the pooled fiber: every switch
  // into it synchronizes, so successive fibers reusing it are ordered like
  // tasks on a pool thread, and spawning costs no TSan thread creation.
  f->ctx.tsan_fiber = sanitizer_create_fiber();
  return f;
}

fiber* stack_pool::take() {
  {
    std::lock_guard<spinlock> g(lock_);
    if (!free_.empty()) {
      fiber* f = free_.back();
      free_.pop_back();
      return f;
    }
  }
  fiber* f = map_one();
  std::lock_guard<spinlock> g(lock_);
  try {
    all_.push_back(f);
    // give() runs on paths that must not fail: keep room for every fiber.
    free_.reserve(all_.size());
  } catch (...) {
    munmap(f->block, f->block_size);
    throw;
  }
  return f;
}

void stack_pool::give(fiber* const* list, std::size_t n) {
  std::lock_guard<spinlock> g(lock_);
  free_.insert(free_.end(), list, list + n);
}

void* stack_pool::inline_frame(fiber* f, std::size_t size, std::size_t align) noexcept {
  if (size > inline_frame_bytes || align > 64) return nullptr;
  auto addr = reinterpret_cast<std::uintptr_t>(f) - size;
  addr &= ~std::uintptr_t{align - 1};
  if (addr < reinterpret_cast<std::uintptr_t>(f->stack_top)) return nullptr;
  return reinterpret_cast<void*>(addr);
}

}  // namespace usched::detail
