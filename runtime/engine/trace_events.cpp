// trace_events.cpp: the records the engine's events write into a trace
// (trace.hpp). Each function here runs only with a tracer set; the events
// call them behind one predicted branch. A record's time is the event's
// `now`, read before the event changed anything, so that a wake-up's record
// is never later than the run it causes on another worker.
#include "engine.hpp"

namespace usched::detail {

pick_result engine::schedule_traced(int cpu, sched_entity* prev, prev_action action, const now_source& now,
                                    sched_entity* joined) {
  now();
  const runqueue& q = rq(cpu);
  // Who asked the running fiber to yield is read before the pick clears it.
  stop_reason why = stop_reason::exit;
  bool runnable = false;
  switch (action) {
    case prev_action::yield:
      why = stop_reason::yield;
      runnable = true;
      break;
    case prev_action::requeue:
      why = q.need_resched.load(std::memory_order_relaxed)
                ? static_cast<stop_reason>(q.resched_cause.load(std::memory_order_relaxed))
                : stop_reason::preempt_tick;  // the FIFO policies' fixed slice, which sets no flag
      runnable = true;
      break;
    case prev_action::block:
      why = stop_reason::block;
      break;
    case prev_action::exit:
      break;
  }
  const pick_result r = schedule_untraced(cpu, prev, action, now, joined);
  if (r.next != prev) trace_switch(cpu, prev, why, runnable, r.next, now);
  return r;
}

void engine::trace_switch(int cpu, const sched_entity* prev, stop_reason why, bool prev_runnable,
                          const sched_entity* next, const now_source& now) const noexcept {
  trace_record t;
  t.time = now();
  t.type = trace_event::switch_to;
  t.cpu = static_cast<std::int16_t>(cpu);
  t.fiber = trace_id(prev);
  t.other = trace_id(next);
  t.reason = static_cast<std::uint8_t>(why);
  if (prev && why == stop_reason::block && trace_hooks_.wait) t.detail = trace_hooks_.wait(*prev);
  t.flags = prev_runnable ? switch_flag_runnable : std::uint8_t{0};
  t.depth = trace_depth(rq(cpu).nr_queued.load(std::memory_order_relaxed));
  tracer_->emit(t);
}

void engine::trace_wakeup(std::uint64_t id, placement_kind kind, wake_reason why, int origin, bool by_origin,
                          int prev_cpu, int cpu, bool running, const now_source& now,
                          bool asked_before) const noexcept {
  trace_record t;
  t.time = now();
  t.type = trace_event::wakeup;
  t.fiber = id;
  t.cpu = static_cast<std::int16_t>(cpu);
  t.from = static_cast<std::int16_t>(prev_cpu);
  t.aux = static_cast<std::int16_t>(origin);
  t.reason = static_cast<std::uint8_t>(why);
  // The waker is origin's running fiber when the calling thread is
  // origin's worker (only that thread writes its curr). A timer, a
  // completion or the blocking pool wakes on no fiber's behalf.
  if (by_origin && origin >= 0 && why != wake_reason::timer && why != wake_reason::io &&
      why != wake_reason::blocking) {
    t.other = trace_id(rq(origin).curr);
  }
  std::uint8_t flags = 0;
  if (kind == placement_kind::spawn) flags |= wake_flag_new;
  if (running) flags |= wake_flag_running;
  const runqueue& q = rq(cpu);
  // Not a request some earlier wake-up or the tick left pending: a spawn
  // (which never asks) or a wake-up onto a worker already asked to yield
  // would otherwise be marked too.
  if (!running && !asked_before && q.need_resched.load(std::memory_order_relaxed) &&
      q.resched_cause.load(std::memory_order_relaxed) == static_cast<std::uint8_t>(stop_reason::preempt_wakeup)) {
    flags |= wake_flag_preempts;
  }
  t.flags = flags;
  t.depth = trace_depth(q.nr_queued.load(std::memory_order_relaxed));
  tracer_->emit(t);
}

void engine::trace_migrate(std::uint64_t id, int from, int to, migrate_cause c, int level, int by,
                           const now_source& now) const noexcept {
  trace_record t;
  t.time = now();
  t.type = trace_event::migrate;
  t.fiber = id;
  t.cpu = static_cast<std::int16_t>(to);
  t.from = static_cast<std::int16_t>(from);
  t.aux = static_cast<std::int16_t>(by);
  t.reason = static_cast<std::uint8_t>(c);
  t.detail = static_cast<std::uint8_t>(level < 0 ? 0xff : level);
  t.depth = trace_depth(rq(to).nr_queued.load(std::memory_order_relaxed));
  tracer_->emit(t);
}

void engine::trace_balance(int cpu, std::size_t level, cpu_idle_type idle, const balance_decision& d,
                           balance_outcome o, unsigned moved, const now_source& now) const noexcept {
  trace_record t;
  t.time = now();
  t.type = trace_event::balance;
  t.cpu = static_cast<std::int16_t>(cpu);
  t.reason = static_cast<std::uint8_t>(idle);
  t.detail = static_cast<std::uint8_t>(level);
  t.flags = static_cast<std::uint8_t>(static_cast<unsigned>(o) | static_cast<unsigned>(d.type) << 4);
  t.value = moved;
  if (d.busiest >= 0) {
    t.from = static_cast<std::int16_t>(d.busiest);
    t.other = static_cast<std::uint64_t>(d.imbalance > 0 ? d.imbalance : 0);
    // The busiest group: the group of this level that holds the busiest
    // worker.
    const sched_domain& sd = domains_.per_cpu[static_cast<std::size_t>(cpu)][level];
    for (std::size_t g = 0; g < sd.groups.size(); ++g) {
      for (const int c : sd.groups[g].cpus) {
        if (c == d.busiest) t.aux = static_cast<std::int16_t>(g);
      }
    }
    t.fiber = static_cast<std::uint64_t>(d.busiest_type) | static_cast<std::uint64_t>(d.local_type) << 8;
  }
  tracer_->emit(t);
}

migrate_cause engine::pull_cause(cpu_idle_type idle) const noexcept {
  if (idle != cpu_idle_type::newly_idle) return migrate_cause::periodic;
  return idle_pulls_by_itself() ? migrate_cause::steal : migrate_cause::newidle;
}

void engine::trace_idle(int cpu, idle_kind k, const now_source& now, int from) const noexcept {
  if (!tracer_) return;
  trace_record t;
  t.time = now();
  t.type = trace_event::idle;
  t.cpu = static_cast<std::int16_t>(cpu);
  t.from = static_cast<std::int16_t>(from);
  t.reason = static_cast<std::uint8_t>(k);
  t.depth = trace_depth(rq(cpu).nr_queued.load(std::memory_order_relaxed));
  tracer_->emit(t);
}

}  // namespace usched::detail
