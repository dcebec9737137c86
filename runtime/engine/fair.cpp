// fair.cpp: the fair discipline (CFS's local half, v5.9/v5.10 fair.c): the
// vruntime timeline, accounting of the running fiber, slices, and the
// wake-up and tick preemption checks. Its per-switch parts (min_vruntime,
// sleeper credit, set_next_entity) are inline, in engine_inline.hpp.
#include "engine.hpp"

#include <algorithm>
#include <mutex>

namespace usched::detail {

// The timeline's order and its shortcuts are its own (timeline.hpp): a
// burst of spawns joins the sorted run at its top end, a woken fiber's
// sleeper credit usually puts it at the tree's left end.
// Under EEVDF the order is the tree's (eevdf.cpp).
void engine::timeline_insert(runqueue& q, sched_entity* se) noexcept {
  if (eevdf_) return ev_enqueue(q, *se);
  q.timeline.insert(*se);
}

void engine::timeline_erase(runqueue& q, sched_entity* se) noexcept {
  // The fiber leaves the queue: the hand-off may no longer name it.
  if (se == q.handoff) q.handoff = nullptr;
  if (eevdf_) return ev_dequeue(q, *se);
  q.timeline.erase(*se);
}

sched_entity* engine::queue_first(runqueue& q) noexcept {
  if (eevdf_) return ev_pick_next(q);
  if (fair_) return q.timeline.leftmost();
  return q.head;
}

// update_curr(): charge the running fiber for the time since it was last
// accounted (the kernel's update_curr()).
void engine::update_curr(runqueue& q, const now_source& now) noexcept {
  sched_entity* c = q.curr;
  // Only the fair discipline keeps time: FIFO and LIFO read no clock here.
  if (!c || !fair_) return;
  const std::int64_t t = now();
  const std::int64_t delta = t - c->exec_start;
  if (delta <= 0) return;
  c->exec_start = t;
  if (eevdf_) {
    c->vruntime += calc_delta_fair(delta, c->weight);
    ev_update_curr(static_cast<int>(&q - rqs_.get()), q, *c);
    return;
  }
  c->sum_exec += delta;
  c->vruntime += calc_delta_fair(delta, c->weight);
  update_min_vruntime(q);
}

engine::foreign_mark engine::foreign_begin(int cpu, sched_entity* se, const now_source& now) {
  foreign_mark m;
  if (!fair_) return m;
  runqueue& q = rq(cpu);
  std::lock_guard<spinlock> g(q.lock);
  if (q.curr != se) return m;
  update_curr(q, now);
  m.se = se;
  m.vruntime = se->vruntime;
  if (eevdf_) {
    m.deadline = se->ev.deadline;
    m.begun = now();
  } else {
    m.sum_exec = se->sum_exec;
  }
  return m;
}

void engine::foreign_end(int cpu, const foreign_mark& m, const now_source& now) {
  if (!m.se) return;
  runqueue& q = rq(cpu);
  std::lock_guard<spinlock> g(q.lock);
  if (q.curr != m.se) return;
  m.se->vruntime = m.vruntime;
  const std::int64_t t = now();
  if (eevdf_) {
    m.se->ev.deadline = m.deadline;
    // Its run's start moves by the foreign time, as sum_exec's restore
    // moves it under CFS.
    q.ev_picked_at += t - m.begun;
  } else {
    m.se->sum_exec = m.sum_exec;
  }
  m.se->exec_start = t;
}

// sched_slice(): the wall-clock share of the period a fiber may run before
// the tick preempts it: period x weight / total weight, where the period is
// sched_latency, stretched when more than sched_nr_latency fibers share it.
std::int64_t engine::sched_slice(const runqueue& q, const sched_entity& se) const noexcept {
  if (!fair_) return cfg_.fifo_slice_ns;
  // A fiber not yet on the queue counts as if it were (sched_slice()).
  const bool counted = se.on_rq.load(std::memory_order_relaxed);
  const unsigned nr = q.nr_running + (counted ? 0 : 1);
  const unsigned long total = q.load_weight + (counted ? 0 : se.weight);
  // The weights sum to nr times se's (all of one weight, the common case):
  // period x weight / total is then exactly period / nr, which is the
  // minimum granularity past sched_nr_latency and a table entry below it.
  if (total == static_cast<unsigned long>(nr) * se.weight) {
    if (nr > nr_latency_) return cfg_.min_granularity_ns;
    if (nr < equal_slice_.size()) return equal_slice_[nr];
  }
  const std::int64_t period =
      nr > nr_latency_ ? static_cast<std::int64_t>(nr) * cfg_.min_granularity_ns : cfg_.sched_latency_ns;
  return static_cast<std::int64_t>(static_cast<unsigned long>(period) * se.weight / std::max(total, 1ul));
}

// check_preempt(): a fiber just arrived on `q`; if its vruntime is smaller
// than the running fiber's by more than the wake-up granularity (scaled to
// the arriving fiber's weight), ask the running fiber to yield at its next
// preempt point (check_preempt_wakeup / wakeup_preempt_entity).
void engine::check_preempt(int cpu, runqueue& q, sched_entity& se) noexcept {
  if (eevdf_) return ev_check_preempt(cpu, q, se);
  if (!fair_ || !q.curr) return;
  const std::int64_t vdiff = static_cast<std::int64_t>(q.curr->vruntime - se.vruntime);
  const auto gran = static_cast<std::int64_t>(calc_delta_fair(cfg_.wakeup_granularity_ns, se.weight));
  if (vdiff > gran && !q.need_resched.load(std::memory_order_relaxed)) {
    q.resched_cause.store(static_cast<std::uint8_t>(stop_reason::preempt_wakeup), std::memory_order_relaxed);
    q.need_resched.store(true, std::memory_order_relaxed);
    counters_[static_cast<std::size_t>(cpu)].wakeup_preemptions.add();
  }
}

// check_preempt_tick(): the tick's end of a slice (the kernel's
// check_preempt_tick(), v5.9/v5.10 fair.c). The slice is recomputed from
// the runqueue as it is now, not kept from the pick: a fiber picked alone
// got the whole period, and a fiber that arrived since shortens it. The
// running fiber yields once it has run longer than that slice since it
// was picked, or, after min_granularity, once its vruntime leads the
// leftmost queued fiber's by more than the slice (a virtual time against
// a wall-clock one, as in the kernel). Called with q locked, curr just
// accounted and another fiber runnable.
void engine::check_preempt_tick(int cpu, runqueue& q) noexcept {
  sched_entity* curr = q.curr;
  set_slice(q, *curr);
  const std::int64_t ideal = q.slice_ns;
  const std::int64_t ran = curr->sum_exec - curr->prev_sum_exec;
  bool resched = ran > ideal;
  if (!resched && ran >= cfg_.min_granularity_ns) {
    if (const sched_entity* first = queue_first(q)) {
      const auto lead = static_cast<std::int64_t>(curr->vruntime - first->vruntime);
      resched = lead > ideal;
    }
  }
  if (resched && !q.need_resched.load(std::memory_order_relaxed)) {
    q.resched_cause.store(static_cast<std::uint8_t>(stop_reason::preempt_tick), std::memory_order_relaxed);
    q.need_resched.store(true, std::memory_order_relaxed);
    counters_[static_cast<std::size_t>(cpu)].tick_preemptions.add();
  }
}

}  // namespace usched::detail
