// eevdf.cpp: the EEVDF discipline (Earliest Eligible Virtual Deadline
// First), the kernel's fair class since v6.6, as kernel/sched/fair.c of
// v6.18.y has it: the reference point zero_vruntime that follows the
// average (79f3f9bedd14, in 6.18.y since 6.18.3), the tree by deadline
// (v6.9), slices asked per fiber (v6.12), PREEMPT_SHORT and DELAY_DEQUEUE
// (v6.12), the smallest slice in the tree (v6.13), RUN_TO_PARITY's
// protected vruntime (v6.17). docs/policies/eevdf.md tells the story.
//
// Each fiber asks for a slice r (the base slice unless it asked for its
// own). The queue keeps V, the average of its fibers' vruntimes weighted by
// their weights, the running one included: the virtual time an ideal
// fluid scheduler would be at. A fiber's lag V - vruntime is the service
// it is owed (positive) or has had in advance (negative); it is eligible
// when its lag is not negative, and its virtual deadline is where it would
// finish its current request, vruntime + r scaled by its weight. The pick
// is the eligible fiber with the earliest deadline, so a fiber with a
// short slice is picked sooner after it wakes, and no fiber gets ahead of
// its share by more than a slice. A fiber keeps its lag when it leaves
// (clamped to a slice or a tick, whichever is larger, twice) and is placed
// with it when it returns: sleeping earns nothing, where CFS's sleeper
// credit gave a woken fiber half a latency period.
//
// usched's calc_delta_fair() is exact (delta x 1024 / weight); the kernel's
// multiplies by a 32-bit inverse and truncates, a few parts per billion
// lower. Delayed fibers are counted as the kernel's h_nr_runnable counts
// them, out of the runqueue's count and weight; the kernel's cfs_rq->load
// and rq->nr_running keep them until they leave.
#include "engine.hpp"

#include <algorithm>
#include <limits>

namespace usched::detail {

namespace {

std::int64_t key_of(const runqueue& q, std::uint64_t vruntime) noexcept {
  return static_cast<std::int64_t>(vruntime - q.zero_vruntime);
}

// V's numerator and denominator, relative to zero_vruntime: the tree's
// sums, and the running fiber's share.
void avg_parts(const runqueue& q, std::int64_t& avg, std::int64_t& load) noexcept {
  avg = q.ev_avg_vruntime;
  load = static_cast<std::int64_t>(q.ev_avg_load);
  if (const sched_entity* c = q.curr) {
    avg += key_of(q, c->vruntime) * static_cast<std::int64_t>(c->weight);
    load += c->weight;
  }
}

// avg_vruntime(): V, rounded down (a left bias: with it, some fiber is
// always eligible).
std::uint64_t average_vruntime(const runqueue& q) noexcept {
  std::int64_t avg = 0, load = 0;
  avg_parts(q, avg, load);
  if (load != 0) {
    if (avg < 0) avg -= load - 1;
    avg /= load;
  }
  return q.zero_vruntime + static_cast<std::uint64_t>(avg);
}

// The kernel's update_zero_vruntime(): zero_vruntime moves to V, and the
// sums with it, so that the keys stay small.
void update_zero_vruntime(runqueue& q) noexcept {
  const std::uint64_t v = average_vruntime(q);
  const auto delta = static_cast<std::int64_t>(v - q.zero_vruntime);
  q.ev_avg_vruntime -= static_cast<std::int64_t>(q.ev_avg_load) * delta;
  q.zero_vruntime = v;
}

}  // namespace

std::int64_t engine::ev_slice_of(const sched_entity& se) const noexcept {
  return se.ev_flags & ev_custom_slice ? static_cast<std::int64_t>(se.ev_slice.request) : cfg_.base_slice_ns;
}

std::uint64_t engine::avg_vruntime(const runqueue& q) noexcept { return average_vruntime(q); }

// vruntime_eligible(): vruntime <= V, without the division: lag 0 is
// eligible.
bool engine::vruntime_eligible(const runqueue& q, std::uint64_t vruntime) noexcept {
  std::int64_t avg = 0, load = 0;
  avg_parts(q, avg, load);
  return avg >= key_of(q, vruntime) * load;
}

// entity_lag(): V - vruntime, within twice the larger of the fiber's slice
// and a tick, in its virtual time.
std::int64_t engine::entity_lag(std::uint64_t avruntime, const sched_entity& se) const noexcept {
  const auto vlag = static_cast<std::int64_t>(avruntime - se.vruntime);
  const std::int64_t real = std::max(2 * static_cast<std::int64_t>(se.ev_slice.request), cfg_.tick_ns);
  const auto limit = static_cast<std::int64_t>(calc_delta_fair(real, se.weight));
  return std::clamp(vlag, -limit, limit);
}

void engine::update_entity_lag(const runqueue& q, sched_entity& se) const noexcept {
  se.vlag = entity_lag(avg_vruntime(q), se);
}

// place_entity(): se (not on q) is placed at V less its lag, inflated by
// (W + w) / W, W the queue's weight: adding se moves V towards it by
// w / (W + w) of the lag, which leaves it with exactly the lag it kept.
// Its deadline is a slice later, half a slice for a new fiber
// (PLACE_DEADLINE_INITIAL), or the relative one it kept while it moved
// between workers (PLACE_REL_DEADLINE).
void engine::place_entity(const runqueue& q, sched_entity& se, bool initial) const noexcept {
  const std::uint64_t v = avg_vruntime(q);
  se.ev_slice.request = static_cast<std::uint32_t>(ev_slice_of(se));
  auto vslice = static_cast<std::int64_t>(calc_delta_fair(se.ev_slice.request, se.weight));
  std::int64_t lag = 0;
  if (ev_feature(feat_place_lag) && ev_nr_queued(q) > 0 && se.vlag != 0) {
    lag = se.vlag;
    auto load = static_cast<std::int64_t>(q.ev_avg_load);
    if (q.curr) load += q.curr->weight;
    lag *= load + static_cast<std::int64_t>(se.weight);
    lag /= std::max<std::int64_t>(load, 1);  // truncated toward 0, as div_s64
  }
  se.vruntime = v - static_cast<std::uint64_t>(lag);
  if (se.ev_flags & ev_rel_deadline) {
    se.ev.deadline += se.vruntime;
    se.ev_flags &= static_cast<std::uint8_t>(~ev_rel_deadline);
    return;
  }
  if (ev_feature(feat_place_deadline_initial) && initial) vslice /= 2;
  se.ev.deadline = se.vruntime + static_cast<std::uint64_t>(vslice);
}

// update_deadline(): once the fiber's vruntime reaches its deadline, its
// request is served: the next one is a slice from where it is now.
bool engine::update_deadline(sched_entity& se) const noexcept {
  if (static_cast<std::int64_t>(se.vruntime - se.ev.deadline) < 0) return false;
  se.ev_slice.request = static_cast<std::uint32_t>(ev_slice_of(se));
  se.ev.deadline = se.vruntime + calc_delta_fair(se.ev_slice.request, se.weight);
  return true;
}

// set_protect_slice(): se, just picked (out of the tree, the others in
// it), may run undisturbed by wake-ups up to its deadline, or for the
// smallest slice queued if that is shorter than its own (RUN_TO_PARITY);
// without RUN_TO_PARITY, for the normalized base slice at most.
void engine::set_protect_slice(const runqueue& q, sched_entity& se) const noexcept {
  std::uint32_t s = std::numeric_limits<std::uint32_t>::max();
  if (!ev_feature(feat_run_to_parity)) {
    const auto factor = static_cast<std::int64_t>(tunable_factor(cfg_.scaling, nr_cpus()));
    s = static_cast<std::uint32_t>(cfg_.base_slice_ns / std::max<std::int64_t>(factor, 1));
  } else if (!q.ev_tree.empty()) {
    s = q.ev_tree.min_slice();
  }
  s = std::min(s, se.ev_slice.request);
  std::uint64_t vprot = se.ev.deadline;
  if (s != se.ev_slice.request) {
    const std::uint64_t end = se.vruntime + calc_delta_fair(s, se.weight);
    if (vtime_before(end, vprot)) vprot = end;
  }
  se.vprot = vprot;
}

// update_protect_slice(): a fiber with a shorter slice arrived; the
// running one's protection ends at most that slice from now.
void engine::update_protect_slice(const runqueue& q, sched_entity& se) const noexcept {
  std::uint32_t s = se.ev_slice.request;
  if (!q.ev_tree.empty()) s = std::min(s, q.ev_tree.min_slice());
  const std::uint64_t end = se.vruntime + calc_delta_fair(s, se.weight);
  if (vtime_before(end, se.vprot)) se.vprot = end;
}

void engine::ev_enqueue(runqueue& q, sched_entity& se) noexcept {
  q.ev_avg_vruntime += key_of(q, se.vruntime) * static_cast<std::int64_t>(se.weight);
  q.ev_avg_load += se.weight;
  q.ev_tree.insert(se);
  ++q.ev_nr;
  update_zero_vruntime(q);
}

void engine::ev_dequeue(runqueue& q, sched_entity& se) noexcept {
  q.ev_tree.erase(se);
  --q.ev_nr;
  q.ev_avg_vruntime -= key_of(q, se.vruntime) * static_cast<std::int64_t>(se.weight);
  q.ev_avg_load -= se.weight;
  update_zero_vruntime(q);
}

sched_entity* engine::pick_eevdf(const runqueue& q, sched_entity* curr, bool protect) const noexcept {
  sched_entity* left = q.ev_tree.leftmost();
  // Alone: no eligibility to test.
  if (ev_nr_queued(q) == 1) return curr ? curr : left;
  if (curr && !entity_eligible(q, *curr)) curr = nullptr;
  if (curr && protect && protect_slice(*curr)) return curr;
  sched_entity* best = nullptr;
  if (left && entity_eligible(q, *left)) {
    best = left;
  } else {
    best = q.ev_tree.pick_earliest_eligible([&q](std::uint64_t v) { return vruntime_eligible(q, v); });
  }
  // The running fiber wins only with a strictly earlier deadline.
  if (!best || (curr && vtime_before(curr->ev.deadline, best->ev.deadline))) best = curr;
  return best;
}

sched_entity* engine::ev_pick_next(runqueue& q) noexcept {
  for (;;) {
    sched_entity* se = pick_eevdf(q, nullptr, true);
    if (se == nullptr || !(se->ev_flags & ev_delayed)) return se;
    ev_finish_delayed(q, *se);
  }
}

// A delayed fiber's dequeue completes: its lag is taken (V with it still
// in), a positive one dropped (DELAY_ZERO), and it is off the runqueue, for
// its waker to place anywhere. Its runnable counts and signals left when it
// blocked.
void engine::ev_finish_delayed(runqueue& q, sched_entity& se) noexcept {
  update_entity_lag(q, se);
  ev_dequeue(q, se);
  if (ev_feature(feat_delay_zero) && se.vlag > 0) se.vlag = 0;
  se.ev_flags &= static_cast<std::uint8_t>(~ev_delayed);
  if (&se == q.handoff) q.handoff = nullptr;
  // Last: from here a waker may enqueue it elsewhere.
  se.on_rq.store(false, std::memory_order_release);
}

// update_curr()'s EEVDF half, after the charge: a served request gets the
// next deadline; with another fiber queued, the running one is asked to
// yield when it did, or when its protected slice is over (the pick then
// decides; the kernel's resched_curr_lazy, taken at the next preempt point).
void engine::ev_update_curr(int cpu, runqueue& q, sched_entity& curr) noexcept {
  const bool resched = update_deadline(curr);
  if (ev_nr_queued(q) == 1) return;
  if ((resched || !protect_slice(curr)) && !q.need_resched.load(std::memory_order_relaxed)) {
    q.resched_cause.store(static_cast<std::uint8_t>(stop_reason::preempt_tick), std::memory_order_relaxed);
    q.need_resched.store(true, std::memory_order_relaxed);
    counters_[static_cast<std::size_t>(cpu)].tick_preemptions.add();
  }
}

// check_preempt_wakeup_fair(): se preempts the running fiber when it is
// what EEVDF would pick now, the running fiber's protection honoured unless
// se asked for a shorter slice (PREEMPT_SHORT). A shorter slice that does
// not preempt still shortens the protection (RUN_TO_PARITY).
void engine::ev_check_preempt(int cpu, runqueue& q, sched_entity& se) noexcept {
  sched_entity* curr = q.curr;
  if (!curr || &se == curr || q.need_resched.load(std::memory_order_relaxed)) return;
  const bool do_short = ev_feature(feat_preempt_short) && se.ev_slice.request < curr->ev_slice.request;
  if (pick_eevdf(q, curr, !do_short) == &se) {
    if (do_short) cancel_protect_slice(*curr);
    q.resched_cause.store(static_cast<std::uint8_t>(stop_reason::preempt_wakeup), std::memory_order_relaxed);
    q.need_resched.store(true, std::memory_order_relaxed);
    counters_[static_cast<std::size_t>(cpu)].wakeup_preemptions.add();
    return;
  }
  if (ev_feature(feat_run_to_parity) && do_short) update_protect_slice(q, *curr);
}

// yield_task_fair(): an eligible fiber that yields has its current request
// counted as served: its vruntime jumps to its deadline, the next deadline
// is a slice on. One that is not eligible is passed over anyway.
void engine::ev_yield(runqueue& q, sched_entity& se) noexcept {
  if (q.ev_nr == 0) return;  // alone: the kernel's rq->nr_running == 1
  if (!entity_eligible(q, se)) return;
  se.vruntime = se.ev.deadline;
  se.ev.deadline += calc_delta_fair(se.ev_slice.request, se.weight);
}

bool engine::ev_block(runqueue& q, sched_entity& se) noexcept {
  if (ev_feature(feat_delay_dequeue) && !entity_eligible(q, se)) {
    se.ev_flags |= ev_delayed;
    return true;
  }
  update_entity_lag(q, se);
  return false;
}

// requeue_delayed_entity(): a delayed fiber woke before its debt was paid
// (or just after: with DELAY_ZERO, a fiber whose lag turned positive is
// placed again at V, losing the credit). It stays where it is queued, and
// is runnable again: its counts and signals return as an enqueue's would.
void engine::ev_requeue_delayed(int cpu, runqueue& q, sched_entity& se, const now_source& now) noexcept {
  update_curr(q, now);
  if (ev_feature(feat_delay_zero)) {
    if (entity_lag(avg_vruntime(q), se) > 0) {
      ev_dequeue(q, se);
      se.vlag = 0;
      place_entity(q, se, false);
      ev_enqueue(q, se);
    }
  }
  se.ev_flags &= static_cast<std::uint8_t>(~ev_delayed);
  if (tracks_load()) {
    update_load(q, now());
    pelt_update(se.avg, now(), se.weight, false, false);
    q.pelt.enqueue_runnable(se.avg);
    util_est_enqueue(q, se);
  }
  ++q.nr_running;
  q.load_weight += se.weight;
  account_numa(cpu, q, se, 1);
  // In the tree already: the list and the counts only.
  queue_insert(q, &se, true, false, true);
  note_overload(q);
}

}  // namespace usched::detail
