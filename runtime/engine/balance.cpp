// balance.cpp: the balance driver (the kernel's load_balance() and the
// passes around it): the newly-idle pull and its rationing, the tick's
// periodic balance and nohz kick, the two-phase migration of what the
// policy decides (detach under the source's lock, attach under the
// destination's), and the active balance a failing pass asks for.
#include "engine.hpp"
#include "random.hpp"

#include <algorithm>
#include <cassert>

namespace usched::detail {
namespace {

// How often a domain's counters may show a failed pass before the busiest
// worker is asked to yield its running fiber (the kernel's active balance,
// need_active_balance(): nr_balance_failed > cache_nice_tries + 2).
constexpr unsigned active_balance_extra_failures = 2;

// cache_nice_tries of a level: 0 at SMT, 1 at LLC and package, 2 across NUMA
// nodes (sd_init()).
unsigned cache_nice_tries(const sched_domain& sd) noexcept {
  if (sd.has_flag(SD_SHARE_CPUCAPACITY)) return 0;
  if (sd.has_flag(SD_NUMA)) return 2;
  return 1;
}

// A level's longest newly-idle pass loses 3/256 (about 1%) once per this
// period, so that a pass that was once slow does not ration the worker
// forever.
constexpr std::int64_t newidle_cost_decay_period_ns = 1'000 * ns_per_ms;

// update_newidle_cost() of v5.16: a pass that cost more than the level's
// longest becomes the longest and restarts the decay period; otherwise the
// longest decays once the period since its last change has passed. True
// when it decayed.
bool update_newidle_cost(sd_balance_state& st, std::int64_t cost, std::int64_t now) noexcept {
  if (cost > st.max_newidle_lb_cost) {
    st.max_newidle_lb_cost = cost;
    st.next_decay = now + newidle_cost_decay_period_ns;
    return false;
  }
  if (now > st.next_decay) {
    st.max_newidle_lb_cost = st.max_newidle_lb_cost * 253 / 256;
    st.next_decay = now + newidle_cost_decay_period_ns;
    return true;
  }
  return false;
}

}  // namespace

unsigned engine::idle_balance(int cpu, const now_source& now, std::uint64_t random,
                              std::vector<cpu_snapshot>& scratch, bool kicked) {
  if (!traits_.pulls_when_idle || !overloaded()) return 0;
  return newidle_balance(cpu, now, random, scratch, kicked);
}

unsigned engine::newidle_balance(int cpu, const now_source& now, std::uint64_t random,
                                 std::vector<cpu_snapshot>& scratch, bool kicked) {
  const auto& chain = domains_.per_cpu[static_cast<std::size_t>(cpu)];
  if (chain.empty()) return 0;
  runqueue& q = rq(cpu);
  cpu_counters& c = counters_[static_cast<std::size_t>(cpu)];
  const std::int64_t avg_idle = q.avg_idle.load(std::memory_order_relaxed);
  // A pull kick's pass (wake_result::pull) is not rationed.
  const bool rationed = traits_.rations_newidle && !kicked;
  if (rationed) {
    // The kernel's newidle_balance(): a worker whose idle periods are on
    // average shorter than a migration is worth does not balance at all.
    // Since v5.16 "worth" is what a pass of its narrowest level has cost at
    // most, which follows the machine instead of a fixed 0.5 ms.
    const std::int64_t gate = traits_.newidle_gate_by_domain_cost
                                  ? sd_state_[static_cast<std::size_t>(cpu)][0].max_newidle_lb_cost
                                  : cfg_.migration_cost_ns;
    if (avg_idle < gate) {
      c.newidle_skipped.add();
      return 0;
    }
  }
  c.newidle_attempts.add();
  std::int64_t curr_cost = 0;
  for (std::size_t level = 0; level < chain.size(); ++level) {
    sd_balance_state& st = sd_state_[static_cast<std::size_t>(cpu)][level];
    // Up the chain only while the expected cost fits the expected idle
    // time.
    if (rationed && avg_idle < curr_cost + st.max_newidle_lb_cost) break;
    const std::int64_t t0 = traits_.rations_newidle && now.measures() ? now.fresh() : 0;
    const unsigned n = load_balance(cpu, level, cpu_idle_type::newly_idle, now, random, scratch);
    if (traits_.rations_newidle) {
      const std::int64_t cost =
          now.measures() ? now.fresh() - t0
                         : cfg_.balance_pass_per_cpu_ns * static_cast<std::int64_t>(chain[level].span.size());
      if (traits_.newidle_gate_by_domain_cost) {
        update_newidle_cost(st, cost, now());
      } else {
        st.max_newidle_lb_cost = std::max(st.max_newidle_lb_cost, cost);
      }
      curr_cost += cost;
    }
    if (n > 0) {
      c.newidle_pulls.add();
      note_newidle_cost(q, curr_cost);
      q.idle_stamp.store(0, std::memory_order_relaxed);
      return n;
    }
    // Something arrived meanwhile: no need to look wider.
    if (q.nr_queued.load(std::memory_order_relaxed) > 0) break;
    random = lcg_next(random);
  }
  note_newidle_cost(q, curr_cost);
  refresh_overload();
  return 0;
}

void engine::note_newidle_cost(runqueue& q, std::int64_t cost) noexcept {
  if (cost > q.max_idle_balance_cost.load(std::memory_order_relaxed)) {
    q.max_idle_balance_cost.store(cost, std::memory_order_relaxed);
  }
}

// close_idle_period(): q's worker, idle since its stamp, found a fiber to
// run: the idle period ends now and joins the average, capped at twice the
// longest pass (update_avg() in ttwu_do_wakeup()). The kernel closes it in
// the waker's try_to_wake_up(); here the worker closes its own when it
// picks the fiber up, a wake-up's latency later, so that no waker touches
// the line.
void engine::close_idle_period(runqueue& q, const now_source& now) noexcept {
  const std::int64_t stamp = q.idle_stamp.load(std::memory_order_relaxed);
  if (stamp == 0) return;
  const std::int64_t delta = std::max<std::int64_t>(0, now() - stamp);
  std::int64_t avg = q.avg_idle.load(std::memory_order_relaxed);
  avg += (delta - avg) / 8;  // update_avg()
  avg = std::min(avg, 2 * q.max_idle_balance_cost.load(std::memory_order_relaxed));
  q.avg_idle.store(avg, std::memory_order_relaxed);
  q.idle_stamp.store(0, std::memory_order_relaxed);
}

void engine::refresh_overload() noexcept {
  if (!overloaded()) return;
  // Look before clearing: while some worker has a movable fiber (the policy
  // refused it, or it arrived during the pass) the flag stays as it is, and
  // its line is not taken from the enqueuers that read it.
  const auto any_movable = [this] {
    for (std::size_t c = 0; c < nr_cpus(); ++c) {
      if (has_movable(rqs_[c])) return true;
    }
    return false;
  };
  if (any_movable()) return;
  overload_.flag.store(false, std::memory_order_seq_cst);
  if (any_movable()) overload_.flag.store(true, std::memory_order_seq_cst);
}

unsigned engine::load_balance(int cpu, std::size_t level, cpu_idle_type idle, const now_source& now,
                              std::uint64_t random, std::vector<cpu_snapshot>& scratch) {
  const auto c = static_cast<std::size_t>(cpu);
  const auto& chain = domains_.per_cpu[c];
  const sched_domain& sd = chain[level];
  sd_balance_state& st = sd_state_[c][level];
  level_counters& lc = level_counters_[c][level];
  lc.attempts.add();
  // An active balance this worker asked for has moved a fiber here: the
  // stopper's reset of the failure count, at the lowest level that spans
  // both workers (there the request was made, or lower).
  if (const int done = rqs_[c].active_balance_done.load(std::memory_order_relaxed)) {
    rqs_[c].active_balance_done.store(0, std::memory_order_relaxed);
    sd_state_[c][static_cast<std::size_t>(done - 1)].nr_balance_failed = 0;
  }
  const std::int64_t min_iv = static_cast<std::int64_t>(sd.min_interval_ms) * ns_per_ms;
  const std::int64_t max_iv = static_cast<std::int64_t>(sd.max_interval_ms) * ns_per_ms;

  snapshot(scratch, now);
  balance_request req;
  req.this_cpu = cpu;
  req.idle = idle;
  req.sd = &sd;
  req.prefer_sibling = level > 0 && !chain[level - 1].has_flag(SD_NUMA);
  req.cpus = scratch;
  req.nr_balance_failed = st.nr_balance_failed;
  req.random = random;
  const balance_decision d = policy_->find_busiest(req);
  if (d.odd_pick) lc.odd_picks.add();
  if (!d || d.busiest == cpu) {
    // Balanced: failures reset; a periodic pass backs off.
    lc.balanced.add();
    st.nr_balance_failed = 0;
    if (idle != cpu_idle_type::newly_idle && st.balance_interval_ns < max_iv) st.balance_interval_ns *= 2;
    if (tracer_) [[unlikely]] trace_balance(cpu, level, idle, d, balance_outcome::balanced, 0, now);
    return 0;
  }
  sched_entity* moved[max_migrate_per_pass];
  const unsigned n = detach_fibers(cpu, d, idle, &sd, st.nr_balance_failed, now, moved, max_migrate_per_pass);
  if (tracer_ && n > 0) [[unlikely]] {
    // The records' time is read now, not taken from the event: the fibers
    // taken may have been queued, by a switch away from them on their
    // worker, after the event's time was read (trace_hooks::clock).
    const now_source after(trace_time(now));
    // Named before they are attached: from then on another worker may
    // take one, run it to its end and reuse its entity.
    trace_balance(cpu, level, idle, d, balance_outcome::moved, n, after);
    for (unsigned i = 0; i < n; ++i) {
      trace_migrate(trace_id(moved[i]), d.busiest, cpu, pull_cause(idle), static_cast<int>(level), cpu, after);
    }
  }
  attach_fibers(cpu, moved, n, now);
  if (n > 0) {
    lc.successes.add();
    lc.moved[static_cast<std::size_t>(d.type)].add(n);
    counters_[c].fibers_pulled.add(n);
    st.nr_balance_failed = 0;
    st.balance_interval_ns = min_iv;
    return n;
  }
  lc.failures.add();
  if (idle != cpu_idle_type::newly_idle) ++st.nr_balance_failed;
  const unsigned tries = cache_nice_tries(sd);
  if (st.nr_balance_failed > tries + active_balance_extra_failures) {
    // Active balance: the fiber we could not take may be the busiest
    // worker's running one, which only it can give up. A cooperative runtime
    // cannot stop it; it asks it to yield at its next preempt point and to
    // push the fiber it was running over to us then (pick_next).
    runqueue& busiest = rq(d.busiest);
    // One request at a time per busiest worker (busiest->active_balance);
    // the failure count is raised whether or not this one was new.
    int none = -1;
    if (tracer_) [[unlikely]] trace_balance(cpu, level, idle, d, balance_outcome::active_asked, 0, now);
    if (busiest.active_balance_dst.compare_exchange_strong(none, cpu, std::memory_order_relaxed)) {
      busiest.resched_cause.store(static_cast<std::uint8_t>(stop_reason::preempt_balance), std::memory_order_relaxed);
      busiest.need_resched.store(true, std::memory_order_relaxed);
      active_requests_.n.fetch_add(1, std::memory_order_relaxed);
    }
    st.nr_balance_failed = tries + 1;
    if (st.balance_interval_ns < max_iv) st.balance_interval_ns *= 2;
  } else {
    st.balance_interval_ns = min_iv;
    if (tracer_) [[unlikely]] trace_balance(cpu, level, idle, d, balance_outcome::none_movable, 0, now);
  }
  return 0;
}

bool engine::should_we_balance(int cpu, std::size_t level, cpu_idle_type idle) const {
  if (idle == cpu_idle_type::newly_idle) return true;
  const sched_domain& sd = domains_.per_cpu[static_cast<std::size_t>(cpu)][level];
  const sched_group& local = sd.groups[sd.local_group];
  // The first idle worker of the local group balances for the group; if none
  // is idle, its first worker does. Others leave it to that one.
  for (int c : local.cpus) {
    if (rq(c).idle.load(std::memory_order_relaxed)) return c == cpu;
  }
  return local.cpus.front() == cpu;
}

// balance_interval(): the kernel's get_sd_balance_interval(): the level's
// interval, stretched by busy_factor on a busy worker, where v5.10 takes one
// tick off so that the levels' periods are not multiples of each other;
// at least one tick and at most max_load_balance_interval (HZ x CPUs / 10
// jiffies: 100 ms a CPU).
std::int64_t engine::balance_interval(const sd_balance_state& st, bool busy) const noexcept {
  std::int64_t interval = st.balance_interval_ns;
  if (busy) {
    interval *= traits_.busy_factor;
    if (traits_.shortens_busy_interval) interval -= cfg_.tick_ns;
  }
  const std::int64_t max_interval = static_cast<std::int64_t>(nr_cpus()) * 100 * ns_per_ms;
  return std::clamp(interval, cfg_.tick_ns, std::max(cfg_.tick_ns, max_interval));
}

unsigned engine::detach_fibers(int dst, const balance_decision& decision, cpu_idle_type idle,
                               const sched_domain* sd, unsigned nr_balance_failed, const now_source& now,
                               sched_entity** out, unsigned max) {
  runqueue& src = rq(decision.busiest);
  detach_env env;
  env.type = decision.type;
  env.imbalance = decision.imbalance;
  env.idle = idle;
  env.nr_balance_failed = nr_balance_failed;
  env.cache_nice_tries = sd ? cache_nice_tries(*sd) : 0;
  env.src_capacity = domains_.cpu_capacity.empty()
                         ? capacity_scale
                         : domains_.cpu_capacity[static_cast<std::size_t>(decision.busiest)];
  env.numa_level = sd && sd->has_flag(SD_NUMA);
  if (!domains_.cpu_node.empty()) {
    env.src_node = domains_.cpu_node[static_cast<std::size_t>(decision.busiest)];
    env.dst_node = domains_.cpu_node[static_cast<std::size_t>(dst)];
  }
  // Whether a fiber is cache-hot (it ran less than the migration cost ago);
  // the policy decides what that means. Since v5.10 nothing is hot between
  // SMT siblings, which share every cache (task_hot()); the policy says
  // whether it follows that.
  const bool hot_check =
      fair_ && sd && !(sd->has_flag(SD_SHARE_CPUCAPACITY) && traits_.smt_ignores_cache_hot);
  unsigned n = 0;
  src.lock.lock();
  if (tracks_load()) {
    update_curr(src, now);
    update_load(src, now());
  }
  // From the fiber queued longest: the head of a FIFO, the tail of a LIFO.
  for (sched_entity* se = lifo_ ? src.tail : src.head; se && n < max && env.imbalance > 0;) {
    sched_entity* next = lifo_ ? se->rq_prev : se->rq_next;
    // Pulling onto an idle worker never empties the source (detach_tasks).
    if (idle != cpu_idle_type::not_idle && src.nr_running <= 1) break;
    // Pinned elsewhere, or the runnext of a worker with other fibers queued
    // (its spawner will run it soon, on a warm cache; Go steals runnext last).
    if ((se->pinned >= 0 && se->pinned != dst) || (se == src.runnext && src.head != src.tail)) {
      se = next;
      continue;
    }
    if (tracks_load()) pelt_update(se->avg, now(), se->weight, true, false);
    const fiber_view v = view_of(*se, now, hot_check);
    // As the kernel's env->src_rq reads them for this fiber: after the
    // fibers this pass already took.
    env.src_nr_running = src.nr_running;
    env.src_nr_preferred_running = src.nr_preferred_running.load(std::memory_order_relaxed);
    const detach_verdict verdict = policy_->can_detach(v, env);
    if (!verdict.take) {
      se = next;
      continue;
    }
    env.imbalance -= verdict.amount;
    detach_entity(src, *se);
    out[n++] = se;
    se = next;
  }
  publish(src);
  src.lock.unlock();
  return n;
}

void engine::attach_fibers(int dst, sched_entity* const* list, unsigned n, const now_source& now) {
  if (n == 0) return;
  runqueue& q = rq(dst);
  q.lock.lock();
  if (tracks_load()) {
    update_curr(q, now);
    update_load(q, now());
  }
  for (unsigned i = 0; i < n; ++i) {
    sched_entity* se = list[i];
    if (eevdf_) {
      // Placed by the lag it left with (PLACE_LAG), its deadline kept
      // relative (PLACE_REL_DEADLINE).
      place_entity(q, *se, false);
    } else if (fair_) {
      se->vruntime += q.min_vruntime;
    }
    if (tracks_load()) {
      q.pelt.attach(se->avg, se->weight);
      q.pelt.enqueue_runnable(se->avg);
      util_est_enqueue(q, *se);
    }
    // A migrated fiber is cold on its new worker. Only the fair discipline
    // keeps time (and reads it, for cache-hotness): under FIFO and LIFO the
    // store would only move a line of a stolen fiber to the thief.
    if (fair_) se->exec_start = now() - cfg_.migration_cost_ns;
    se->cpu.store(dst, std::memory_order_relaxed);
    // Release: cpu before on_rq, for hand_off()'s reading under the old
    // runqueue's lock.
    se->on_rq.store(true, std::memory_order_release);
    ++q.nr_running;
    q.load_weight += se->weight;
    account_numa(dst, q, *se, 1);
    queue_insert(q, se);
    check_preempt(dst, q, *se);
  }
  note_overload(q);
  publish(q);
  q.lock.unlock();
}

// detach_entity(): take a queued fiber off `src` (locked) to move it to
// another worker: its runnable load leaves, its vruntime becomes relative
// (under EEVDF: its lag is taken, and its deadline made relative).
void engine::detach_entity(runqueue& src, sched_entity& se) noexcept {
  // Against the average with it still in (its node's field is the tree's
  // until it leaves).
  const std::int64_t lag = eevdf_ ? entity_lag(avg_vruntime(src), se) : 0;
  queue_remove(src, &se);
  if (eevdf_) {
    se.vlag = lag;
    if (ev_feature(feat_place_rel_deadline)) {
      se.ev.deadline -= se.vruntime;
      se.ev_flags |= ev_rel_deadline;
    }
  }
  --src.nr_running;
  src.load_weight -= se.weight;
  account_numa(static_cast<int>(&src - rqs_.get()), src, se, -1);
  if (tracks_load()) {
    src.pelt.dequeue_runnable(se.avg);
    src.pelt.detach(se.avg);
    util_est_dequeue(src, se, false);
  }
  se.on_rq.store(false, std::memory_order_relaxed);
  if (fair_ && !eevdf_) se.vruntime -= src.min_vruntime;  // relative while in flight
}

// active_balance_victim(): what the stopper of an active balance moves
// (active_load_balance_cpu_stop(), v5.9/v5.10): nothing when no fiber is
// runnable here any more (the stopper's `busiest_rq->nr_running <= 1`,
// which counts the stopper itself); else the fiber that ran least recently
// of those that may run on `dst`, the one the running fiber's switch has
// just requeued included: a worker with one fiber gives it up, as a CPU
// whose stopper preempted its only task does. The kernel walks its
// cfs_tasks list, most recently picked first, from the tail
// (detach_one_task()); with nr_balance_failed raised past cache_nice_tries
// by the request, hotness and util do not stop it. q is locked, curr off
// it.
sched_entity* engine::active_balance_victim(runqueue& q, int dst) noexcept {
  if (dst < 0 || static_cast<std::size_t>(dst) >= nr_cpus() || &rq(dst) == &q) return nullptr;
  if (q.nr_running == 0) return nullptr;
  sched_entity* best = nullptr;
  const auto consider = [&](sched_entity* se) {
    if (se->pinned >= 0 && se->pinned != dst) return;
    if (!best || se->exec_start < best->exec_start) best = se;
  };
  if (fair_ && !eevdf_) {
    for (sched_entity& se : q.timeline) consider(&se);
  } else {
    for (sched_entity* se = q.head; se; se = se->rq_next) consider(se);
  }
  return best;
}

// rebalance_domains(): the tick's periodic balance, for the policies that
// balance periodically (the CFS family).
void engine::rebalance_domains(int cpu, const now_source& now, std::uint64_t random,
                               std::vector<cpu_snapshot>& scratch, tick_result& r) {
  runqueue& q = rq(cpu);
  // Each level whose interval has passed since its last balance is
  // balanced, narrowest first.
  const auto& chain = domains_.per_cpu[static_cast<std::size_t>(cpu)];
  const bool was_busy = !q.idle.load(std::memory_order_relaxed);
  bool busy = was_busy;
  cpu_idle_type idle = busy ? cpu_idle_type::not_idle : cpu_idle_type::idle;
  unsigned pulled = 0;
  // The longest newly-idle pass of each level decays by 253/256 once a
  // second (about 1%), and the chain's sum bounds the idle average.
  if (traits_.rations_newidle) {
    std::int64_t max_cost = 0;
    bool decayed = false;
    for (std::size_t level = 0; level < chain.size(); ++level) {
      sd_balance_state& st = sd_state_[static_cast<std::size_t>(cpu)][level];
      if (traits_.newidle_gate_by_domain_cost) {
        decayed = update_newidle_cost(st, 0, now()) || decayed;
      } else if (now() > st.next_decay) {
        st.max_newidle_lb_cost = st.max_newidle_lb_cost * 253 / 256;
        st.next_decay = now() + newidle_cost_decay_period_ns;
        decayed = true;
      }
      max_cost += st.max_newidle_lb_cost;
    }
    if (decayed) {
      q.max_idle_balance_cost.store(std::max(cfg_.migration_cost_ns, max_cost), std::memory_order_relaxed);
    }
  }
  for (std::size_t level = 0; level < chain.size(); ++level) {
    sd_balance_state& st = sd_state_[static_cast<std::size_t>(cpu)][level];
    if (now() - st.last_balance < balance_interval(st, busy)) continue;
    st.last_balance = now();
    // Only one worker of a group balances a level at a time; if it is not
    // us, the wider levels are not ours either this tick. load_balance()
    // takes its balanced exit then: the failures reset, the interval backs
    // off.
    if (!should_we_balance(cpu, level, idle)) {
      st.nr_balance_failed = 0;
      const auto max_iv = static_cast<std::int64_t>(chain[level].max_interval_ms) * ns_per_ms;
      if (st.balance_interval_ns < max_iv) st.balance_interval_ns *= 2;
      break;
    }
    const unsigned n = load_balance(cpu, level, idle, now, random, scratch);
    if (n > 0) {
      // The worker has work now: the wider levels balance as a busy one.
      pulled += n;
      idle = cpu_idle_type::not_idle;
      busy = true;
    }
    random = lcg_next(random);
  }
  r.pulled = pulled;
  // The nohz kick (nohz_balancer_kick()): a busy worker wakes a parked
  // one, which then balances for itself, when fibers are queued behind it
  // (rq->nr_running >= 2) or when more than one worker of its LLC is busy
  // (sd_llc_shared->nr_busy_cpus > 1): the idle ones elsewhere may take
  // some of the LLC's work. An idle worker kicks nobody, even if this
  // tick's balance pulled it some work (rq->idle_balance).
  std::int64_t& last_kick = last_idle_kick_[static_cast<std::size_t>(cpu)];
  if (was_busy && now() - last_kick >= cfg_.idle_kick_interval_ns &&
      (q.nr_queued.load(std::memory_order_relaxed) > 0 || llc_busy_cpus(cpu) > 1)) {
    last_kick = now();
    r.kick = true;
  }
}

}  // namespace usched::detail
