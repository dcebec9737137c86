// engine_inline.hpp: the engine's always-inline fast paths. A yield, a
// block and a local wake-up are a few of these around a context switch;
// they are defined here, in one place, so that each call site inlines them
// and a reader finds the whole switch path together. Included at the end
// of engine.hpp; not a header of its own.
#pragma once

#include <cassert>

#include "engine.hpp"

namespace usched::detail {

// ---- the switch: schedule() and its short paths, and the preempt point's question ---

[[gnu::always_inline]] inline pick_result engine::schedule(int cpu, sched_entity* prev, prev_action action,
    const now_source& now, sched_entity* joined) {
  if (tracer_) [[unlikely]] return schedule_traced(cpu, prev, action, now, joined);
  return schedule_untraced(cpu, prev, action, now, joined);
}

[[gnu::always_inline]] inline pick_result engine::schedule_untraced(int cpu, sched_entity* prev,
    prev_action action, const now_source& now, sched_entity* joined) {
  pick_result r;
  if (!fair_ && !tracks_load_) {
    if (action == prev_action::yield) {
      r.next = yield_fifo(cpu, prev, now, &r.pushed_to);
      return r;
    }
    if (action == prev_action::block || action == prev_action::exit) {
      r.next = leave_fifo(cpu, prev, action, now, joined);
      return r;
    }
  }
  if (fair_ && !eevdf_ && action == prev_action::yield) {
    r.next = yield_fair(cpu, prev, now, &r.pushed_to);
    return r;
  }
  r.next = pick_next(cpu, prev, action, now, &r.pushed_to, joined);
  return r;
}

// yield_fifo() is pick_next(cpu, prev, yield) for the FIFO discipline
// without load tracking, cut to what a yield needs: under the lock, the
// head leaves the queue and prev joins its tail (the queue's length does
// not change, so nothing is published). Returns prev when nothing else is
// queued. Requires !fair() && !tracks_load(); when an active balance has
// asked for the running fiber, it takes the full pick_next() path.
// Inline: it is most of a yield, and the worker's yield path is one
// function around it and the context switch.
[[gnu::always_inline]] inline sched_entity* engine::yield_fifo(int cpu, sched_entity* prev, const now_source& now,
    int* pushed_to) {
  assert(!fair_ && !tracks_load());
  runqueue& q = rq(cpu);
  if (q.active_balance_dst.load(std::memory_order_relaxed) >= 0) [[unlikely]] {
    return pick_next(cpu, prev, prev_action::yield, now, pushed_to);
  }
  if (q.nr_queued.load(std::memory_order_relaxed) == 0) return prev;
  q.lock.lock();
  sched_entity* next = q.head;
  if (!next) [[unlikely]] {
    q.lock.unlock();
    return prev;
  }
  assert(q.curr == prev);
  prev->wake_pending = false;
  // The head comes out, prev goes to the back. The list alone: the count
  // is the same after both (nothing to publish), only the pinned count
  // may change.
  list_unlink(q, next);
  if (next == q.runnext) q.runnext = nullptr;
  list_link(q, prev, false);
  if ((prev->pinned >= 0) != (next->pinned >= 0)) [[unlikely]] {
    const unsigned pinned = q.nr_pinned.load(std::memory_order_relaxed);
    q.nr_pinned.store(prev->pinned >= 0 ? pinned + 1 : pinned - 1, std::memory_order_relaxed);
  }
  q.curr = next;
  note_run(cpu, *next, now);
  if (q.need_resched.load(std::memory_order_relaxed)) q.need_resched.store(false, std::memory_order_relaxed);
  q.lock.unlock();
  return next;
}

// yield_fair() is pick_next(cpu, prev, yield) for the fair discipline,
// cut to what a yield between queued fibers needs. It makes the same decision
// as the full path (the same accounting, the same next fiber, the same
// tree afterwards) with less work:
// - one min_vruntime update after the swap instead of one before and one
//   after: the leftmost before the swap is the fiber that runs after it,
//   so both give the same value;
// - no insert of prev and erase of next when prev can take next's node:
//   next is the leftmost, so prev fits there whenever it sorts before
//   next's successor (two fibers yielding to each other always do), and
//   the tree is rewired in place (no rebalancing, no walk);
// - nothing at all changes in the tree when prev keeps the CPU (it leads
//   the leftmost by more than the wake-up granularity).
// An active balance waiting for this worker and a join's hand-off take
// pick_next(). Inline, as yield_fifo(): it is most of a yield. Requires
// fair().
[[gnu::always_inline]] inline sched_entity* engine::yield_fair(int cpu, sched_entity* prev, const now_source& now, int* pushed_to) {
  runqueue& q = rq(cpu);
  q.lock.lock();
  if (q.handoff || q.active_balance_dst.load(std::memory_order_relaxed) >= 0) [[unlikely]] {
    q.lock.unlock();
    return pick_next(cpu, prev, prev_action::yield, now, pushed_to);
  }
  assert(q.curr == prev);
  prev->wake_pending = false;
  // update_curr(), less its min_vruntime update (done once, below).
  const std::int64_t t = now();
  if (const std::int64_t delta = t - prev->exec_start; delta > 0) {
    prev->exec_start = t;
    prev->sum_exec += delta;
    prev->vruntime += calc_delta_fair(delta, prev->weight);
  }
  const bool load_changed = tracks_load() && update_load(q, t, false);
  const auto before = timeline<sched_entity>::before;
  sched_entity* const left = q.timeline.leftmost();
  // Alone on the worker, prev runs on (its slice starts again, as after
  // pick_next()'s requeue and pick of it).
  sched_entity* next = left ? left : prev;
  // Where prev would sort after its requeue: ahead of the leftmost only when
  // strictly before it (equal keys queue behind). Ahead, it would be picked
  // itself, and the yield then steps aside for the leftmost unless that one
  // is more than the granularity behind (yield_task_fair's skip buddy).
  if (next != prev && before(*prev, *next)) {
    const auto gran = static_cast<std::int64_t>(calc_delta_fair(cfg_.wakeup_granularity_ns, prev->weight));
    if (static_cast<std::int64_t>(next->vruntime - prev->vruntime) > gran) next = prev;
  }
  if (next != prev) {
    // The list: prev to the tail, next out (pick_next's insert, then remove).
    list_unlink(q, next);
    list_link(q, prev, false);
    if (!q.timeline.replace_leftmost(*next, *prev)) {
      timeline_erase(q, next);
      timeline_insert(q, prev);
    }
    if ((prev->pinned >= 0) != (next->pinned >= 0)) [[unlikely]] {
      const unsigned pinned = q.nr_pinned.load(std::memory_order_relaxed);
      q.nr_pinned.store(prev->pinned >= 0 ? pinned + 1 : pinned - 1, std::memory_order_relaxed);
    }
    q.curr = next;
    next->exec_start = t;
    note_run(cpu, *next, now);
  }
  // Picked (again): its slice starts now.
  next->prev_sum_exec = next->sum_exec;
  set_slice(q, *next);
  update_min_vruntime(q);
  if (q.need_resched.load(std::memory_order_relaxed)) q.need_resched.store(false, std::memory_order_relaxed);
  if (q.idle.load(std::memory_order_relaxed)) [[unlikely]] q.idle.store(false, std::memory_order_relaxed);
  q.min_vruntime_pub.store(q.min_vruntime, std::memory_order_relaxed);
  if (load_changed) publish_load(q);
  q.lock.unlock();
  return next;
}

inline bool engine::should_preempt(int cpu, std::int64_t ran_ns) const noexcept {
  const runqueue& q = rq(cpu);
  if (q.need_resched.load(std::memory_order_relaxed)) return true;
  if (fair_ || q.nr_queued.load(std::memory_order_relaxed) == 0) return false;
  return ran_ns >= q.slice_ns;
}

// ---- queue bookkeeping, under the runqueue's lock ------------------------------

inline void engine::list_link(runqueue& q, sched_entity* se, bool front) noexcept {
  if (front) {
    se->rq_prev = nullptr;
    se->rq_next = q.head;
    (q.head ? q.head->rq_prev : q.tail) = se;
    q.head = se;
  } else {
    se->rq_next = nullptr;
    se->rq_prev = q.tail;
    (q.tail ? q.tail->rq_next : q.head) = se;
    q.tail = se;
  }
}

inline void engine::list_unlink(runqueue& q, sched_entity* se) noexcept {
  (se->rq_prev ? se->rq_prev->rq_next : q.head) = se->rq_next;
  (se->rq_next ? se->rq_next->rq_prev : q.tail) = se->rq_prev;
  se->rq_next = se->rq_prev = nullptr;
}

// `front`: at the head of the FIFO list (the LIFO discipline's push).
// `publish`: the insert makes a fiber runnable that its worker may not
// know about (a wake-up, a spawn, a migration): the count is stored
// seq_cst for the park protocol. A requeue by the running worker itself
// needs no such ordering and skips the fence the seq_cst store costs.
// Inline (the timeline's part is not): every enqueue and pick runs them.
inline void engine::queue_insert(runqueue& q, sched_entity* se, bool publish, bool front, bool in_tree) noexcept {
  list_link(q, se, front);
  if (fair_ && !in_tree) timeline_insert(q, se);
  if (se->pinned >= 0) {
    q.nr_pinned.store(q.nr_pinned.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  // seq_cst: this store and the pusher's later read of the worker's park
  // word pair with the parker's write of its park word and read of this
  // count (worker.cpp, idle_wait), so one side always sees the other.
  q.nr_queued.store(q.nr_queued.load(std::memory_order_relaxed) + 1,
                    publish ? std::memory_order_seq_cst : std::memory_order_relaxed);
}

inline void engine::queue_remove(runqueue& q, sched_entity* se) noexcept {
  list_unlink(q, se);
  if (se == q.runnext) q.runnext = nullptr;
  if (fair_) timeline_erase(q, se);
  if (se->pinned >= 0) {
    q.nr_pinned.store(q.nr_pinned.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  }
  q.nr_queued.store(q.nr_queued.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
}

// add_runnable() is the end of every enqueue, under q's lock: se counts
// as runnable on `cpu` and joins the queue. The count is published
// seq_cst even for a local spawn: the store then precedes the spawner's
// look at the parked workers (runtime_impl::kick_idle), which a parked
// worker's announce-then-look pairs with. Under LIFO every spawned or
// woken fiber goes to the front; under FIFO only a local spawn does, into
// the runnext slot, and the fiber that held the slot goes to the back like
// any other queued fiber.
inline void engine::add_runnable(int cpu, runqueue& q, sched_entity* se, enqueue_kind kind) noexcept {
  se->cpu.store(cpu, std::memory_order_relaxed);
  // Release: cpu before on_rq, for hand_off() under another lock (a
  // plain store on x86).
  se->on_rq.store(true, std::memory_order_release);
  ++q.nr_running;
  q.load_weight += se->weight;
  account_numa(cpu, q, *se, 1);
  const bool run_next = !fair_ && !lifo_ && kind == enqueue_kind::spawn_local;
  if (run_next && q.runnext) {
    list_unlink(q, q.runnext);
    list_link(q, q.runnext, false);
  }
  queue_insert(q, se, true, lifo_ || run_next);
  if (run_next) q.runnext = se;
  note_overload(q);
}

// make_next() makes `se`, queued on q, q's next pick (the join hand-off),
// under q's lock: the head of the FIFO or LIFO list, or the fair
// discipline's hand-off slot.
inline void engine::make_next(int cpu, runqueue& q, sched_entity* se) noexcept {
  if (fair_) {
    q.handoff = se;
  } else if (q.head != se) {
    list_unlink(q, se);
    list_link(q, se, true);
  }
  counters_[static_cast<std::size_t>(cpu)].handoffs.add();
}

// take_handoff(): under q's lock, hand_off()'s test and effect: `joined`
// (which prev, blocking, waits for) runs next if it is queued on q.
inline void engine::take_handoff(int cpu, runqueue& q, sched_entity* joined) noexcept {
  if (!cfg_.join_handoff) return;
  // on_rq before cpu: see hand_off().
  if (joined->on_rq.load(std::memory_order_acquire) && joined->cpu.load(std::memory_order_relaxed) == cpu &&
      joined != q.curr && !(joined->ev_flags & ev_delayed)) {
    make_next(cpu, q, joined);
  }
}

// ---- the fair discipline's and load tracking's per-switch parts, under the lock ---

// update_load(): PELT of the running fiber and of the runqueue, to `now`.
// Returns true when the runqueue's averages (or its removed contributions)
// changed, so that they need publishing. `rq_inputs_change` is false when the
// caller is about to swap the running fiber for a queued one: the
// runqueue's weight, count and running state stay the same, so its own
// accrual can wait for the end of the period (pelt_period_due); the kernel
// accrues it on every switch, which costs this path a second update per
// PELT unit for nothing.
[[gnu::always_inline]] inline bool engine::update_load(runqueue& q, std::int64_t now, bool rq_inputs_change) noexcept {
  bool changed = false;
  // Plain loads first: removals are rare, and three locked exchanges on
  // every switch would cost more than the rest of load tracking.
  if (q.removed_load.load(std::memory_order_relaxed) | q.removed_util.load(std::memory_order_relaxed) |
      q.removed_runnable.load(std::memory_order_relaxed)) {
    const unsigned long rl = q.removed_load.exchange(0, std::memory_order_relaxed);
    const unsigned long ru = q.removed_util.exchange(0, std::memory_order_relaxed);
    const unsigned long rr = q.removed_runnable.exchange(0, std::memory_order_relaxed);
    q.pelt.remove(rl, ru, rr);
    changed = true;
  }
  // The running fiber accrues whole PELT units (1024 ns): under one since
  // its last update, pelt_update_running() would add nothing (a switch
  // between fibers that run for tens of ns, a yield loop, skips it).
  if (sched_entity* c = q.curr; c && static_cast<std::uint64_t>(now - c->avg.last_update) >> pelt_time_shift) {
    // update_curr() has run: sum_exec - prev_sum_exec is the time since the
    // pick.
    const std::int64_t picked = eevdf_ ? q.ev_picked_at : now - (c->sum_exec - c->prev_sum_exec);
    pelt_update_running(c->avg, now, picked, c->weight);
  }
  if (!rq_inputs_change && !changed) {
    return q.pelt.update_unchanged(now, q.load_weight, q.nr_running, q.curr != nullptr);
  }
  return q.pelt.update(now, q.load_weight, q.nr_running, q.curr != nullptr) || changed;
}

// update_min_vruntime(): min_vruntime follows the smaller of the running
// fiber's and the leftmost queued fiber's vruntime, forward only.
inline void engine::update_min_vruntime(runqueue& q) noexcept {
  // EEVDF's reference point is zero_vruntime, kept by its tree's inserts
  // and erases.
  if (eevdf_) return;
  std::uint64_t v = q.min_vruntime;
  bool have = false;
  if (q.curr) {
    v = q.curr->vruntime;
    have = true;
  }
  if (const sched_entity* first = q.timeline.leftmost()) {
    const std::uint64_t left = first->vruntime;
    v = have && static_cast<std::int64_t>(v - left) < 0 ? v : left;
    have = true;
  }
  // Monotonic: min_vruntime only moves forward.
  if (have && static_cast<std::int64_t>(v - q.min_vruntime) > 0) q.min_vruntime = v;
}

// place_woken(): sleeper credit (place_entity, GENTLE_FAIR_SLEEPERS): a
// woken fiber may be at most half a latency period behind min_vruntime,
// so it runs soon but cannot bank unbounded credit by sleeping.
inline void engine::place_woken(const runqueue& q, sched_entity& se) const noexcept {
  const std::uint64_t floor = q.min_vruntime - static_cast<std::uint64_t>(cfg_.sched_latency_ns / 2);
  if (static_cast<std::int64_t>(se.vruntime - floor) < 0) se.vruntime = floor;
}

// leave_signals(): a fiber that blocks or exits leaves q's runnable
// signals; a finished fiber's load leaves with it, a blocked one's stays
// and decays. Nothing without load tracking.
inline void engine::leave_signals(runqueue& q, sched_entity& se, prev_action action) noexcept {
  if (!tracks_load()) return;
  q.pelt.dequeue_runnable(se.avg);
  util_est_dequeue(q, se, action == prev_action::block);
  if (action == prev_action::exit) q.pelt.detach(se.avg);
}

// set_next_entity(): se, now q.curr, starts running at `t` (the fair
// discipline's part of the kernel's set_next_entity()): its slice begins
// and min_vruntime follows.
inline void engine::set_next_entity(runqueue& q, sched_entity& se, std::int64_t t) noexcept {
  se.exec_start = t;
  if (eevdf_) {
    // EEVDF ends a run by the deadline, not by a slice of the period.
    q.ev_picked_at = t;
    set_protect_slice(q, se);
    return;
  }
  se.prev_sum_exec = se.sum_exec;
  set_slice(q, se);
  update_min_vruntime(q);
}

// set_slice(): q.slice_ns = sched_slice(q, se), where se counts on q (the
// running fiber). The slice changes only with the runqueue's count and
// weight and the fiber's weight, which a switch between two fibers of
// the same weight leaves as they were: then the division is skipped.
inline void engine::set_slice(runqueue& q, const sched_entity& se) noexcept {
  if (q.slice_nr == q.nr_running && q.slice_total == q.load_weight && q.slice_weight == se.weight) return;
  q.slice_ns = sched_slice(q, se);
  q.slice_nr = q.nr_running;
  q.slice_total = q.load_weight;
  q.slice_weight = se.weight;
}

// ---- the overload flag ---------------------------------------------------------

// Whether q holds a fiber another worker could take: queued, unpinned,
// and not the only runnable one (an idle worker's single queued fiber is
// about to run there). Lock-free; the seq_cst load of the count is the
// clearer's half of the overload hand-shake.
inline bool engine::has_movable(const runqueue& q) noexcept {
  const unsigned queued = q.nr_queued.load(std::memory_order_seq_cst);
  return queued > q.nr_pinned.load(std::memory_order_relaxed) &&
         (queued >= 2 || !q.idle.load(std::memory_order_relaxed));
}

// note_overload(): q (locked) just gained a runnable fiber; set the flag
// if that made it overloaded. Reads before it writes, so the flag's line
// stays shared while it is set.
inline void engine::note_overload(const runqueue& q) noexcept {
  if (q.nr_running >= 2 && q.nr_queued.load(std::memory_order_relaxed) > q.nr_pinned.load(std::memory_order_relaxed) &&
      !overload_.flag.load(std::memory_order_seq_cst)) {
    overload_.flag.store(true, std::memory_order_seq_cst);
  }
}

// ---- the kick ----------------------------------------------------------------

template <class Idle>
inline kick_result engine::kick(int busy_cpu, bool pull, Idle&& idle) const {
  kick_result r;
  const bool spinning = idle.nr_spinning() > 0;
  if (spinning && !pull) return r;
  if (!spinning && idle.nr_parked() == 0) return r;
  const std::uint64_t random = idle.random();
  // From a random start, the first worker other than busy_cpu that takes
  // the kick; -1 for none.
  const auto first_taker = [&](auto&& takes) {
    const int n = static_cast<int>(nr_cpus());
    const int start = static_cast<int>(random % static_cast<std::uint64_t>(n));
    for (int i = 0; i < n; ++i) {
      const int cpu = (start + i) % n;
      if (cpu != busy_cpu && takes(cpu)) return cpu;
    }
    return -1;
  };
  if (spinning && first_taker([&](int cpu) { return idle.tell_spinning(cpu); }) >= 0) return r;
  r.cpu = first_taker([&](int cpu) { return idle.parked(cpu); });
  r.pull = r.cpu >= 0 && pull;
  return r;
}

}  // namespace usched::detail
