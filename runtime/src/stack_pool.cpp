// stack_pool.cpp
#include "stack_pool.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <new>

namespace usched::detail {
namespace {

std::size_t round_up(std::size_t v, std::size_t to) { return (v + to - 1) / to * to; }

// Bytes above the stack: the control block and the inline task frame.
constexpr std::size_t top_area = sizeof(fiber) + stack_pool::inline_frame_bytes + 64;

// madvise(MADV_GUARD_INSTALL), Linux 6.13; Debian 12's headers predate it.
#ifndef MADV_GUARD_INSTALL
constexpr int MADV_GUARD_INSTALL = 102;
#endif

// The canary: the top 64 bytes of an unguarded block's lowest page, the
// first an overflow writes on its way down. Each word mixes its own
// address, so a copy of another block's canary (a stack holding one, or
// an overflow that copies a neighbour) does not pass for it.
constexpr std::size_t canary_words = 8;
constexpr std::uint64_t canary_seed = 0x75736368656455ULL;  // "usched" and a byte

std::uint64_t canary_word(const std::uint64_t* at) noexcept {
  auto x = reinterpret_cast<std::uintptr_t>(at) ^ canary_seed;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return x;
}

std::uint64_t* canary_of(const fiber* f) noexcept {
  auto* bottom = static_cast<std::uint64_t*>(const_cast<void*>(f->ctx.stack_bottom));
  return bottom - canary_words;
}

}  // namespace

bool stack_pool::kernel_has_guard_regions() noexcept {
  static const bool has = [] {
    const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    void* p = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return false;
    const bool ok = madvise(p, page, MADV_GUARD_INSTALL) == 0;
    munmap(p, 2 * page);
    return ok;
  }();
  return has;
}

bool stack_pool::canary_intact(const fiber* f) noexcept {
  if (f->guarded || !f->block) return true;
  const std::uint64_t* c = canary_of(f);
  for (std::size_t i = 0; i < canary_words; ++i) {
    if (c[i] != canary_word(c + i)) return false;
  }
  return true;
}

// The guard budget: a quarter of vm.max_map_count, two VMAs per guarded
// stack (see stack_pool.hpp).
std::size_t stack_pool::default_guard_budget() {
  std::size_t max_maps = 65530;  // the kernel's default, if /proc says nothing
  if (std::FILE* f = std::fopen("/proc/sys/vm/max_map_count", "r")) {
    unsigned long v = 0;
    if (std::fscanf(f, "%lu", &v) == 1 && v > 0) max_maps = v;
    std::fclose(f);
  }
  return max_maps / 4 / 2;
}

stack_pool::stack_pool(std::size_t stack_size, std::size_t guard_budget, guard_method method)
    : stack_size_(stack_size),
      page_(static_cast<std::size_t>(sysconf(_SC_PAGESIZE))),
      guard_budget_(guard_budget),
      regions_(method == guard_method::automatic && kernel_has_guard_regions()) {
  map_size_ = page_ + round_up(stack_size_ + top_area, page_);
}

stack_pool::~stack_pool() {
  for (fiber* f : all_) {
    sanitizer_destroy_fiber(f->ctx.tsan_fiber);
    f->~fiber();
  }
  // Unmapping one block at a time cost one munmap per stack, each splitting
  // the mapping it punched a hole in (the kernel merges adjacent anonymous
  // mappings of the same protection, so unguarded slabs mapped one after the
  // other become one mapping): 1M stacks took seconds. Slabs are unmapped
  // whole instead, and runs of adjacent slabs (mmap hands out neighbouring
  // addresses) in one call; munmap takes any page range, across mappings
  // and guard pages alike.
  for (const mapping& m : unmap_plan(std::move(slabs_), map_size_ * slab_fibers)) munmap(m.base, m.bytes);
}

std::vector<stack_pool::mapping> stack_pool::unmap_plan(std::vector<char*> slabs, std::size_t slab_bytes) {
  std::sort(slabs.begin(), slabs.end());
  std::vector<mapping> out;
  for (char* s : slabs) {
    if (!out.empty() && out.back().base + out.back().bytes == s) {
      out.back().bytes += slab_bytes;
    } else {
      out.push_back({s, slab_bytes});
    }
  }
  return out;
}

std::vector<stack_pool::mapping> stack_pool::unmap_plan() const {
  std::lock_guard<spinlock> g(lock_);
  return unmap_plan(slabs_, map_size_ * slab_fibers);
}

fiber* stack_pool::place_fiber(char* block, bool guarded) {
  // On a cache-line boundary: the fields a waker touches are the first 64
  // bytes of the control block (struct fiber), and must not straddle two.
  auto ctl_addr = reinterpret_cast<std::uintptr_t>(block + map_size_ - sizeof(fiber));
  ctl_addr &= ~std::uintptr_t{63};
  auto* f = ::new (reinterpret_cast<void*>(ctl_addr)) fiber();
  f->is_fiber = true;
  f->block = block;
  f->block_size = map_size_;
  f->guarded = guarded;
  // The stack gets everything between the guard page and the top area; that
  // is at least the requested size.
  auto top = reinterpret_cast<std::uintptr_t>(block + map_size_ - top_area);
  top &= ~std::uintptr_t{63};
  f->stack_top = reinterpret_cast<char*>(top);
  f->ctx.stack_bottom = block + page_;
  f->ctx.stack_size = static_cast<std::size_t>(f->stack_top - (block + page_));
  if (!guarded) {
    std::uint64_t* c = canary_of(f);
    for (std::size_t i = 0; i < canary_words; ++i) c[i] = canary_word(c + i);
  }
  // TSan's logical thread lives as long as the pooled fiber: every switch
  // into it synchronizes, so successive fibers reusing it are ordered like
  // tasks on a pool thread, and spawning costs no TSan thread creation.
  f->ctx.tsan_fiber = sanitizer_create_fiber();
  return f;
}

// map_slab() maps slab_fibers blocks with one mmap and guards each
// (guard_block). Called without the lock.
void stack_pool::map_slab(std::vector<fiber*>& out) {
  const std::size_t bytes = map_size_ * slab_fibers;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  auto* base = static_cast<char*>(p);
  for (std::size_t i = 0; i < slab_fibers; ++i) {
    char* block = base + i * map_size_;
    out.push_back(place_fiber(block, guard_block(block)));
  }
}

// guard_block() makes the lowest page of `block` its guard, so that a fiber
// that runs off the end of its stack faults there instead of writing over
// its neighbour: a guard region, or while the budget lasts a PROT_NONE
// page. False: the stack goes without (place_fiber() gives it a canary).
bool stack_pool::guard_block(char* block) {
  if (regions_.load(std::memory_order_relaxed)) {
    if (madvise(block, page_, MADV_GUARD_INSTALL) == 0) {
      std::lock_guard<spinlock> g(lock_);
      ++guarded_;
      return true;
    }
    // Refused after the probe passed: mprotect from here on.
    regions_.store(false, std::memory_order_relaxed);
  }
  {
    std::lock_guard<spinlock> g(lock_);
    if (protected_ >= guard_budget_) {
      note_unguarded();
      return false;
    }
    ++protected_;
    ++guarded_;
  }
  if (mprotect(block, page_, PROT_NONE) == 0) return true;
  // Out of VMAs before the budget: the budget ends here.
  std::lock_guard<spinlock> g(lock_);
  --protected_;
  --guarded_;
  guard_budget_ = protected_;
  note_unguarded();
  return false;
}

fiber* stack_pool::take() {
  {
    std::lock_guard<spinlock> g(lock_);
    if (!free_.empty()) {
      fiber* f = free_.back();
      free_.pop_back();
      ++handed_out_;
      return f;
    }
  }
  std::vector<fiber*> fresh;
  fresh.reserve(slab_fibers);
  map_slab(fresh);
  std::lock_guard<spinlock> g(lock_);
  // give() runs on paths that must not fail: keep room for every fiber.
  // Reserving first leaves nothing to undo if it throws (the slab's blocks
  // stay mapped until the process ends; they were never handed out).
  // Geometric growth: reserve(n) allocates exactly n, and growing by one
  // slab at a time would copy both vectors on every slab.
  const std::size_t need = all_.size() + fresh.size();
  if (free_.capacity() < need) free_.reserve(std::max(need, 2 * free_.capacity()));
  if (all_.capacity() < need) all_.reserve(std::max(need, 2 * all_.capacity()));
  slabs_.push_back(fresh.front()->block);
  all_.insert(all_.end(), fresh.begin(), fresh.end());
  free_.insert(free_.end(), fresh.begin() + 1, fresh.end());
  ++handed_out_;
  return fresh.front();
}

std::size_t stack_pool::take(fiber** out, std::size_t max) {
  {
    std::lock_guard<spinlock> g(lock_);
    const std::size_t n = std::min(max, free_.size());
    if (n > 0) {
      // The most recently given back last: a cache hands those out first.
      std::copy(free_.end() - static_cast<std::ptrdiff_t>(n), free_.end(), out);
      free_.resize(free_.size() - n);
      handed_out_ += n;
      return n;
    }
  }
  out[0] = take();
  return 1;
}

std::size_t stack_pool::mapped() const {
  std::lock_guard<spinlock> g(lock_);
  return all_.size();
}

std::size_t stack_pool::guarded() const {
  std::lock_guard<spinlock> g(lock_);
  return guarded_;
}

std::vector<fiber*> stack_pool::all_fibers() const {
  std::lock_guard<spinlock> g(lock_);
  return all_;
}

stack_pool::ledger stack_pool::books() const {
  std::lock_guard<spinlock> g(lock_);
  return {all_.size(), free_.size(), handed_out_, returned_};
}

void stack_pool::give(fiber* const* list, std::size_t n) {
  std::lock_guard<spinlock> g(lock_);
  free_.insert(free_.end(), list, list + n);
  returned_ += n;
}

void* stack_pool::inline_frame(fiber* f, std::size_t size, std::size_t align) noexcept {
  if (size > inline_frame_bytes || align > 64) return nullptr;
  auto addr = reinterpret_cast<std::uintptr_t>(f) - size;
  addr &= ~std::uintptr_t{align - 1};
  if (addr < reinterpret_cast<std::uintptr_t>(f->stack_top)) return nullptr;
  return reinterpret_cast<void*>(addr);
}

}  // namespace usched::detail
