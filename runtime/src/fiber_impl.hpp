// fiber_impl.hpp: what a fiber is inside the runtime, and the parker a plain
// thread waits on; both are waitables of the wait protocol
// (usched/detail/wait.hpp).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <usched/detail/core.hpp>
#include <usched/detail/wait.hpp>

#include "context.hpp"
#include "engine.hpp"
#include <usched/detail/spinlock.hpp>

namespace usched::detail {

// The control block is laid out by who touches what, one cache line per
// role, because a fiber that another worker steals or wakes carries every
// line it touches from one core to the other:
//  - line 0, the wake-up: the waitable base comes first; a waker claims the
//    wait token and then queues the fiber (its sched_entity's links, cpu,
//    pin and on_rq): one line taken from the fiber's last worker, not two.
//  - line 1, the fair discipline: the timeline node with the vruntime it
//    is ordered by and the time kept for it, so a walk or a rebalancing of
//    the tree reads one line of each fiber it visits;
//  - line 2, load tracking: the PELT sums and averages. Lines 1 and 2 are
//    written only by an engine that keeps time (the FIFO and LIFO
//    disciplines without load tracking never write them after
//    construction).
//  - the run: what the first switch into the fiber, every switch and its
//    exit read and write, on a line of its own (a join touches only the
//    join state, apart from the block).
//  - then what only the spawning side reads: identity, the block.
// One fiber's (or one thread's) fiber_local values: for each fiber_local
// it has used, the value and how to destroy it. Looked up by the
// fiber_local's key, most recent first; a fiber uses a handful.
struct fiber_locals {
  struct entry {
    std::uint64_t key;
    void* value;
    void (*destroy)(void*) noexcept;
  };
  std::vector<entry> entries;
  ~fiber_locals() { clear(); }
  // Destroys the values, newest first (the reverse of their construction,
  // as thread_local objects are). A destructor that uses another
  // fiber_local makes it anew, and the loop destroys that one too.
  void clear() noexcept {
    while (!entries.empty()) {
      const entry e = entries.back();
      entries.pop_back();
      e.destroy(e.value);
    }
  }
};

struct fiber : waitable, sched_entity {
  // ---- the run line ----
  // ctx.fctx is null until the fiber first runs: its initial frame is made
  // by the worker that switches into it (worker::switch_to), which writes
  // the top of the stack on that worker's core, not the spawner's.
  alignas(64) exec_context ctx;
  // True from the moment a worker switches into this fiber until the context
  // that replaced it has saved its registers (the kernel's p->on_cpu). A
  // fiber can be made runnable, and even be taken by another worker, while
  // it is still switching away; whoever resumes it waits for this to clear.
  std::atomic<bool> on_cpu{false};
  // The callable (in this block, below the control block) and the join
  // state its result goes to (apart from the block: core.hpp). The block
  // is the fiber's alone: the context that runs after its exit recycles it.
  task_base* task = nullptr;
  join_state* state = nullptr;

  // ---- set at the spawn, read by the spawning and joining side ----
  runtime_impl* rt = nullptr;
  // Atomic only so that the destructor's hang report may read it while the
  // fiber is reused on another worker: relaxed loads and stores (plain moves
  // on every target) are enough for a diagnostic.
  std::atomic<std::uint64_t> id{0};
  // A task frame too big for the fiber's mapping is allocated on the heap.
  void* heap_frame = nullptr;
  std::size_t heap_frame_align = 0;

  // The block this fiber lives in: [block, block + page) is the guard page
  // (PROT_NONE when `guarded`, see stack_pool.hpp), the stack grows down
  // from stack_top, this struct sits above it.
  char* block = nullptr;
  std::size_t block_size = 0;
  char* stack_top = nullptr;
  bool guarded = false;
  // The object of the current (or last) wait (see waitable::waiting_in):
  // on the last line, which nothing else on the switch, wake or spawn path
  // touches, so a waker that reads this fiber's spawn line does not find it
  // dirtied. Relaxed, like waiting_in.
  std::atomic<const void*> waiting_on{nullptr};
  // spawn_options::label, for the diagnostics that name the fiber. Atomic
  // for the hang report's reads, as id.
  std::atomic<const char*> label{nullptr};
  // The fiber's fiber_local values (usched/fiber_local.hpp), made on first
  // use and destroyed when it returns; null until then.
  fiber_locals* locals = nullptr;

  fiber() = default;
  fiber(const fiber&) = delete;
  fiber& operator=(const fiber&) = delete;
  ~fiber() { delete locals; }
};

// The wake-up line and the fair discipline's lines come before the run line:
// three lines, no more. A fourth would move the run line and every line after
// it, and a fiber would span seven lines instead of six (a steal spawn and
// join measured 15-20% slower when util_est made it so).
static_assert(sizeof(waitable) + sizeof(sched_entity) <= 3 * 64,
              "the waitable and the sched_entity must fit the three lines before the run line");
// The lines of the layout above. offsetof on a class with bases is
// conditionally supported; GCC and Clang give the address arithmetic's
// answer and warn, which is what is checked here.
// The time-keeping lines, [fiber_time_lines_begin, fiber_time_lines_end):
// the fair discipline's and load tracking's.
inline constexpr std::size_t fiber_time_lines_begin = 64;
inline constexpr std::size_t fiber_time_lines_end = 3 * 64;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"
static_assert(offsetof(fiber, util_est_ewma) + sizeof(std::uint32_t) <= fiber_time_lines_begin,
              "the wake-up fields must end on line 0");
static_assert(offsetof(fiber, timeline_hook) == fiber_time_lines_begin &&
                  offsetof(fiber, prev_sum_exec) + sizeof(std::int64_t) <= fiber_time_lines_begin + 64,
              "the timeline node and the time kept for it must share line 1");
static_assert(offsetof(fiber, avg) == fiber_time_lines_begin + 64 &&
                  offsetof(fiber, avg) + sizeof(pelt_avg) <= fiber_time_lines_end,
              "load tracking's sums must fill line 2");
#pragma GCC diagnostic pop

// prefetch_for_spawn() starts bringing a pooled fiber's lines to this core
// for writing, one spawn ahead: a worker takes its next fiber from the top of
// its cache, and a fiber that last ran a thousand fibers ago (a fork-join
// batch) has its lines in a farther cache by then. A spawn writes most of
// them (the control block, the inline task frame just below it, the first
// line of the sched_entity), and the enqueue that follows takes the
// runqueue lock, a locked instruction that waits for every store before it:
// unprefetched, the spawn stalled there on the misses of its own writes.
// The sched_entity's second and third lines (vruntime, PELT) are written
// only by an engine that keeps time, and are left where they are otherwise.
inline void prefetch_for_spawn(const fiber* f, bool keeps_time) noexcept {
  const char* p = reinterpret_cast<const char*>(f);
  __builtin_prefetch(p - 64, 1);
  for (std::size_t off = 0; off < sizeof(fiber); off += 64) {
    if (!keeps_time && off >= fiber_time_lines_begin && off < fiber_time_lines_end) continue;
    __builtin_prefetch(p + off, 1);
  }
}

// An OS thread that waits in a usched primitive.
struct thread_parker : waitable {
  std::atomic<std::uint32_t> word{0};  // 1 = resumed, consumed by the waiter
};

}  // namespace usched::detail
