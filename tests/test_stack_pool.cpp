// The stack pool: slabs, the guard-page budget, and more live fibers than
// one-mapping-per-stack would allow.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <usched/usched.hpp>

#include "stack_pool.hpp"
#include "test_support.hpp"

using usched::detail::fiber;
using usched::detail::stack_pool;

namespace {

// The r/w/x permissions of the mapping that holds `addr`, from /proc/self/maps.
std::string protection_of(const void* addr) {
  std::ifstream maps("/proc/self/maps");
  const auto a = reinterpret_cast<std::uintptr_t>(addr);
  std::string line;
  while (std::getline(maps, line)) {
    std::uintptr_t lo = 0, hi = 0;
    char perms[8] = {};
    if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR " %4s", &lo, &hi, perms) == 3 && a >= lo &&
        a < hi) {
      return std::string(perms, 3);
    }
  }
  return "unmapped";
}

}  // namespace

TEST_CASE("stack pool: stacks are guarded up to the budget, then mapped without guards",
          "[stack_pool]") {
  // A budget of two slabs (slabs hold 16 stacks), mprotect guards only.
  stack_pool pool(64 * 1024, 32, stack_pool::guard_method::mprotect);
  std::vector<fiber*> taken;
  for (int i = 0; i < 64; ++i) taken.push_back(pool.take());
  CHECK(pool.mapped() == 64);
  CHECK(pool.guarded() == 32);
  int guarded = 0;
  for (fiber* f : taken) {
    guarded += f->guarded ? 1 : 0;
    // Every stack is at least what was asked for, between its guard page
    // and its control block.
    CHECK(f->ctx.stack_size >= 64 * 1024);
    CHECK(static_cast<const char*>(f->ctx.stack_bottom) == f->block + pool.page_size());
    CHECK(reinterpret_cast<char*>(f) >= f->stack_top);
    CHECK(reinterpret_cast<char*>(f) + sizeof(fiber) <= f->block + f->block_size);
  }
  CHECK(guarded == 32);
  // The kernel agrees: a guarded stack's lowest page is PROT_NONE, an
  // unguarded one's is ordinary stack memory, topped by a canary.
  for (fiber* f : taken) CHECK(protection_of(f->block) == (f->guarded ? "---" : "rw-"));
  for (fiber* f : taken) CHECK(stack_pool::canary_intact(f));
  // The notice that guards ran out is given once.
  CHECK(pool.take_budget_exhausted_notice());
  CHECK_FALSE(pool.take_budget_exhausted_notice());
  // Returned fibers are reused before anything new is mapped.
  pool.give(taken.data(), taken.size());
  fiber* again = pool.take();
  CHECK(pool.mapped() == 64);
  pool.give(&again, 1);
}

TEST_CASE("stack pool: an unguarded stack's canary tells an overflow from a stack that stayed in bounds",
          "[stack_pool]") {
  stack_pool pool(64 * 1024, 0, stack_pool::guard_method::mprotect);
  fiber* f = pool.take();
  REQUIRE_FALSE(f->guarded);
  CHECK(stack_pool::canary_intact(f));
  // The stack's whole usable range is the fiber's: writing all of it leaves
  // the canary alone.
  auto* bottom = static_cast<char*>(const_cast<void*>(f->ctx.stack_bottom));
  std::fill(bottom, bottom + f->ctx.stack_size, '\x5a');
  CHECK(stack_pool::canary_intact(f));
  // One byte below it is an overflow.
  const char saved = bottom[-1];
  bottom[-1] = static_cast<char>(~saved);
  CHECK_FALSE(stack_pool::canary_intact(f));
  bottom[-1] = saved;
  CHECK(stack_pool::canary_intact(f));
  // So is the lowest byte of the canary, 64 bytes below.
  bottom[-64] = static_cast<char>(~bottom[-64]);
  CHECK_FALSE(stack_pool::canary_intact(f));
  bottom[-64] = static_cast<char>(~bottom[-64]);
  pool.give(&f, 1);
}

TEST_CASE("stack pool: with guard regions every stack is guarded, and no stack costs a mapping",
          "[stack_pool]") {
  if (!stack_pool::kernel_has_guard_regions()) {
    // Linux before 6.13: the mprotect budget applies (the tests above).
    WARN("this kernel has no guard regions (MADV_GUARD_INSTALL)");
    return;
  }
  // A budget of nothing: only guard regions can guard these.
  stack_pool pool(64 * 1024, 0);
  REQUIRE(pool.guard_regions());
  std::vector<fiber*> taken;
  for (int i = 0; i < 48; ++i) taken.push_back(pool.take());
  CHECK(pool.guarded() == 48);
  for (fiber* f : taken) {
    CHECK(f->guarded);
    // The guard leaves the mapping as it is: no PROT_NONE page splits it.
    CHECK(protection_of(f->block) == "rw-");
  }
  // The blocks of a slab are one mapping, as without guards.
  const auto maps_holding = [&](const std::vector<fiber*>& fs) {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    int n = 0;
    while (std::getline(maps, line)) {
      std::uintptr_t lo = 0, hi = 0;
      if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR, &lo, &hi) != 2) continue;
      for (fiber* f : fs) {
        const auto a = reinterpret_cast<std::uintptr_t>(f->block);
        if (a >= lo && a < hi) {
          ++n;
          break;
        }
      }
    }
    return n;
  };
  CHECK(maps_holding(taken) <= 3);  // three slabs, adjacent ones merged
  pool.give(taken.data(), taken.size());
}

TEST_CASE("stack pool: a batch take hands out the most recently returned first, then maps",
          "[stack_pool]") {
  stack_pool pool(64 * 1024, 64);
  std::vector<fiber*> taken;
  for (int i = 0; i < 20; ++i) taken.push_back(pool.take());
  CHECK(pool.mapped() == 32);  // two slabs of 16
  pool.give(taken.data(), taken.size());
  // Up to `max` at once, the last given back at the end (a cache's back).
  fiber* out[8] = {};
  REQUIRE(pool.take(out, 8) == 8);
  for (int i = 0; i < 8; ++i) CHECK(out[i] == taken[static_cast<std::size_t>(12 + i)]);
  // Fewer left than asked for: what there is.
  fiber* rest[64] = {};
  const std::size_t n = pool.take(rest, 64);
  CHECK(n == 32 - 8);
  // Nothing left: one, from a new slab.
  fiber* fresh[8] = {};
  CHECK(pool.take(fresh, 8) == 1);
  CHECK(pool.mapped() == 48);
  pool.give(out, 8);
  pool.give(rest, n);
  pool.give(fresh, 1);
}

TEST_CASE("stack pool: the ledger counts every block handed out and given back, one by one or in batches",
          "[stack_pool]") {
  stack_pool pool(64 * 1024, 64);
  const auto books = [&] {
    const stack_pool::ledger l = pool.books();
    return std::vector<std::size_t>{l.mapped, l.pooled, l.handed_out, l.returned};
  };
  CHECK(books() == std::vector<std::size_t>{0, 0, 0, 0});
  fiber* one = pool.take();  // maps a slab of 16, hands out one
  CHECK(books() == std::vector<std::size_t>{16, 15, 1, 0});
  fiber* batch[8] = {};
  REQUIRE(pool.take(batch, 8) == 8);  // a cache's refill, from the pool
  CHECK(books() == std::vector<std::size_t>{16, 7, 9, 0});
  fiber* rest[16] = {};
  REQUIRE(pool.take(rest, 16) == 7);
  fiber* fresh[4] = {};
  REQUIRE(pool.take(fresh, 4) == 1);  // the pool is empty: one, from a new slab
  CHECK(books() == std::vector<std::size_t>{32, 15, 17, 0});
  pool.give(batch, 8);  // a cache's spill
  pool.give(&one, 1);
  CHECK(books() == std::vector<std::size_t>{32, 24, 17, 9});
  // One block still out: the books say so until it comes back.
  pool.give(rest, 7);
  CHECK(books() == std::vector<std::size_t>{32, 31, 17, 16});
  pool.give(fresh, 1);
  CHECK(books() == std::vector<std::size_t>{32, 32, 17, 17});
}

TEST_CASE("stack pool: teardown unmaps whole slabs, neighbours in one call", "[stack_pool]") {
  // Slabs given in any order; three adjacent ones and one apart.
  const std::size_t slab = 16 * 4096;
  alignas(4096) static char area[8 * 16 * 4096];
  char* a = area;
  const auto plan = stack_pool::unmap_plan({a + 2 * slab, a, a + 5 * slab, a + slab}, slab);
  REQUIRE(plan.size() == 2);
  CHECK(plan[0].base == a);
  CHECK(plan[0].bytes == 3 * slab);
  CHECK(plan[1].base == a + 5 * slab);
  CHECK(plan[1].bytes == slab);
  CHECK(stack_pool::unmap_plan({}, slab).empty());

  // A real pool, half its stacks guarded: the plan covers every block once,
  // and after the pool is gone none of them is mapped any more.
  std::vector<char*> blocks;
  std::size_t covered = 0;
  {
    stack_pool pool(64 * 1024, 32);
    std::vector<fiber*> taken;
    for (int i = 0; i < 64; ++i) taken.push_back(pool.take());
    for (fiber* f : taken) blocks.push_back(f->block);
    const auto real = pool.unmap_plan();
    CHECK(real.size() <= 4);
    for (const auto& m : real) covered += m.bytes;
    CHECK(covered == 64 * taken.front()->block_size);
    for (fiber* f : taken) {
      const bool inside = std::any_of(real.begin(), real.end(), [&](const auto& m) {
        return f->block >= m.base && f->block + f->block_size <= m.base + m.bytes;
      });
      CHECK(inside);
    }
    pool.give(taken.data(), taken.size());
  }
  for (char* b : blocks) CHECK(protection_of(b) == "unmapped");
}

TEST_CASE("stack pool: a budget never runs out when it covers every stack", "[stack_pool]") {
  stack_pool pool(64 * 1024, 1024);
  std::vector<fiber*> taken;
  for (int i = 0; i < 40; ++i) taken.push_back(pool.take());
  CHECK(pool.guarded() == pool.mapped());
  CHECK_FALSE(pool.take_budget_exhausted_notice());
  pool.give(taken.data(), taken.size());
}

TEST_CASE("more fibers are alive at once than vm.max_map_count allows guarded stacks for",
          "[runtime][stack_pool]") {
  // 40,000 blocked fibers: with one mapping and a guard page per stack
  // (two VMAs each) the kernel's default limit of 65,530 mappings would
  // refuse the 32,766th.
  const long n = 40'000 / static_cast<long>(usched::test::volume_divisor);
  usched::runtime rt(usched::test::make_options("steal", 2));
  const long sum = rt.run([n] {
    usched::wait_group started;
    usched::channel<long> release(0);
    std::vector<usched::join_handle<long>> hs;
    hs.reserve(static_cast<std::size_t>(n));
    started.add(n);
    for (long i = 0; i < n; ++i) {
      hs.push_back(usched::spawn([&started, &release, i] {
        started.done();
        (void)release.recv();  // blocks until the channel closes
        return i;
      }));
    }
    started.wait();
    release.close();
    long s = 0;
    for (auto& h : hs) s += h.join();
    return s;
  });
  CHECK(sum == n * (n - 1) / 2);
}

TEST_CASE("stack pool: a waker touches one cache line of a pooled fiber", "[stack_pool]") {
  // The wait token and the sched_entity fields a cross-worker wake-up reads
  // and writes (queue links, cpu, pin, on_rq) are the first 64 bytes of a
  // control block that starts on a cache-line boundary.
  stack_pool pool(64 * 1024, 64);
  fiber* f = pool.take();
  const auto base = reinterpret_cast<std::uintptr_t>(f);
  CHECK(base % 64 == 0);
  const usched::detail::sched_entity& se = *f;
  const usched::detail::waitable& w = *f;
  const auto end_of = [&](const auto& field) {
    return reinterpret_cast<std::uintptr_t>(&field) + sizeof(field) - base;
  };
  for (std::uintptr_t end : {end_of(w.wait_token), end_of(w.is_fiber), end_of(se.rq_next), end_of(se.rq_prev),
                             end_of(se.cpu), end_of(se.pinned), end_of(se.on_rq), end_of(se.wake_pending)}) {
    CHECK(end <= 64);
  }
  pool.give(&f, 1);
}

TEST_CASE("stack pool: a fiber's run touches one more line of its control block", "[stack_pool]") {
  // What the first switch into a fiber, every switch and its exit read
  // and write (the context, on_cpu, the task and its join state) share one
  // cache line of their own; a stolen fiber carries
  // it and line 0 between workers, and nothing else of its control block.
  stack_pool pool(64 * 1024, 64);
  fiber* f = pool.take();
  const auto base = reinterpret_cast<std::uintptr_t>(f);
  const auto line_of = [&](const auto& field) { return (reinterpret_cast<std::uintptr_t>(&field) - base) / 64; };
  const auto last_line_of = [&](const auto& field) {
    return (reinterpret_cast<std::uintptr_t>(&field) + sizeof(field) - 1 - base) / 64;
  };
  const std::uintptr_t run = line_of(f->ctx);
  CHECK(run > 0);
  for (std::uintptr_t l : {last_line_of(f->ctx), line_of(f->on_cpu), line_of(f->task), last_line_of(f->state)}) {
    CHECK(l == run);
  }
  // The spawning side's fields are elsewhere.
  CHECK(line_of(f->rt) != run);
  CHECK(line_of(f->id) != run);
  // A fiber that never ran has no frame yet: the worker that first runs it
  // makes one at the top of the stack the run line describes.
  CHECK(f->ctx.stack_top() == f->stack_top);
  pool.give(&f, 1);
}

TEST_CASE("context: Boost's first frame keeps the floating-point state where the runtime writes it",
          "[context]") {
  // On x86-64 a new fiber's starting state is written into its first frame
  // (set_first_frame_fp); the probe checks Boost's frame layout. Elsewhere
  // the fiber's entry loads the state and the probe says no.
#if defined(__x86_64__)
  CHECK(usched::detail::fp_in_first_frame());
#else
  CHECK_FALSE(usched::detail::fp_in_first_frame());
#endif
}
