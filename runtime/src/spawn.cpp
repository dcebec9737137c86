// spawn.cpp: a fiber's life from spawn to recycle: its control block and
// task frame taken from the pool, its start, its exit and the end of its
// joiner's wait, join and detach, and the return of its memory to the pool
// when the last reference goes.
#include <new>
#include <ostream>
#include <stdexcept>
#include <string>

#include <usched/fiber.hpp>

#include "fatal.hpp"
#include "overflow.hpp"
#include "runtime_impl.hpp"

namespace usched::detail {

fiber_slot runtime_impl::allocate(std::size_t size, std::size_t align) {
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
  if (!frame) {
    try {
      frame = ::operator new(size, std::align_val_t(align));
    } catch (...) {
      discard(f, w);
      throw;
    }
    f->heap_frame = frame;
    f->heap_frame_align = align;
  }
  return {f, frame};
}

void runtime_impl::discard(fiber* f, worker* w) noexcept {
  if (f->heap_frame) {
    ::operator delete(f->heap_frame, std::align_val_t(f->heap_frame_align));
    f->heap_frame = nullptr;
  }
  if (w) {
    w->give_fiber(f);
  } else {
    pool_.give(&f, 1);
  }
}

void runtime_impl::start(fiber* f, task_base* task, const spawn_options& opts, worker* w) {
  f->rt = this;
  f->id.store(w ? w->next_fiber_id() : reserve_ids(1), std::memory_order_relaxed);
  f->task = task;
  f->pinned = opts.pin;
  f->preferred_node = opts.numa_node;
  f->weight = opts.weight;
  f->label.store(opts.label, std::memory_order_relaxed);
  f->cpu.store(-1, std::memory_order_relaxed);
  f->on_rq.store(false, std::memory_order_relaxed);
  f->wake_pending = false;
  // The time the fair discipline keeps; under FIFO and LIFO it is never
  // written and stays 0, and its cache lines stay where they are.
  if (engine_.fair()) {
    f->vruntime = 0;
    f->sum_exec = 0;
    f->prev_sum_exec = 0;
    f->exec_start = 0;
  }
  f->refs.store(2, std::memory_order_relaxed);
  f->done.store(false, std::memory_order_relaxed);
  f->detached = false;
  f->joiner = nullptr;
  f->on_cpu.store(false, std::memory_order_relaxed);
  sanitizer_unpoison_stack(f->ctx.stack_bottom, f->ctx.stack_size);
  // Its first frame is made where it first runs (worker::switch_to).
  f->ctx.fctx = nullptr;
  if (w) {
    w->spawned_.store(w->spawned_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  } else {
    external_spawned_.fetch_add(1, std::memory_order_relaxed);
  }
  try_to_wake_up(f, placement_kind::spawn, wake_reason::spawn, w);
}

fiber* runtime_impl::fiber_done(fiber* f, worker* w) noexcept {
  check_stack_canary(f, opts_.stack_size / 1024);
  f->join_lock.lock();
  f->done.store(true, std::memory_order_release);
  waitable* joiner = f->joiner;
  const std::uint64_t token = f->joiner_token;
  const bool detached = f->detached;
  // Claimed under join_lock: a joiner whose deadline or stop ended its
  // wait takes join_lock before it returns, so until then it (a thread's
  // parker, which ends with its thread) is still there to be claimed; once
  // we hold the claim, it waits for our resume_wait().
  const bool won = joiner && claim_wait(*joiner, token);
  f->join_lock.unlock();
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
  if (detached && f->task->error) report_detached_exception(f);
  w->exited_.store(w->exited_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  if (draining_.load(std::memory_order_relaxed)) [[unlikely]] {
    std::lock_guard<std::mutex> lk(live_mutex_);
    live_cv_.notify_all();
  }
  return handed;
}

void runtime_impl::drop_ref(fiber* f) noexcept {
  if (f->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  recycle(f, local_worker());
}

void runtime_impl::drop_ref(fiber* f, worker& w) noexcept {
  if (f->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  recycle(f, &w);
}

void runtime_impl::recycle(fiber* f, worker* w) noexcept {
  f->task->destroy(f->task);
  f->task = nullptr;
  discard(f, w);
}

// The kernel's weights for nice 19 and nice -20: the range a fiber's weight
// may take.
constexpr unsigned min_weight = 15;
constexpr unsigned max_weight = 88761;

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
}

}  // namespace

fiber_slot allocate_fiber(runtime_impl& rt, std::size_t size, std::size_t align,
                          const spawn_options& opts) {
  // The defaults are valid for every runtime; only other values are checked.
  const spawn_options defaults;
  if (opts.pin != defaults.pin || opts.numa_node != defaults.numa_node || opts.weight != defaults.weight) {
    check_spawn_options(rt, opts);
  }
  return rt.allocate(size, align);
}

// The calling thread's worker is looked up again here, not carried over from
// allocate_fiber(): constructing the task frame in between runs the caller's
// code (a move constructor), which may block, and the spawning fiber may then
// continue on another worker. start() passes it on to the placement.
void discard_fiber(runtime_impl& rt, fiber* f) noexcept { rt.discard(f, rt.local_worker()); }

void start_fiber(runtime_impl& rt, fiber* f, task_base* task, const spawn_options& opts) {
  rt.start(f, task, opts, rt.local_worker());
}

void join_fiber(fiber* f) { (void)join_fiber_until(f, no_deadline); }

bool join_fiber_until(fiber* f, std::int64_t deadline_ns, const std::stop_token& stop) {
  if (f->done.load(std::memory_order_acquire)) return true;
  if (deadline_ns == 0 || (has_timer(deadline_ns) && deadline_ns <= now_ns()) || stop.stop_requested()) {
    return false;
  }
  waitable& me = current_waitable();
  f->join_lock.lock();
  if (f->done.load(std::memory_order_relaxed)) {
    f->join_lock.unlock();
    return true;
  }
  const std::uint64_t token = prepare_wait(me, wait_kind::join, f);
  f->joiner = &me;
  f->joiner_token = token;
  f->join_lock.unlock();
  if (me.is_fiber) {
    // The join hand-off: a joinee still queued on this worker runs next, in
    // the joiner's place (depth-first fork-join), decided by the block's
    // own switch. Only within one runtime: a fiber of another is never run
    // by this one's workers.
    worker* w = worker_of_this_thread();
    auto& self = static_cast<fiber&>(me);
    fiber* const joined = f->rt == self.rt ? f : nullptr;
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
  // (under join_lock, where the exit reads it); a later join takes it again.
  // A fiber that finds done needs no lock: the exit may still be reading
  // f->joiner under it (its claim, if a timer or stop won, then fails on
  // the spent token), and a fiber's waitable outlives any such read (fibers
  // are pooled). A thread's parker ends with its thread: it waits for the
  // exit to leave the lock.
  if (me.is_fiber && f->done.load(std::memory_order_acquire)) return true;
  f->join_lock.lock();
  const bool done = f->done.load(std::memory_order_relaxed);
  if (!done && f->joiner == &me) f->joiner = nullptr;
  f->join_lock.unlock();
  return done;
}

bool fiber_finished(const fiber* f) noexcept { return f->done.load(std::memory_order_acquire); }

void release_fiber(fiber* f) noexcept { f->rt->drop_ref(f); }

void detach_fiber(fiber* f) noexcept {
  f->join_lock.lock();
  f->detached = true;
  const bool done = f->done.load(std::memory_order_relaxed);
  f->join_lock.unlock();
  if (done && f->task->error) report_detached_exception(f);
  f->rt->drop_ref(f);
}

std::uint64_t fiber_id_of(const fiber* f) noexcept { return f->id.load(std::memory_order_relaxed); }

}  // namespace usched::detail

namespace usched {

std::ostream& operator<<(std::ostream& os, fiber_id id) { return os << "fiber#" << id.value(); }

}  // namespace usched
