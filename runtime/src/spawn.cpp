// spawn.cpp: a fiber's life from spawn to recycle: its control block and
// task frame taken from the pool and its join state from the thread's
// cache, its start, its exit and the end of its joiner's wait, join and
// detach; its block goes back to the pool when it has returned, its join
// state when the fiber and its handle have both let it go.
#include <new>
#include <ostream>
#include <stdexcept>
#include <string>

#include <usched/fiber.hpp>

#include "fatal.hpp"
#include "overflow.hpp"
#include "runtime_impl.hpp"

namespace usched::detail {

namespace {

// The join states a thread freed lately, for its next spawns: a fork-join
// worker frees its children's states as it joins them and takes them back
// at its next spawns, in cache, without the allocator's locks. One size
// (most results are a word or two), and bounded: past the bound, and for
// other sizes, the heap. Plain heap memory, so whichever thread drops a
// state's last reference frees it, after its runtime if need be (Go's
// per-P free lists of goroutines, for the part of a goroutine that
// outlives its run).
// 96 bytes: the header (72) and a result of up to three words, or two
// with a stop source; the allocator's alignment, not a cache line's (an
// over-aligned block costs the allocator as much again, and half a
// million finished fibers keep half a million of them).
constexpr std::size_t cached_state_bytes = 96;
constexpr std::size_t cached_state_align = __STDCPP_DEFAULT_NEW_ALIGNMENT__;
// 2048: more than a batch of a thousand spawned, then joined, takes back
// (at most 192 KiB of states a thread, in a 16 KiB array).
constexpr std::size_t state_cache_max = 2048;

struct join_state_cache {
  std::size_t n = 0;
  void* blocks[state_cache_max];
  ~join_state_cache() {
    while (n) ::operator delete(blocks[--n]);
  }
};
thread_local join_state_cache state_cache;

bool cacheable(std::size_t size, std::size_t align) noexcept {
  return size <= cached_state_bytes && align <= cached_state_align;
}

}  // namespace

void* allocate_join_state(std::size_t size, std::size_t align) {
  if (!cacheable(size, align)) return ::operator new(size, std::align_val_t(align));
  join_state_cache& c = state_cache;
  if (c.n) return c.blocks[--c.n];
  return ::operator new(cached_state_bytes);
}

void free_join_state(void* p, std::size_t size, std::size_t align) noexcept {
  if (!cacheable(size, align)) {
    ::operator delete(p, std::align_val_t(align));
    return;
  }
  join_state_cache& c = state_cache;
  if (c.n < state_cache_max) {
    c.blocks[c.n++] = p;
  } else {
    ::operator delete(p);
  }
}

// How far a spawning fiber may run ahead of its children: once its worker
// has this many fibers queued, the spawn yields and the queue runs. Each
// queued fiber holds a stack block (a page of it resident, the control
// block's), so without a bound a loop that spawns half a million fibers
// before it joins any would hold as many; with it, a worker holds at most
// about 4 MiB of blocks it has not run. Under a policy that moves no fiber
// (none) nothing else would drain the queue; under the others the bound
// holds too, since the spawner outruns a thief. A yield per 1,024 spawns
// costs the spawn nothing measurable; a fork-join that joins what it
// spawns never queues that many.
constexpr unsigned spawn_backlog_max = 1024;
constexpr unsigned spawn_backlog_check = 64;

fiber_slot runtime_impl::allocate(std::size_t size, std::size_t align, std::size_t state_size,
                                  std::size_t state_align) {
  worker* w = local_worker();
  fiber* f = w ? w->take_fiber() : pool_.take();
  if (pool_.take_budget_exhausted_notice()) [[unlikely]] {
    log().warn("{} fiber stacks have guard pages (a quarter of vm.max_map_count); stacks mapped "
               "from now on have a canary instead, checked at the tick and when the fiber exits: "
               "an overflow there is found late, or not at all if it skips the canary",
               pool_.guarded());
  }
  void* frame = stack_pool::inline_frame(f, size, align);
  f->heap_frame = nullptr;
  try {
    if (!frame) {
      frame = ::operator new(size, std::align_val_t(align));
      f->heap_frame = frame;
      f->heap_frame_align = align;
    }
    return {f, frame, allocate_join_state(state_size, state_align)};
  } catch (...) {
    discard(f, w);
    throw;
  }
}

namespace {

// What a block holds for one fiber, let go before it serves the next.
void clear_block(fiber* f) noexcept {
  if (f->heap_frame) {
    ::operator delete(f->heap_frame, std::align_val_t(f->heap_frame_align));
    f->heap_frame = nullptr;
  }
  f->task = nullptr;
  f->state = nullptr;
}

}  // namespace

void runtime_impl::discard(fiber* f, worker* w) noexcept {
  clear_block(f);
  if (w) {
    w->give_fiber(f);
  } else {
    pool_.give(&f, 1);
  }
}

void runtime_impl::start(fiber* f, task_base* task, join_state* state, const spawn_options& opts, worker* w) {
  const std::uint64_t id = w ? w->next_fiber_id() : reserve_ids(1);
  f->rt = this;
  f->id.store(id, std::memory_order_relaxed);
  f->task = task;
  f->state = state;
  state->runner = f;
  state->id = id;
  state->label = opts.label;
  f->pinned = opts.pin;
  f->preferred_node = opts.numa_node;
  f->weight = opts.weight;
  f->label.store(opts.label, std::memory_order_relaxed);
  if (tracer_ && opts.label) [[unlikely]] tracer_->emit_label(engine_now_ns(), id, opts.label);
  f->cpu.store(-1, std::memory_order_relaxed);
  f->on_rq.store(false, std::memory_order_relaxed);
  f->wake_pending = false;
  // The time the fair discipline keeps; under FIFO and LIFO it is never
  // written and stays 0, and its cache lines stay where they are.
  if (engine_.eevdf()) {
    // EEVDF's fields share the line's storage with CFS's (sched_entity);
    // a new fiber has no lag and, unless it asked for one, the base slice,
    // which its placement fills in.
    f->vruntime = 0;
    f->vlag = 0;
    f->exec_start = 0;
    f->ev_flags = opts.slice.count() != 0 ? ev_custom_slice : 0;
    f->ev_slice.request = static_cast<std::uint32_t>(opts.slice.count());
  } else if (engine_.fair()) {
    f->vruntime = 0;
    f->sum_exec = 0;
    f->prev_sum_exec = 0;
    f->exec_start = 0;
  }
  f->on_cpu.store(false, std::memory_order_relaxed);
  sanitizer_unpoison_stack(f->ctx.stack_bottom, f->ctx.stack_size);
  // Its first frame is made where it first runs (worker::switch_to).
  f->ctx.fctx = nullptr;
  std::uint64_t spawned = 0;
  if (w) {
    spawned = w->spawned_.load(std::memory_order_relaxed) + 1;
    w->spawned_.store(spawned, std::memory_order_release);
  } else {
    external_spawned_.fetch_add(1, std::memory_order_relaxed);
  }
  try_to_wake_up(f, placement_kind::spawn, wake_reason::spawn, w);
  // The backlog is looked at every spawn_backlog_check spawns of a worker
  // (its count is on the runqueue's line, which a thief takes away, and a
  // read at every spawn cost skynet 3-6%), and at every spawn while the
  // last look found it long: a tree whose fibers spawn a few each is held
  // to the bound too.
  if (w && (w->backlog_long_ || spawned % spawn_backlog_check == 0) && w->current_fiber()) [[unlikely]] {
    w->backlog_long_ = engine_.nr_queued(w->index()) > spawn_backlog_max;
    if (w->backlog_long_) w->yield_current(prev_action::yield);
  }
}

fiber* runtime_impl::fiber_done(fiber* f, worker* w) noexcept {
  check_stack_canary(f, opts_.stack_size / 1024);
  join_state* s = f->state;
  s->lock.lock();
  s->done.store(true, std::memory_order_release);
  s->runner = nullptr;
  waitable* joiner = s->joiner;
  const std::uint64_t token = s->joiner_token;
  const bool detached = s->detached;
  // Claimed under the lock: a joiner whose deadline or stop ended its
  // wait takes the lock before it returns, so until then it (a thread's
  // parker, which ends with its thread) is still there to be claimed; once
  // we hold the claim, it waits for our resume_wait().
  const bool won = joiner && claim_wait(*joiner, token);
  s->lock.unlock();
  fiber* handed = nullptr;
  if (won) {
    // A joining fiber is woken by the exit's switch (the join hand-off's
    // second half: one that last ran here runs next, where its children's
    // data is); a thread is resumed now.
    // A fiber of another runtime is that runtime's to wake, through its own
    // placement: the hand-off, and this runtime's workers, are not for it.
    if (joiner->is_fiber && static_cast<fiber*>(joiner)->rt == this) {
      handed = static_cast<fiber*>(joiner);
    } else {
      resume_wait(*joiner, wake_reason::join);
    }
  }
  // Detached, the state is the fiber's alone: nobody else reads the error.
  if (detached && s->error) report_detached_exception(s);
  release_join_state(s);
  w->exited_.store(w->exited_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  if (draining_.load(std::memory_order_relaxed)) [[unlikely]] {
    std::lock_guard<std::mutex> lk(live_mutex_);
    live_cv_.notify_all();
  }
  return handed;
}

void runtime_impl::recycle(fiber* f, worker& w) noexcept {
  discard(f, &w);
}

// The kernel's weights for nice 19 and nice -20: the range a fiber's weight
// may take.
constexpr unsigned min_weight = 15;
constexpr unsigned max_weight = 88761;
// The kernel's bounds of a fair task's slice request (__setscheduler_params()
// clamps sched_runtime to them; here a value outside is an error).
constexpr std::int64_t min_slice_ns = 100'000;
constexpr std::int64_t max_slice_ns = 100'000'000;

namespace {

void check_spawn_options(runtime_impl& rt, const spawn_options& opts) {
  if (opts.pin < -1 || opts.pin >= static_cast<int>(rt.nr_workers())) {
    throw std::invalid_argument("spawn_options::pin=" + std::to_string(opts.pin) +
                                " is out of range: allowed -1 (unpinned) or 0.." +
                                std::to_string(rt.nr_workers() - 1));
  }
  if (opts.numa_node < -1 || opts.numa_node >= static_cast<int>(rt.topo().nr_numa_nodes())) {
    throw std::invalid_argument("spawn_options::numa_node=" + std::to_string(opts.numa_node) +
                                " is out of range: allowed -1 (none) or 0.." +
                                std::to_string(static_cast<int>(rt.topo().nr_numa_nodes()) - 1));
  }
  if (opts.weight < min_weight || opts.weight > max_weight) {
    throw std::invalid_argument("spawn_options::weight=" + std::to_string(opts.weight) +
                                " is out of range: allowed " + std::to_string(min_weight) + ".." +
                                std::to_string(max_weight) + " (1024 is the default)");
  }
  const std::int64_t slice = opts.slice.count();
  if (slice != 0 && (slice < min_slice_ns || slice > max_slice_ns)) {
    throw std::invalid_argument("spawn_options::slice=" + std::to_string(slice) +
                                "ns is out of range: allowed 0 (the base slice) or " +
                                std::to_string(min_slice_ns) + ".." + std::to_string(max_slice_ns) + " ns");
  }
}

}  // namespace

fiber_slot allocate_fiber(runtime_impl& rt, std::size_t size, std::size_t align, std::size_t state_size,
                          std::size_t state_align, const spawn_options& opts) {
  // The defaults are valid for every runtime; only other values are checked.
  const spawn_options defaults;
  if (opts.pin != defaults.pin || opts.numa_node != defaults.numa_node || opts.weight != defaults.weight ||
      opts.slice != defaults.slice) {
    check_spawn_options(rt, opts);
  }
  return rt.allocate(size, align, state_size, state_align);
}

// The calling thread's worker is looked up again here, not carried over from
// allocate_fiber(): constructing the task frame in between runs the caller's
// code (a move constructor), which may block, and the spawning fiber may then
// continue on another worker. start() passes it on to the placement.
void discard_fiber(runtime_impl& rt, const fiber_slot& slot, std::size_t state_size,
                   std::size_t state_align) noexcept {
  free_join_state(slot.state, state_size, state_align);
  rt.discard(slot.f, rt.local_worker());
}

void start_fiber(runtime_impl& rt, fiber* f, task_base* task, join_state* state, const spawn_options& opts) {
  rt.start(f, task, state, opts, rt.local_worker());
}

bool join_wait(join_state* s, std::int64_t deadline_ns, const std::stop_token& stop) {
  if (s->done.load(std::memory_order_acquire)) return true;
  if (deadline_ns == 0 || (has_timer(deadline_ns) && deadline_ns <= now_ns()) || stop.stop_requested()) {
    return false;
  }
  waitable& me = current_waitable();
  s->lock.lock();
  if (s->done.load(std::memory_order_relaxed)) {
    s->lock.unlock();
    return true;
  }
  // The object of the wait is the fiber, not its join state: a fiber's
  // block is never freed while its runtime lives, so the hang report may
  // read it whenever it looks (stack_pool.hpp).
  const std::uint64_t token = prepare_wait(me, wait_kind::join, s->runner);
  s->joiner = &me;
  s->joiner_token = token;
  // The join hand-off's candidate: the fiber itself, while it has not
  // finished (it cannot pass fiber_done's lock while we hold it), and only
  // if it is of the joiner's runtime: a fiber of another is never run by
  // this one's workers. Once the lock is let go the fiber may finish and
  // its block serve another fiber of the same runtime; the hand-off checks
  // under the runqueue's lock that what it takes is queued there.
  fiber* const joined = me.is_fiber && s->runner->rt == static_cast<fiber&>(me).rt ? s->runner : nullptr;
  s->lock.unlock();
  if (me.is_fiber) {
    // The join hand-off: a joinee still queued on this worker runs next, in
    // the joiner's place (depth-first fork-join), decided by the block's
    // own switch.
    worker* w = worker_of_this_thread();
    auto& self = static_cast<fiber&>(me);
    if (stop.stop_possible()) {
      // As block(me, token, deadline_ns, stop).
      std::stop_callback on_stop(stop, [&me, token]() noexcept { wake(me, token, wake_reason::stop); });
      w->block_current(&self, token, deadline_ns, joined);
    } else {
      w->block_current(&self, token, deadline_ns, joined);
    }
  } else {
    block(me, token, deadline_ns, stop);
  }
  // Woken by the exit, or by the deadline or a stop: the exit sets done before it
  // claims, so done tells. A joiner the deadline woke leaves its place
  // (under the lock, where the exit reads it); a later join takes it again.
  // A fiber that finds done needs no lock: the exit may still be reading
  // s->joiner under it (its claim, if a timer or stop won, then fails on
  // the spent token), and a fiber's waitable outlives any such read (fibers
  // are pooled). A thread's parker ends with its thread: it waits for the
  // exit to leave the lock.
  if (me.is_fiber && s->done.load(std::memory_order_acquire)) return true;
  s->lock.lock();
  const bool done = s->done.load(std::memory_order_relaxed);
  if (!done && s->joiner == &me) s->joiner = nullptr;
  s->lock.unlock();
  return done;
}

void detach_join_state(join_state* s) noexcept {
  s->lock.lock();
  s->detached = true;
  const bool done = s->done.load(std::memory_order_relaxed);
  s->lock.unlock();
  if (done && s->error) report_detached_exception(s);
  release_join_state(s);
}

}  // namespace usched::detail

namespace usched {

std::ostream& operator<<(std::ostream& os, fiber_id id) { return os << "fiber#" << id.value(); }

}  // namespace usched
