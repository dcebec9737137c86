// join.cpp: the join hand-off (engine_config::join_handoff). A joiner
// hands its worker to the fiber it joins when that one waits in the same
// queue, and an exiting fiber hands its worker back to a joiner that last
// ran there, so that fork-join code runs depth-first under every
// discipline. The kernel has no join; these are the engine's own.
#include "engine.hpp"

#include <cassert>

namespace usched::detail {

bool engine::hand_off(int cpu, sched_entity* target) {
  if (!cfg_.join_handoff) return false;
  runqueue& q = rq(cpu);
  // Queued here (on_rq, on this runqueue, not running): only under q's lock
  // can it be neither stolen nor picked meanwhile.
  if (!target->on_rq.load(std::memory_order_relaxed)) return false;
  q.lock.lock();
  // on_rq first: a thief attaching the fiber to its own runqueue writes cpu
  // before on_rq (release), under its own lock, not ours; read the other
  // way round, a cpu from before its steal and an on_rq from after it
  // would pass for "queued here". With our lock held, on_rq and then our
  // own index in cpu mean it is ours: queued, or running (curr).
  const bool queued =
      target->on_rq.load(std::memory_order_acquire) && target->cpu.load(std::memory_order_relaxed) == cpu &&
      target != q.curr && !(target->ev_flags & ev_delayed);
  if (queued) make_next(cpu, q, target);
  q.lock.unlock();
  return queued;
}

wake_result engine::wake_joiner(sched_entity* joiner, int cpu, std::uint64_t random,
                                std::vector<cpu_snapshot>& scratch, const now_source& now) {
  if (!hands_back(*joiner, cpu)) {
    return wake_up(joiner, placement_kind::wake, wake_reason::join, cpu, random, scratch, now);
  }
  return queue_joiner(joiner, cpu, now);
}

wake_result engine::queue_joiner(sched_entity* joiner, int cpu, const now_source& now) {
  wake_result r;
  // Traced: who it is, and the time, read before it can run again.
  std::uint64_t id = 0;
  if (tracer_) [[unlikely]] {
    id = trace_id(joiner);
    now();
  }
  int requeued = -1;
  if (wake_running(joiner, wake_reason::join, now, cpu, true, &requeued)) {
    if (tracer_) [[unlikely]] {
      trace_wakeup(id, placement_kind::wake, wake_reason::join, cpu, true, cpu, cpu, true, now);
    }
    return requeued >= 0 ? requeued_result(requeued) : r;
  }
  // Its previous worker, as a placement that kept it there would count it.
  counters_[static_cast<std::size_t>(cpu)].wake_prev.add();
  r.cpu = cpu;
  const unsigned queued = enqueue(cpu, joiner, enqueue_kind::wakeup, now, true, wake_reason::join, cpu);
  if (tracer_) [[unlikely]] trace_wakeup(id, placement_kind::wake, wake_reason::join, cpu, true, cpu, cpu, false, now);
  r.notify = false;
  // The joiner runs next, in the exiting fiber's place: only others queued
  // behind it are work for an idle worker.
  r.kick = queued > 1 && traits_.pulls_when_idle && !rq(cpu).idle.load(std::memory_order_relaxed);
  return r;
}

pick_result engine::exit_to_joiner(int cpu, sched_entity* prev, sched_entity* joiner, const now_source& now) {
  if (tracer_) [[unlikely]] {
    now();
    const pick_result r = exit_to_joiner_untraced(cpu, prev, joiner, now);
    if (r.next != prev) trace_switch(cpu, prev, stop_reason::exit, false, r.next, now);
    return r;
  }
  return exit_to_joiner_untraced(cpu, prev, joiner, now);
}

pick_result engine::exit_to_joiner_untraced(int cpu, sched_entity* prev, sched_entity* joiner,
                                            const now_source& now) {
  assert(hands_back(*joiner, cpu));
  pick_result r;
  // Woken before it finished blocking (it cannot be, here: this worker runs
  // prev, and the caller holds the joiner's claim; the test is the one
  // wake_joiner() makes), or an active balance to serve at this switch
  // (its victim may be the joiner, queued): the two-step path.
  const auto two_steps = [&] {
    r.kick = queue_joiner(joiner, cpu, now).kick;
    r.next = pick_next(cpu, prev, prev_action::exit, now, &r.pushed_to);
    return r;
  };
  runqueue& q = rq(cpu);
  // EEVDF places the joiner by its lag, against the queue without prev:
  // the two steps, as the kernel's dequeue then enqueue.
  if (eevdf_) return two_steps();
  if (joiner->on_rq.load(std::memory_order_acquire)) [[unlikely]] return two_steps();
  q.lock.lock();
  if (q.active_balance_dst.load(std::memory_order_relaxed) >= 0) [[unlikely]] {
    q.lock.unlock();
    return two_steps();
  }
  assert(q.curr == prev);
  cpu_counters& c = counters_[static_cast<std::size_t>(cpu)];
  c.wake_prev.add();
  c.handoffs.add();
  // Made runnable and running in the same instant: a delay of 0, with no
  // stamp and no clock read.
  c.wakeups[static_cast<std::size_t>(wake_reason::join)].add();
  c.wake_latency[static_cast<std::size_t>(wake_reason::join)].record(0);
  if (fair_ || tracks_load()) {
    // The joiner's wake-up (enqueue(wakeup) onto the worker it last ran on:
    // no migration), less its queue insert.
    update_curr(q, now);
    if (tracks_load()) {
      update_load(q, now());
      pelt_update(joiner->avg, now(), joiner->weight, false, false);
      q.pelt.enqueue_runnable(joiner->avg);
      util_est_enqueue(q, *joiner);
    }
    if (fair_) place_woken(q, *joiner);
    // The exit (pick_next(exit)): prev's load leaves with it.
    leave_signals(q, *prev, prev_action::exit);
  }
  prev->wake_pending = false;
  // One runnable fiber for another: the count stays, the weight changes.
  q.load_weight = q.load_weight - prev->weight + joiner->weight;
  account_numa(cpu, q, *prev, -1);
  account_numa(cpu, q, *joiner, 1);
  joiner->on_rq.store(true, std::memory_order_release);
  // Last for prev, as in pick_next(): from here its memory may be reused.
  prev->on_rq.store(false, std::memory_order_release);
  q.curr = joiner;
  if (fair_) {
    set_next_entity(q, *joiner, now());
    q.min_vruntime_pub.store(q.min_vruntime, std::memory_order_relaxed);
    // Made next and then taken off the timeline, it left no hand-off.
    q.handoff = nullptr;
  }
  q.need_resched.store(false, std::memory_order_relaxed);
  q.idle.store(false, std::memory_order_relaxed);
  if (tracks_load()) publish_load(q);
  note_overload(q);
  const unsigned queued = q.nr_queued.load(std::memory_order_relaxed);
  q.lock.unlock();
  if (tracer_) [[unlikely]] {
    trace_wakeup(trace_id(joiner), placement_kind::wake, wake_reason::join, cpu, true, cpu, cpu, false, now);
  }
  r.next = joiner;
  r.kick = queued > 0 && traits_.pulls_when_idle;
  return r;
}

}  // namespace usched::detail
