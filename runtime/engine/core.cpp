// core.cpp: the engine's events, the kernel's core.c: a wake-up
// (try_to_wake_up: placement, then enqueue), the switch's full pick, the
// idle worker's look for work, and the tick. The short paths of the
// switch are in engine_inline.hpp; what an event's decision rests on is
// in placement.cpp, fair.cpp, load.cpp and balance.cpp.
#include "engine.hpp"

#include <algorithm>
#include <cassert>

namespace usched::detail {

wake_result engine::wake_up(sched_entity* se, placement_kind kind, wake_reason why, int origin,
                            std::uint64_t random, std::vector<cpu_snapshot>& scratch, const now_source& now,
                            bool by_origin) {
  wake_result r;
  // Traced: who it is and where it last ran, read before it can run again.
  std::uint64_t id = 0;
  int prev_cpu = -1;
  if (tracer_) [[unlikely]] {
    now();
    id = trace_id(se);
    if (kind == placement_kind::wake) prev_cpu = se->cpu.load(std::memory_order_relaxed);
  }
  // Woken before it finished blocking: it keeps its place on its worker
  // (or, delayed under EEVDF, is runnable there again).
  int requeued = -1;
  if (kind == placement_kind::wake && wake_running(se, why, now, origin, false, &requeued)) {
    if (tracer_) [[unlikely]] trace_wakeup(id, kind, why, origin, by_origin, prev_cpu, prev_cpu, true, now);
    return requeued >= 0 ? requeued_result(requeued) : r;
  }
  r.cpu = select_cpu(kind, *se, origin, random, scratch, now, by_origin);
  // A spawn onto the spawner's own worker (a spawn's origin is the worker
  // whose running fiber spawns): no one is parked there to be told (the
  // kernel's wake_up_new_task on this CPU). Decided without reading the
  // runqueue, whose line a thief may hold until the enqueue takes it.
  enqueue_kind how = enqueue_kind::wakeup;
  if (kind == placement_kind::spawn) how = origin == r.cpu ? enqueue_kind::spawn_local : enqueue_kind::spawn;
  // Read before the enqueue, after which the fiber may be another worker's.
  const bool stayed = stays_unbalanced(kind, *se, origin);
  // Traced: whether the running fiber there was asked to yield already,
  // so that the record says whether this enqueue asked it.
  bool asked_before = false;
  if (tracer_) [[unlikely]] asked_before = rq(r.cpu).need_resched.load(std::memory_order_relaxed);
  const unsigned queued = enqueue(r.cpu, se, how, now, false, why, origin);
  if (tracer_) [[unlikely]] {
    if (prev_cpu >= 0 && prev_cpu != r.cpu) trace_migrate(id, prev_cpu, r.cpu, migrate_cause::wake, -1, origin, now);
    trace_wakeup(id, kind, why, origin, by_origin, prev_cpu, r.cpu, false, now, asked_before);
  }
  r.notify = how != enqueue_kind::spawn_local;
  r.kick = queued > 0 && traits_.pulls_when_idle && !rq(r.cpu).idle.load(std::memory_order_relaxed);
  // A work stealer's spinning worker finds the fiber by itself: a plain kick.
  r.pull = r.kick && stayed && !idle_pulls_by_itself();
  return r;
}

wake_result engine::requeued_result(int cpu) const noexcept {
  wake_result r;
  r.cpu = cpu;
  r.kick = traits_.pulls_when_idle && rq(cpu).nr_queued.load(std::memory_order_relaxed) > 0;
  return r;
}

bool engine::wake_running(sched_entity* se, wake_reason why, const now_source& now, int waker, bool handoff,
                          int* requeued) {
  // on_rq goes false only when the fiber's own worker dequeues it (under
  // the lock), and true only by an enqueue, which only this waker (the one
  // that claimed the wait) can do now: a false read is final.
  if (!se->on_rq.load(std::memory_order_acquire)) return false;
  const int cpu = se->cpu.load(std::memory_order_relaxed);
  runqueue& q = rq(cpu);
  q.lock.lock();
  const bool still = se->on_rq.load(std::memory_order_relaxed);
  if (still && (se->ev_flags & ev_delayed)) {
    // EEVDF's delayed dequeue: it blocked with negative lag and is still
    // queued here, not runnable; it becomes runnable where it is, with no
    // placement (ttwu_runnable()).
    ev_requeue_delayed(cpu, q, *se, now);
    if (requeued) *requeued = cpu;
    count_wakeup(cpu, *se, why, now, waker);
    if (handoff) {
      make_next(cpu, q, se);
    } else {
      ev_check_preempt(cpu, q, *se);
    }
    publish(q);
  } else if (still) {
    se->wake_pending = true;
    count_wakeup(cpu, *se, why, now, waker);
  }
  q.lock.unlock();
  return still;
}

unsigned engine::enqueue(int cpu, sched_entity* se, enqueue_kind kind, const now_source& now, bool handoff,
                         std::optional<wake_reason> why, int waker) {
  if (!fair_ && !tracks_load_) return enqueue_fifo(cpu, se, kind, handoff, why, now, waker);
  runqueue& q = rq(cpu);
  // The fiber's vruntime and load were last kept relative to the worker it
  // left; read that worker's min_vruntime before taking our own lock (no
  // two locks at once; a slightly stale value only shifts the placement).
  const int from = se->cpu.load(std::memory_order_relaxed);
  const bool migrated = kind == enqueue_kind::wakeup && from >= 0 && from != cpu;
  std::uint64_t from_min = 0;
  if (fair_ && !eevdf_ && migrated) from_min = rq(from).min_vruntime_pub.load(std::memory_order_relaxed);
  if (tracks_load() && migrated) {
    // Its blocked contribution leaves the old worker's signals.
    pelt_update(se->avg, now(), se->weight, false, false);
    runqueue& old = rq(from);
    old.removed_load.fetch_add(se->avg.load_avg, std::memory_order_relaxed);
    old.removed_util.fetch_add(se->avg.util_avg, std::memory_order_relaxed);
    old.removed_runnable.fetch_add(se->avg.runnable_avg, std::memory_order_relaxed);
  }

  q.lock.lock();
  if (tracks_load() || fair_) {
    update_curr(q, now);
    if (tracks_load()) {
      update_load(q, now());
      if (kind != enqueue_kind::wakeup) {
        // A new fiber starts as if always runnable (load = weight) and with
        // half the worker's spare utilization (init_entity_runnable_average,
        // post_init_entity_util_avg).
        se->avg = pelt_avg{};
        se->util_est_enqueued = 0;
        se->util_est_ewma = 0;
        se->avg.load_avg = se->weight;
        const unsigned long util = q.pelt.all.util_avg;
        const unsigned long cap = capacity_scale > util ? (capacity_scale - util) / 2 : 0;
        unsigned long u = cap;
        if (util) u = std::min(cap, util * se->weight / (q.pelt.all.load_avg + 1));
        se->avg.util_avg = u;
        se->avg.runnable_avg = u;
        q.pelt.attach(se->avg, se->weight);
      } else if (migrated) {
        q.pelt.attach(se->avg, se->weight);
        // Cold on its new worker (migrate_task_rq_fair resets exec_start).
        se->exec_start = 0;
      } else {
        pelt_update(se->avg, now(), se->weight, false, false);
      }
      q.pelt.enqueue_runnable(se->avg);
      util_est_enqueue(q, *se);
    }
  }
  if (eevdf_) {
    // Placed by its lag, kept from when it left (a new fiber has none),
    // wherever it left from: the lag is relative to each queue's average.
    if (kind != enqueue_kind::wakeup) se->vlag = 0;
    place_entity(q, *se, kind != enqueue_kind::wakeup);
  } else if (fair_) {
    if (kind != enqueue_kind::wakeup) {
      // A new fiber starts one slice behind the others (START_DEBIT), so
      // spawning cannot be used to jump the queue.
      se->vruntime = q.min_vruntime + calc_delta_fair(sched_slice(q, *se), se->weight);
    } else {
      if (migrated) se->vruntime = se->vruntime - from_min + q.min_vruntime;
      place_woken(q, *se);
    }
  }
  add_runnable(cpu, q, se, kind);
  if (why) count_wakeup(cpu, *se, *why, now, waker);
  if (handoff) {
    make_next(cpu, q, se);
  } else if (kind == enqueue_kind::wakeup) {
    check_preempt(cpu, q, *se);
  }
  publish(q);
  const unsigned queued = q.nr_queued.load(std::memory_order_relaxed);
  q.lock.unlock();
  return queued;
}

// enqueue() for FIFO and LIFO without load tracking: what is left of it
// when there is no clock, no vruntime, no preemption check and nothing to
// publish but the count.
unsigned engine::enqueue_fifo(int cpu, sched_entity* se, enqueue_kind kind, bool handoff,
                              std::optional<wake_reason> why, const now_source& now, int waker) noexcept {
  runqueue& q = rq(cpu);
  q.lock.lock();
  add_runnable(cpu, q, se, kind);
  if (why) count_wakeup(cpu, *se, *why, now, waker);
  if (handoff) make_next(cpu, q, se);
  const unsigned queued = q.nr_queued.load(std::memory_order_relaxed);
  q.lock.unlock();
  return queued;
}

sched_entity* engine::pick_next(int cpu, sched_entity* prev, prev_action action, const now_source& now,
                               int* pushed_to, sched_entity* joined) {
  if (!fair_ && !tracks_load_ && prev && (action == prev_action::block || action == prev_action::exit)) {
    return leave_fifo(cpu, prev, action, now, joined);
  }
  runqueue& q = rq(cpu);
  const bool yielding = action == prev_action::yield;
  if (yielding) action = prev_action::requeue;
  q.lock.lock();
  if (joined) take_handoff(cpu, q, joined);
  if (prev && action == prev_action::block && prev->wake_pending) action = prev_action::requeue;
  bool load_changed = false;
  // EEVDF: the running fiber keeps the worker, requeued, while its slice
  // is protected (the pick's RUN_TO_PARITY, tested before it rejoins the
  // tree, as the kernel's pick sees curr outside it).
  bool keep_prev = false;
  // EEVDF's delayed dequeue: prev blocks with negative lag and stays queued.
  bool delayed = false;
  // prev's protected vruntime, which its requeue into the tree overwrites
  // (the union with its subtree's smallest vruntime): a re-pick of the
  // running fiber keeps it (the kernel does not set the next entity again).
  std::uint64_t prev_vprot = 0;
  if (prev) {
    prev->wake_pending = false;
    assert(q.curr == prev);
    update_curr(q, now);
    const bool requeue = action == prev_action::requeue;
    if (eevdf_) {
      prev_vprot = prev->vprot;
      if (yielding) ev_yield(q, *prev);
      if (requeue) {
        keep_prev = !yielding && ev_nr_queued(q) > 1 && entity_eligible(q, *prev) && protect_slice(*prev);
      } else if (action == prev_action::block) {
        delayed = ev_block(q, *prev);
      }
    }
    if (tracks_load()) load_changed = update_load(q, now(), !requeue);
    q.curr = nullptr;
    if (requeue) {
      queue_insert(q, prev, false);
    } else if (delayed) {
      // Out of the runnable counts, into the tree alone; still on_rq, for
      // its waker to find it here.
      --q.nr_running;
      q.load_weight -= prev->weight;
      account_numa(cpu, q, *prev, -1);
      leave_signals(q, *prev, action);
      load_changed = true;
      ev_enqueue(q, *prev);
    } else {
      --q.nr_running;
      q.load_weight -= prev->weight;
      account_numa(cpu, q, *prev, -1);
      leave_signals(q, *prev, action);
      load_changed = true;
      // Last: from here a waker that claimed the fiber may enqueue it (and
      // update its load signals) elsewhere; the release orders our reads of
      // them before that.
      prev->on_rq.store(false, std::memory_order_release);
    }
  }
  // An active balance asked of this worker is served at its running
  // fiber's first switch after the request, whatever the switch is: the
  // kernel's stopper runs before the task it preempted can do anything
  // else. (An idle worker's pick has no fiber switching away; the request
  // waits for the next one.)
  sched_entity* pushed = nullptr;
  int push_dst = -1;
  bool numa_push = false;
  if (prev && q.active_balance_dst.load(std::memory_order_relaxed) >= 0) [[unlikely]] {
    push_dst = q.active_balance_dst.exchange(-1, std::memory_order_relaxed);
    numa_push = push_dst >= runqueue::numa_push_tag;
    if (numa_push) {
      push_dst -= runqueue::numa_push_tag;
      // A NUMA migration (migrate_task_to()): the fiber the tick judged,
      // if its switch requeued it, and none other.
      pushed = action == prev_action::requeue && prev->pinned < 0 && push_dst != cpu ? prev : nullptr;
    } else {
      pushed = active_balance_victim(q, push_dst);
    }
    if (pushed) {
      if (tracks_load()) pelt_update(pushed->avg, now(), pushed->weight, true, false);
      detach_entity(q, *pushed);
      load_changed = true;
    } else {
      counters_[static_cast<std::size_t>(cpu)].active_abandoned.add();
    }
  }
  sched_entity* next = keep_prev && prev->on_rq.load(std::memory_order_relaxed) ? prev : queue_first(q);
  // A join handed the worker over (hand_off, wake_joiner): that fiber runs
  // next, whatever vruntime order would pick.
  if (fair_ && q.handoff) [[unlikely]] next = q.handoff;
  if (fair_ && !eevdf_ && yielding && next == prev) {
    // sched_yield() under CFS (yield_task_fair() sets the skip buddy): the
    // yielder steps aside for the next fiber in vruntime order, unless that
    // one is more than the wake-up granularity ahead of it; then the yield
    // would be unfair to the yielder, and it keeps the CPU.
    assert(prev == q.timeline.leftmost());
    if (sched_entity* second = q.timeline.second()) {
      const auto gran = static_cast<std::int64_t>(calc_delta_fair(cfg_.wakeup_granularity_ns, prev->weight));
      if (static_cast<std::int64_t>(second->vruntime - prev->vruntime) <= gran) next = second;
    }
  }
  if (next) {
    queue_remove(q, next);
    // Its time in the queue accrues as runnable, not running, when it is
    // next updated (pelt_update_running, from the pick time kept below).
    q.curr = next;
    note_run(cpu, *next, now);
    // Only the fair discipline keeps time: under FIFO and LIFO these stay
    // 0, and a fiber's sched_entity beyond its first line is never written
    // after the fiber is made (see struct fiber).
    if (fair_) {
      set_next_entity(q, *next, now());
      if (eevdf_ && next == prev) next->vprot = prev_vprot;
    } else {
      q.slice_ns = cfg_.fifo_slice_ns;
    }
  }
  q.need_resched.store(false, std::memory_order_relaxed);
  q.idle.store(next == nullptr, std::memory_order_relaxed);
  if (fair_) q.min_vruntime_pub.store(q.min_vruntime, std::memory_order_relaxed);
  if (next == nullptr && fair_) update_idle_core(cpu);
  if (tracks_load()) {
    if (load_changed) {
      publish_load(q);
    }
    // A swap between two runnable fibers within a period publishes
    // nothing, not even which fiber runs (curr_load, curr_preferred_node):
    // those two stores were a third of load tracking's cost per switch, and
    // the NUMA placement that reads them only needs the running fiber of
    // some recent instant. They are refreshed with the signals, at every
    // enqueue and dequeue and at the end of every period.
  }
  q.lock.unlock();
  if (pushed) {
    if (tracer_) [[unlikely]] trace_migrate(trace_id(pushed), cpu, push_dst, migrate_cause::active, -1, cpu, now);
    attach_fibers(push_dst, &pushed, 1, now);
    counters_[static_cast<std::size_t>(cpu)].active_pushes.add();
    if (pushed_to) *pushed_to = push_dst;
    // The worker that asked starts its failure count afresh at the lowest
    // level it shares with this one (the stopper's reset); it applies it
    // at its next pass. A NUMA migration was asked by no balance.
    if (numa_push) return next;
    const auto& chain = domains_.per_cpu[static_cast<std::size_t>(push_dst)];
    for (std::size_t l = 0; l < chain.size(); ++l) {
      const auto& span = chain[l].span;
      if (std::find(span.begin(), span.end(), cpu) != span.end()) {
        rq(push_dst).active_balance_done.store(static_cast<int>(l) + 1, std::memory_order_relaxed);
        break;
      }
    }
  }
  return next;
}

// pick_next(cpu, prev, block or exit) for FIFO and LIFO without load
// tracking: prev leaves the runqueue and the first queued fiber, if any,
// runs. There is no time to account (the clock is not read), and every pick
// gets the fixed slice the runqueue was given at construction.
sched_entity* engine::leave_fifo(int cpu, sched_entity* prev, prev_action action, const now_source& now,
                                 sched_entity* joined) noexcept {
  runqueue& q = rq(cpu);
  q.lock.lock();
  assert(q.curr == prev);
  if (action == prev_action::block && prev->wake_pending) [[unlikely]] {
    // A wake-up came first: the block is a requeue, which the full path
    // handles (wake_pending stays set; only this worker clears it).
    q.lock.unlock();
    return pick_next(cpu, prev, prev_action::requeue, now, nullptr, joined);
  }
  if (joined) take_handoff(cpu, q, joined);
  --q.nr_running;
  q.load_weight -= prev->weight;
  account_numa(cpu, q, *prev, -1);
  sched_entity* next = q.head;
  if (next) queue_remove(q, next);
  q.curr = next;
  if (next) note_run(cpu, *next, now);
  q.need_resched.store(false, std::memory_order_relaxed);
  q.idle.store(next == nullptr, std::memory_order_relaxed);
  // Last, as in pick_next(): from here a waker may enqueue prev elsewhere.
  prev->on_rq.store(false, std::memory_order_release);
  q.lock.unlock();
  return next;
}

sched_entity* engine::find_work(int cpu, const now_source& now, std::uint64_t random,
                                std::vector<cpu_snapshot>& scratch, bool kicked) {
  runqueue& q = rq(cpu);
  if (sched_entity* se = pick_next(cpu, nullptr, prev_action::requeue, now)) {
    if (traits_.rations_newidle) close_idle_period(q, now);
    cpu_load_idle_exit(q, now);
    if (tracer_) [[unlikely]] trace_switch(cpu, nullptr, stop_reason::exit, false, se, now_source(trace_time(now)));
    return se;
  }
  // Going idle: the idle period starts (newidle_balance() stamps it first
  // thing, whether or not it balances).
  if (traits_.rations_newidle && q.idle_stamp.load(std::memory_order_relaxed) == 0) {
    q.idle_stamp.store(std::max<std::int64_t>(1, now()), std::memory_order_relaxed);
  }
  if (idle_balance(cpu, now, random, scratch, kicked) == 0) {
    // Nothing to run: the worker idles, its tick stopped.
    cpu_load_idle_enter(q);
    return nullptr;
  }
  sched_entity* se = pick_next(cpu, nullptr, prev_action::requeue, now);
  if (se) cpu_load_idle_exit(q, now);
  // After the balance: the run starts after the stops of the fibers it took.
  if (se && tracer_) [[unlikely]] trace_switch(cpu, nullptr, stop_reason::exit, false, se, now_source(trace_time(now)));
  return se;
}

tick_result engine::tick(int cpu, const now_source& now, std::uint64_t random, std::vector<cpu_snapshot>& scratch) {
  runqueue& q = rq(cpu);
  if (tracks_load() || fair_) {
    q.lock.lock();
    update_curr(q, now);
    if (tracks_load()) update_load(q, now());
    // Under EEVDF, update_curr() has asked for the switch already.
    if (fair_ && !eevdf_ && q.curr && q.nr_running > 1) check_preempt_tick(cpu, q);
    cpu_load_tick(q, now);
    publish(q);
    q.lock.unlock();
  }
  tick_result r;
  if (traits_.numa_migrate_on_tick) numa_migrate(cpu, now, random, scratch);
  if (traits_.balances_periodically) rebalance_domains(cpu, now, random, scratch, r);
  return r;
}

namespace {

// sysctl_numa_balancing_scan_period_min of v4.19, in ms: where a task's
// scan period starts, and where task_numa_migrate() puts it back after
// every move it finds (task_scan_min(), for a task whose memory takes more
// than one scan window). Its growth while a task's faults stay local
// (update_task_scan_period()) is not modelled: a fiber off its preferred
// node is the case that keeps it at the minimum.
constexpr std::int64_t numa_scan_period_min_ms = 1000;

// numa_migrate_preferred()'s retry interval: min(HZ, msecs_to_jiffies(scan
// period) / 16) jiffies, a jiffy being the tick: 62 ticks of 1 ms (62.5 ms
// rounded down to whole jiffies).
std::int64_t numa_migrate_retry_ns(std::int64_t tick_ns) noexcept {
  const std::int64_t hz = std::max<std::int64_t>(1, 1'000'000'000 / std::max<std::int64_t>(1, tick_ns));
  const std::int64_t jiffies = std::min(hz, numa_scan_period_min_ms * hz / 1000 / 16);
  return std::max<std::int64_t>(1, jiffies) * tick_ns;
}

}  // namespace

void engine::numa_migrate(int cpu, const now_source& now, std::uint64_t random, std::vector<cpu_snapshot>& scratch) {
  runqueue& q = rq(cpu);
  // Only this worker's thread switches its running fiber: curr is stable.
  sched_entity* se = q.curr;
  if (se == nullptr || se->preferred_node < 0 || se->pinned >= 0 || domains_.cpu_node.empty()) return;
  if (now() < q.numa_migrate_retry) return;
  // numa_migrate_preferred(): the next try is an interval away, whether
  // this one moves the fiber, finds nothing, or finds it on its node.
  q.numa_migrate_retry = now() + numa_migrate_retry_ns(cfg_.tick_ns);
  if (domains_.cpu_node[static_cast<std::size_t>(cpu)] == se->preferred_node) return;
  snapshot(scratch, now);
  placement_request req;
  req.kind = placement_kind::wake;
  req.origin = cpu;
  req.prev = cpu;
  req.fiber = view_of(*se, now, false);
  req.cpus = scratch;
  req.domains = &domains_;
  req.random = random;
  const numa_migration m = policy_->numa_migrate(req);
  if (m.cpu < 0 || m.cpu == cpu || static_cast<std::size_t>(m.cpu) >= nr_cpus()) return;
  // migrate_task_to() stops this worker and moves its running fiber; a
  // cooperative worker gives it up at its next preempt point, which the
  // request asks for. migrate_swap() stops both: the fiber running on the
  // other worker comes here the same way, if that worker has none to push
  // already (the kernel's swap fails then too, as the two tasks must still
  // be where they were judged).
  if (!request_push_curr(cpu, m.cpu)) return;
  if (m.swap) request_push_curr(m.cpu, cpu);
}

bool engine::request_push_curr(int cpu, int dst) noexcept {
  runqueue& q = rq(cpu);
  int none = -1;
  if (!q.active_balance_dst.compare_exchange_strong(none, runqueue::numa_push_tag + dst, std::memory_order_relaxed)) {
    return false;
  }
  q.resched_cause.store(static_cast<std::uint8_t>(stop_reason::preempt_balance), std::memory_order_relaxed);
  q.need_resched.store(true, std::memory_order_relaxed);
  active_requests_.n.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace usched::detail
