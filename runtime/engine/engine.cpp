// engine.cpp: runqueues, the local discipline, load tracking, placement and
// the balance driver.
#include "engine.hpp"

#include <algorithm>
#include <cassert>

namespace usched::detail {
namespace {

// How often a domain's counters may show a failed pass before the busiest
// worker is asked to yield its running fiber (the kernel's active balance,
// need_active_balance(): nr_balance_failed > cache_nice_tries + 2).
constexpr unsigned active_balance_extra_failures = 2;

// Balance intervals are kept in ns; the domains give them in ms.
constexpr std::int64_t ns_per_ms = 1'000'000;

// cache_nice_tries of a level: 0 at SMT, 1 at LLC and package, 2 across NUMA
// nodes (sd_init()).
unsigned cache_nice_tries(const sched_domain& sd) noexcept {
  if (sd.has_flag(SD_SHARE_CPUCAPACITY)) return 0;
  if (sd.has_flag(SD_NUMA)) return 2;
  return 1;
}

}  // namespace

engine::engine(domain_tree domains, std::unique_ptr<usched::policy> pol, engine_config cfg)
    : domains_(std::move(domains)),
      policy_(std::move(pol)),
      cfg_(cfg),
      fair_(policy_->traits().discipline == queue_discipline::fair),
      lifo_(policy_->traits().discipline == queue_discipline::lifo),
      tracks_load_(fair_ && cfg_.load_tracking),
      places_without_snapshot_(policy_->traits().places_without_snapshot),
      wake_reads_only_llcs_(policy_->traits().wake_reads_only_llcs),
      pulls_when_idle_(policy_->traits().pulls_when_idle),
      smt_ignores_cache_hot_(policy_->traits().smt_ignores_cache_hot),
      shortens_busy_interval_(policy_->traits().shortens_busy_interval),
      rations_newidle_(policy_->traits().rations_newidle),
      rqs_(std::make_unique<runqueue[]>(domains_.nr_cpus())),
      counters_(std::make_unique<cpu_counters[]>(domains_.nr_cpus())) {
  // The granularities grow with the machine (update_sysctl()); sched_nr_
  // latency, their ratio, does not.
  const auto factor = static_cast<std::int64_t>(tunable_factor(cfg_.scaling, nr_cpus()));
  cfg_.sched_latency_ns *= factor;
  cfg_.min_granularity_ns *= factor;
  cfg_.wakeup_granularity_ns *= factor;
  nr_latency_ = static_cast<unsigned>(
      std::max<std::int64_t>(1, (cfg_.sched_latency_ns + cfg_.min_granularity_ns - 1) / std::max<std::int64_t>(1, cfg_.min_granularity_ns)));
  if (!fair_) {
    for (std::size_t c = 0; c < nr_cpus(); ++c) rqs_[c].slice_ns = cfg_.fifo_slice_ns;
  }
  // sched_slice() of n fibers of one weight, n up to sched_nr_latency: the
  // latency period shared n ways.
  equal_slice_.resize(std::min<std::size_t>(nr_latency_, max_equal_slice) + 1);
  for (std::size_t n = 1; n < equal_slice_.size(); ++n) {
    equal_slice_[n] = cfg_.sched_latency_ns / static_cast<std::int64_t>(n);
  }
  // The LLC and SMT maps of the wake-up placement's has_idle_cores hint.
  llc_level_.assign(nr_cpus(), -1);
  smt_siblings_.resize(nr_cpus());
  idle_cores_ = std::make_unique<std::atomic<bool>[]>(nr_cpus());
  for (std::size_t c = 0; c < nr_cpus(); ++c) {
    const auto& chain = domains_.per_cpu[c];
    for (std::size_t l = 0; l < chain.size(); ++l) {
      const sched_domain& sd = chain[l];
      if (sd.has_flag(SD_SHARE_PKG_RESOURCES)) llc_level_[c] = static_cast<int>(l);
      if (sd.has_flag(SD_SHARE_CPUCAPACITY) && smt_siblings_[c].empty()) smt_siblings_[c] = sd.span.get();
    }
    if (!smt_siblings_[c].empty()) smt_present_ = true;
    idle_cores_[c].store(true, std::memory_order_relaxed);
  }
  // As the kernel boots its runqueues (sched_init()).
  for (std::size_t c = 0; c < nr_cpus(); ++c) {
    rqs_[c].avg_idle.store(2 * cfg_.migration_cost_ns, std::memory_order_relaxed);
    rqs_[c].max_idle_balance_cost.store(cfg_.migration_cost_ns, std::memory_order_relaxed);
  }
  sd_state_.resize(nr_cpus());
  last_idle_kick_.assign(nr_cpus(), 0);
  level_counters_.resize(nr_cpus());
  for (std::size_t c = 0; c < nr_cpus(); ++c) {
    const auto& chain = domains_.per_cpu[c];
    sd_state_[c].resize(chain.size());
    for (std::size_t l = 0; l < chain.size(); ++l) {
      sd_state_[c][l].balance_interval_ns = static_cast<std::int64_t>(chain[l].min_interval_ms) * ns_per_ms;
    }
    level_counters_[c] = std::make_unique<level_counters[]>(chain.size());
  }
}

// ---- queue structures --------------------------------------------------------

// The timeline's order and its shortcuts are its own (timeline.hpp): a
// burst of spawns joins the sorted run at its top end, a woken fiber's
// sleeper credit usually puts it at the tree's left end.
void engine::timeline_insert(runqueue& q, sched_entity* se) noexcept { q.timeline.insert(*se); }

void engine::timeline_erase(runqueue& q, sched_entity* se) noexcept {
  // The fiber leaves the queue: the hand-off may no longer name it.
  if (se == q.handoff) q.handoff = nullptr;
  q.timeline.erase(*se);
}

sched_entity* engine::queue_first(runqueue& q) noexcept {
  if (fair_) return q.timeline.leftmost();
  return q.head;
}

// ---- accounting --------------------------------------------------------------

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
  c->sum_exec += delta;
  if (fair_) {
    c->vruntime += calc_delta_fair(delta, c->weight);
    update_min_vruntime(q);
  }
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

void engine::publish(runqueue& q) noexcept {
  // FIFO and LIFO keep no vruntime: nothing to publish, and no line to
  // dirty on a wake-up's path.
  if (fair_) q.min_vruntime_pub.store(q.min_vruntime, std::memory_order_relaxed);
  if (tracks_load()) publish_load(q);
}

// publish_load(): the signals snapshots read without the lock, and the
// running fiber's preferred node and load. pick_next() calls it only when
// the signals changed (a period boundary, a removal, a fiber leaving or
// joining the runqueue), which keeps these stores off most switches; the
// tick and every enqueue call it too.
void engine::publish_load(runqueue& q) noexcept {
  q.load_avg_pub.store(q.pelt.all.load_avg, std::memory_order_relaxed);
  q.runnable_load_pub.store(q.pelt.runnable_load_avg, std::memory_order_relaxed);
  q.util_avg_pub.store(q.pelt.all.util_avg, std::memory_order_relaxed);
  q.util_est_pub.store(q.util_est, std::memory_order_relaxed);
  q.runnable_avg_pub.store(q.pelt.all.runnable_avg, std::memory_order_relaxed);
  q.pelt_update_pub.store(q.pelt.all.last_update, std::memory_order_relaxed);
  q.curr_preferred_node.store(q.curr ? q.curr->preferred_node : -1, std::memory_order_relaxed);
  q.curr_load.store(q.curr ? q.curr->avg.load_avg : 0, std::memory_order_relaxed);
}

// util_est_dequeue(): the kernel's util_est_dequeue() and util_est_update()
// (v5.9/v5.10 fair.c). On a sleep the estimate is refreshed from util_avg:
// a rise is taken at once (UTIL_EST_FASTUP); a fall moves the average a
// quarter of the way, unless it is within 1% of capacity already, or the
// fiber's util exceeds the worker's capacity (no idle time to trust).
// usched does not keep the kernel's UTIL_AVG_UNCHANGED flag, which skips
// the update when PELT did not accrue since the enqueue: a fiber that
// slept after under a millisecond of running refreshes its estimate from
// an unchanged util_avg, which moves it only by the same rules.
void engine::util_est_dequeue(runqueue& q, sched_entity& se, bool sleep) noexcept {
  const unsigned long est = util_est_of(se);
  q.util_est -= std::min(q.util_est, est);
  if (!sleep) return;
  constexpr unsigned weight_shift = 2;            // UTIL_EST_WEIGHT_SHIFT
  constexpr long margin = capacity_scale / 100;   // within_margin(): 1%
  // util_avg never exceeds the capacity scale; the cast keeps the kernel's
  // 32-bit fields.
  const auto util = static_cast<std::uint32_t>(std::min<unsigned long>(se.avg.util_avg, 0xffffffffu));
  se.util_est_enqueued = util;
  if (se.util_est_ewma < util) {
    se.util_est_ewma = util;
    return;
  }
  const long diff = static_cast<long>(util) - static_cast<long>(se.util_est_ewma);
  if (diff > -margin && diff < margin) return;
  if (util > capacity_scale) return;
  se.util_est_ewma = static_cast<std::uint32_t>(
      ((static_cast<long>(se.util_est_ewma) << weight_shift) + diff) >> weight_shift);
}

// check_preempt(): a fiber just arrived on `q`; if its vruntime is smaller
// than the running fiber's by more than the wake-up granularity (scaled to
// the arriving fiber's weight), ask the running fiber to yield at its next
// preempt point (check_preempt_wakeup / wakeup_preempt_entity).
void engine::check_preempt(int cpu, runqueue& q, const sched_entity& se) noexcept {
  if (!fair_ || !q.curr) return;
  const std::int64_t vdiff = static_cast<std::int64_t>(q.curr->vruntime - se.vruntime);
  const auto gran = static_cast<std::int64_t>(calc_delta_fair(cfg_.wakeup_granularity_ns, se.weight));
  if (vdiff > gran && !q.need_resched.load(std::memory_order_relaxed)) {
    q.need_resched.store(true, std::memory_order_relaxed);
    counters_[static_cast<std::size_t>(cpu)].wakeup_preemptions.add();
  }
}

// llc_busy_cpus(): the busy workers of cpu's LLC (the widest level whose
// groups share a cache), 0 without one; read without locks.
unsigned engine::llc_busy_cpus(int cpu) const noexcept {
  const sched_domain* llc = llc_of(static_cast<std::size_t>(cpu));
  if (!llc) return 0;
  unsigned n = 0;
  for (const int c : llc->span) {
    if (!rqs_[static_cast<std::size_t>(c)].idle.load(std::memory_order_relaxed)) ++n;
  }
  return n;
}

// balance_interval(): the kernel's get_sd_balance_interval(): the level's
// interval, stretched by busy_factor on a busy worker, where v5.10 takes one
// tick off so that the levels' periods are not multiples of each other;
// at least one tick and at most max_load_balance_interval (HZ x CPUs / 10
// jiffies: 100 ms a CPU).
std::int64_t engine::balance_interval(const sd_balance_state& st, bool busy) const noexcept {
  std::int64_t interval = st.balance_interval_ns;
  if (busy) {
    interval *= policy_->traits().busy_factor;
    if (shortens_busy_interval_) interval -= cfg_.tick_ns;
  }
  const std::int64_t max_interval = static_cast<std::int64_t>(nr_cpus()) * 100 * ns_per_ms;
  return std::clamp(interval, cfg_.tick_ns, std::max(cfg_.tick_ns, max_interval));
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
    q.need_resched.store(true, std::memory_order_relaxed);
    counters_[static_cast<std::size_t>(cpu)].tick_preemptions.add();
  }
}

// ---- snapshot and placement --------------------------------------------------

void engine::snapshot(std::vector<cpu_snapshot>& out, const now_source& now) const {
  const std::size_t n = nr_cpus();
  out.resize(n);
  for (std::size_t i = 0; i < n; ++i) snapshot_cpu(i, out[i], now);
}

void engine::snapshot_llcs(std::vector<cpu_snapshot>& out, const now_source& now, int a, int b) const {
  out.resize(nr_cpus());
  const auto valid = [&](int cpu) { return cpu >= 0 && static_cast<std::size_t>(cpu) < nr_cpus(); };
  // Which LLC a worker is in: its first worker (the worker itself when its
  // cache is its own); -1 for none.
  const auto llc_key = [&](int cpu) {
    if (!valid(cpu)) return -1;
    const int first = llc_first(static_cast<std::size_t>(cpu));
    return first >= 0 ? first : cpu;
  };
  const auto fill = [&](int cpu) {
    if (!valid(cpu)) return;
    const auto c = static_cast<std::size_t>(cpu);
    if (const sched_domain* llc = llc_of(c)) {
      for (const int i : llc->span.get()) snapshot_cpu(static_cast<std::size_t>(i), out[static_cast<std::size_t>(i)], now);
    } else {
      snapshot_cpu(c, out[c], now);
    }
  };
  fill(a);
  if (llc_key(b) != llc_key(a)) fill(b);  // usually the same LLC: once is enough
}

void engine::snapshot_cpu(std::size_t i, cpu_snapshot& s, const now_source& now) const {
  const runqueue& q = rqs_[i];
  s.nr_queued = q.nr_queued.load(std::memory_order_relaxed);
  s.nr_pinned = q.nr_pinned.load(std::memory_order_relaxed);
  s.idle = q.idle.load(std::memory_order_relaxed);
  s.nr_running = s.nr_queued + (s.idle ? 0u : 1u);
  s.capacity = domains_.cpu_capacity.empty() ? capacity_scale : domains_.cpu_capacity[i];
  s.numa_node = domains_.cpu_node.empty() ? 0 : domains_.cpu_node[i];
  s.llc_has_idle_cores =
      llc_first(i) < 0 || idle_cores_[static_cast<std::size_t>(llc_first(i))].load(std::memory_order_relaxed);
  // The placing worker's own (select_cpu fills them in): no other line of
  // every runqueue to read.
  s.avg_idle_ns = 0;
  s.avg_scan_cost_ns = 0;
  if (!tracks_load()) return;
  // A runqueue nobody updated for a while (its worker is parked) still
  // holds the values of its last update; bring them to now, as the
  // kernel's blocked-load updates do before a balance
  // (update_blocked_averages() in newidle_balance(), the nohz stats
  // update of idle CPUs): the contributions of fibers that woke up on
  // another worker since come off first (update_cfs_rq_load_avg()'s
  // removed sums), then the rest decays.
  const std::int64_t last = q.pelt_update_pub.load(std::memory_order_relaxed);
  std::uint64_t periods = 0;
  if (s.nr_running == 0 && now() > last) {
    periods = static_cast<std::uint64_t>(now() - last) >> (pelt_time_shift + 10);
  }
  const auto current = [&](const std::atomic<unsigned long>& pub, const std::atomic<unsigned long>& removed) {
    const unsigned long v = pub.load(std::memory_order_relaxed);
    const unsigned long r = removed.load(std::memory_order_relaxed);
    return static_cast<unsigned long>(pelt_decay(v > r ? v - r : 0, periods));
  };
  s.load_avg = current(q.load_avg_pub, q.removed_load);
  s.runnable_load = q.runnable_load_pub.load(std::memory_order_relaxed);
  // cpu_util(): the larger of util_avg and the queued fibers' estimates
  // (an idle worker's estimate is 0: nothing is queued there).
  s.util_avg = std::min(std::max(current(q.util_avg_pub, q.removed_util), q.util_est_pub.load(std::memory_order_relaxed)),
                        s.capacity);
  s.runnable_avg = current(q.runnable_avg_pub, q.removed_runnable);
  s.curr_preferred_node = q.curr_preferred_node.load(std::memory_order_relaxed);
  s.curr_load = q.curr_load.load(std::memory_order_relaxed);
}

fiber_view engine::view_of(const sched_entity& se, const now_source& now, bool hot_check) const noexcept {
  fiber_view v;
  v.load_avg = se.avg.load_avg;
  v.util_avg = tracks_load_ ? task_util_est(se) : se.avg.util_avg;
  v.weight = se.weight;
  v.preferred_node = se.preferred_node;
  v.cache_hot = hot_check && now() - se.exec_start < cfg_.migration_cost_ns;
  v.recent_used_cpu = se.recent_used_cpu;
  return v;
}

int engine::select_cpu(placement_kind kind, sched_entity& se, int origin, std::uint64_t random,
                       std::vector<cpu_snapshot>& scratch, const now_source& now, bool by_origin) {
  // At a fork the child's recent_used_cpu is its parent's CPU.
  if (kind == placement_kind::spawn && origin >= 0) se.recent_used_cpu = origin;
  if (se.pinned >= 0) return se.pinned;
  if (nr_cpus() == 1) return 0;
  // Fork balancing off (engine_config::fork_balance): a spawn from a worker
  // stays there, as a fork does where no domain has SD_BALANCE_FORK; idle
  // workers pull it. A fiber that prefers a node is still placed.
  if (stays_unbalanced(kind, se, origin)) return origin;
  const int prev = kind == placement_kind::wake ? se.cpu.load(std::memory_order_relaxed) : -1;
  if (places_without_snapshot_) {
    if (scratch.size() != nr_cpus()) scratch.resize(nr_cpus());
  } else if (kind == placement_kind::wake && wake_reads_only_llcs_ && se.preferred_node < 0) {
    snapshot_llcs(scratch, now, origin, prev);
  } else {
    snapshot(scratch, now);
  }
  placement_request req;
  req.kind = kind;
  req.origin = origin;
  req.prev = prev;
  req.fiber = view_of(se, now, false);
  req.cpus = scratch;
  req.domains = &domains_;
  req.random = random;
  if (origin >= 0 && !places_without_snapshot_) {
    const runqueue& mine = rq(origin);
    scratch[static_cast<std::size_t>(origin)].avg_idle_ns = mine.avg_idle.load(std::memory_order_relaxed);
    scratch[static_cast<std::size_t>(origin)].avg_scan_cost_ns = mine.avg_scan_cost.load(std::memory_order_relaxed);
  }
  placement_effects fx;
  req.effects = &fx;
  const int cpu = policy_->select_cpu(req);
  assert(cpu >= 0 && static_cast<std::size_t>(cpu) < nr_cpus());
  apply_effects(fx, se, origin, by_origin);
  if (kind == placement_kind::wake && origin >= 0) {
    cpu_counters& c = counters_[static_cast<std::size_t>(origin)];
    if (cpu == req.prev) {
      c.wake_prev.add();
    } else if (rq(cpu).idle.load(std::memory_order_relaxed) && req.prev >= 0 &&
               domains_.share_llc(cpu, req.prev)) {
      c.wake_idle_sibling.add();
    } else {
      c.wake_other.add();
    }
  }
  return cpu;
}

// apply_effects(): what the placement wrote besides its answer. The
// fiber's recent_used_cpu is its waker's to write (the fiber is off every
// runqueue); the waker's own running fiber and scan average are its
// worker's, written only when that worker is the one placing (a timer fired
// by another worker on origin's behalf leaves them).
void engine::apply_effects(const placement_effects& fx, sched_entity& se, int origin, bool by_origin) noexcept {
  if (fx.fiber_recent_used_cpu != placement_effects::keep_recent) se.recent_used_cpu = fx.fiber_recent_used_cpu;
  if (fx.clear_idle_cores >= 0) {
    const int llc = llc_first(static_cast<std::size_t>(fx.clear_idle_cores));
    if (llc >= 0) idle_cores_[static_cast<std::size_t>(llc)].store(false, std::memory_order_relaxed);
  }
  if (origin < 0 || !by_origin) return;
  runqueue& q = rq(origin);
  if (fx.waker_recent_used_cpu) {
    // Only this worker's thread switches its running fiber, so curr is
    // stable here.
    if (sched_entity* waker = q.curr) waker->recent_used_cpu = origin;
  }
  if (fx.scanned >= 0) {
    const std::int64_t cost = cfg_.wake_scan_per_cpu_ns * fx.scanned;
    std::int64_t avg = q.avg_scan_cost.load(std::memory_order_relaxed);
    avg += (cost - avg) / 8;  // update_avg()
    q.avg_scan_cost.store(avg, std::memory_order_relaxed);
  }
}

// update_idle_core(): `cpu` is going idle (set_next_task_idle() ->
// __update_idle_core()): if every SMT sibling is idle too, its LLC has an
// idle core again.
void engine::update_idle_core(int cpu) noexcept {
  if (!smt_present_) return;
  const int llc = llc_first(static_cast<std::size_t>(cpu));
  if (llc < 0 || idle_cores_[static_cast<std::size_t>(llc)].load(std::memory_order_relaxed)) return;
  for (const int s : smt_siblings_[static_cast<std::size_t>(cpu)]) {
    if (s != cpu && !rqs_[static_cast<std::size_t>(s)].idle.load(std::memory_order_relaxed)) return;
  }
  idle_cores_[static_cast<std::size_t>(llc)].store(true, std::memory_order_relaxed);
}

// ---- enqueue / pick ------------------------------------------------------------

unsigned engine::enqueue(int cpu, sched_entity* se, enqueue_kind kind, const now_source& now, bool handoff) {
  if (!fair_ && !tracks_load_) return enqueue_fifo(cpu, se, kind, handoff);
  runqueue& q = rq(cpu);
  // The fiber's vruntime and load were last kept relative to the worker it
  // left; read that worker's min_vruntime before taking our own lock (no
  // two locks at once; a slightly stale value only shifts the placement).
  const int from = se->cpu.load(std::memory_order_relaxed);
  const bool migrated = kind == enqueue_kind::wakeup && from >= 0 && from != cpu;
  std::uint64_t from_min = 0;
  if (fair_ && migrated) from_min = rq(from).min_vruntime_pub.load(std::memory_order_relaxed);
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
  if (fair_) {
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
unsigned engine::enqueue_fifo(int cpu, sched_entity* se, enqueue_kind kind, bool handoff) noexcept {
  runqueue& q = rq(cpu);
  q.lock.lock();
  add_runnable(cpu, q, se, kind);
  if (handoff) make_next(cpu, q, se);
  const unsigned queued = q.nr_queued.load(std::memory_order_relaxed);
  q.lock.unlock();
  return queued;
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
  sched_entity* next = q.head;
  if (next) queue_remove(q, next);
  q.curr = next;
  q.need_resched.store(false, std::memory_order_relaxed);
  q.idle.store(next == nullptr, std::memory_order_relaxed);
  // Last, as in pick_next(): from here a waker may enqueue prev elsewhere.
  prev->on_rq.store(false, std::memory_order_release);
  q.lock.unlock();
  return next;
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
  if (prev) {
    prev->wake_pending = false;
    assert(q.curr == prev);
    update_curr(q, now);
    const bool requeue = action == prev_action::requeue;
    if (tracks_load()) load_changed = update_load(q, now(), !requeue);
    q.curr = nullptr;
    if (requeue) {
      queue_insert(q, prev, false);
    } else {
      --q.nr_running;
      q.load_weight -= prev->weight;
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
  if (prev && q.active_balance_dst.load(std::memory_order_relaxed) >= 0) [[unlikely]] {
    push_dst = q.active_balance_dst.exchange(-1, std::memory_order_relaxed);
    pushed = active_balance_victim(q, push_dst);
    if (pushed) {
      if (tracks_load()) pelt_update(pushed->avg, now(), pushed->weight, true, false);
      detach_entity(q, *pushed);
      load_changed = true;
    } else {
      counters_[static_cast<std::size_t>(cpu)].active_abandoned.add();
    }
  }
  sched_entity* next = queue_first(q);
  // A join handed the worker over (hand_off, wake_joiner): that fiber runs
  // next, whatever vruntime order would pick.
  if (fair_ && q.handoff) [[unlikely]] next = q.handoff;
  if (fair_ && yielding && next == prev) {
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
    // Only the fair discipline keeps time: under FIFO and LIFO these stay
    // 0, and a fiber's sched_entity beyond its first line is never written
    // after the fiber is made (see struct fiber).
    if (fair_) {
      set_next_entity(q, *next, now());
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
    attach_fibers(push_dst, &pushed, 1, now);
    counters_[static_cast<std::size_t>(cpu)].active_pushes.add();
    // The worker that asked starts its failure count afresh at the lowest
    // level it shares with this one (the stopper's reset); it applies it
    // at its next pass.
    const auto& chain = domains_.per_cpu[static_cast<std::size_t>(push_dst)];
    for (std::size_t l = 0; l < chain.size(); ++l) {
      const auto& span = chain[l].span;
      if (std::find(span.begin(), span.end(), cpu) != span.end()) {
        rq(push_dst).active_balance_done.store(static_cast<int>(l) + 1, std::memory_order_relaxed);
        break;
      }
    }
    if (pushed_to) *pushed_to = push_dst;
  }
  return next;
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
  if (fair_) {
    for (sched_entity& se : q.timeline) consider(&se);
  } else {
    for (sched_entity* se = q.head; se; se = se->rq_next) consider(se);
  }
  return best;
}

// detach_entity(): take a queued fiber off `src` (locked) to move it to
// another worker: its runnable load leaves, its vruntime becomes relative.
void engine::detach_entity(runqueue& src, sched_entity& se) noexcept {
  queue_remove(src, &se);
  --src.nr_running;
  src.load_weight -= se.weight;
  if (tracks_load()) {
    src.pelt.dequeue_runnable(se.avg);
    src.pelt.detach(se.avg);
    util_est_dequeue(src, se, false);
  }
  se.on_rq.store(false, std::memory_order_relaxed);
  if (fair_) se.vruntime -= src.min_vruntime;  // relative while in flight
}

bool engine::wake_running(sched_entity* se) {
  // on_rq goes false only when the fiber's own worker dequeues it (under
  // the lock), and true only by an enqueue, which only this waker (the one
  // that claimed the wait) can do now: a false read is final.
  if (!se->on_rq.load(std::memory_order_acquire)) return false;
  runqueue& q = rq(se->cpu.load(std::memory_order_relaxed));
  q.lock.lock();
  const bool still = se->on_rq.load(std::memory_order_relaxed);
  if (still) se->wake_pending = true;
  q.lock.unlock();
  return still;
}

// ---- balancing ------------------------------------------------------------------

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
  // Whether a fiber is cache-hot (it ran less than the migration cost ago);
  // the policy decides what that means. Since v5.10 nothing is hot between
  // SMT siblings, which share every cache (task_hot()); the policy says
  // whether it follows that.
  const bool hot_check =
      fair_ && sd && !(sd->has_flag(SD_SHARE_CPUCAPACITY) && smt_ignores_cache_hot_);
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
    if (fair_) se->vruntime += q.min_vruntime;
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
    queue_insert(q, se);
    check_preempt(dst, q, *se);
  }
  note_overload(q);
  publish(q);
  q.lock.unlock();
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
    return 0;
  }
  sched_entity* moved[max_migrate_per_pass];
  const unsigned n = detach_fibers(cpu, d, idle, &sd, st.nr_balance_failed, now, moved, max_migrate_per_pass);
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
    if (busiest.active_balance_dst.compare_exchange_strong(none, cpu, std::memory_order_relaxed)) {
      busiest.need_resched.store(true, std::memory_order_relaxed);
      active_requests_.n.fetch_add(1, std::memory_order_relaxed);
    }
    st.nr_balance_failed = tries + 1;
    if (st.balance_interval_ns < max_iv) st.balance_interval_ns *= 2;
  } else {
    st.balance_interval_ns = min_iv;
  }
  return 0;
}

unsigned engine::newidle_balance(int cpu, const now_source& now, std::uint64_t random,
                                 std::vector<cpu_snapshot>& scratch, bool kicked) {
  const auto& chain = domains_.per_cpu[static_cast<std::size_t>(cpu)];
  if (chain.empty()) return 0;
  runqueue& q = rq(cpu);
  cpu_counters& c = counters_[static_cast<std::size_t>(cpu)];
  const std::int64_t avg_idle = q.avg_idle.load(std::memory_order_relaxed);
  // A pull kick's pass (wake_result::pull) is not rationed.
  const bool rationed = rations_newidle_ && !kicked;
  if (rationed) {
    // The kernel's newidle_balance(): a worker whose idle periods are on
    // average shorter than a migration is worth does not balance at all.
    if (avg_idle < cfg_.migration_cost_ns) {
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
    const std::int64_t t0 = rations_newidle_ && now.measures() ? now.fresh() : 0;
    const unsigned n = load_balance(cpu, level, cpu_idle_type::newly_idle, now, random, scratch);
    if (rations_newidle_) {
      const std::int64_t cost =
          now.measures() ? now.fresh() - t0
                         : cfg_.balance_pass_per_cpu_ns * static_cast<std::int64_t>(chain[level].span.size());
      st.max_newidle_lb_cost = std::max(st.max_newidle_lb_cost, cost);
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
    random = random * 6364136223846793005ULL + 1442695040888963407ULL;
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

unsigned engine::idle_balance(int cpu, const now_source& now, std::uint64_t random,
                              std::vector<cpu_snapshot>& scratch, bool kicked) {
  if (!pulls_when_idle_ || !overloaded()) return 0;
  return newidle_balance(cpu, now, random, scratch, kicked);
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

sched_entity* engine::find_work(int cpu, const now_source& now, std::uint64_t random,
                                std::vector<cpu_snapshot>& scratch, bool kicked) {
  runqueue& q = rq(cpu);
  if (sched_entity* se = pick_next(cpu, nullptr, prev_action::requeue, now)) {
    if (rations_newidle_) close_idle_period(q, now);
    return se;
  }
  // Going idle: the idle period starts (newidle_balance() stamps it first
  // thing, whether or not it balances).
  if (rations_newidle_ && q.idle_stamp.load(std::memory_order_relaxed) == 0) {
    q.idle_stamp.store(std::max<std::int64_t>(1, now()), std::memory_order_relaxed);
  }
  if (idle_balance(cpu, now, random, scratch, kicked) == 0) return nullptr;
  return pick_next(cpu, nullptr, prev_action::requeue, now);
}

wake_result engine::wake_up(sched_entity* se, placement_kind kind, int origin, std::uint64_t random,
                            std::vector<cpu_snapshot>& scratch, const now_source& now, bool by_origin) {
  wake_result r;
  // Woken before it finished blocking: it keeps its place on its worker.
  if (kind == placement_kind::wake && wake_running(se)) return r;
  r.cpu = select_cpu(kind, *se, origin, random, scratch, now, by_origin);
  // A spawn onto the spawner's own worker (a spawn's origin is the worker
  // whose running fiber spawns): no one is parked there to be told (the
  // kernel's wake_up_new_task on this CPU). Decided without reading the
  // runqueue, whose line a thief may hold until the enqueue takes it.
  enqueue_kind how = enqueue_kind::wakeup;
  if (kind == placement_kind::spawn) how = origin == r.cpu ? enqueue_kind::spawn_local : enqueue_kind::spawn;
  // Read before the enqueue, after which the fiber may be another worker's.
  const bool stayed = stays_unbalanced(kind, *se, origin);
  const unsigned queued = enqueue(r.cpu, se, how, now);
  r.notify = how != enqueue_kind::spawn_local;
  r.kick = queued > 0 && pulls_when_idle_ && !rq(r.cpu).idle.load(std::memory_order_relaxed);
  // A work stealer's spinning worker finds the fiber by itself: a plain kick.
  r.pull = r.kick && stayed && !idle_pulls_by_itself();
  return r;
}

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
      target != q.curr;
  if (queued) make_next(cpu, q, target);
  q.lock.unlock();
  return queued;
}

wake_result engine::wake_joiner(sched_entity* joiner, int cpu, std::uint64_t random,
                                std::vector<cpu_snapshot>& scratch, const now_source& now) {
  if (!hands_back(*joiner, cpu)) return wake_up(joiner, placement_kind::wake, cpu, random, scratch, now);
  return queue_joiner(joiner, cpu, now);
}

wake_result engine::queue_joiner(sched_entity* joiner, int cpu, const now_source& now) {
  wake_result r;
  if (wake_running(joiner)) return r;
  // Its previous worker, as a placement that kept it there would count it.
  counters_[static_cast<std::size_t>(cpu)].wake_prev.add();
  r.cpu = cpu;
  const unsigned queued = enqueue(cpu, joiner, enqueue_kind::wakeup, now, true);
  r.notify = false;
  // The joiner runs next, in the exiting fiber's place: only others queued
  // behind it are work for an idle worker.
  r.kick = queued > 1 && pulls_when_idle_ && !rq(cpu).idle.load(std::memory_order_relaxed);
  return r;
}

pick_result engine::exit_to_joiner(int cpu, sched_entity* prev, sched_entity* joiner, const now_source& now) {
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
  r.next = joiner;
  r.kick = queued > 0 && pulls_when_idle_;
  return r;
}

tick_result engine::tick(int cpu, const now_source& now, std::uint64_t random, std::vector<cpu_snapshot>& scratch) {
  runqueue& q = rq(cpu);
  if (tracks_load() || fair_) {
    q.lock.lock();
    update_curr(q, now);
    if (tracks_load()) update_load(q, now());
    if (fair_ && q.curr && q.nr_running > 1) check_preempt_tick(cpu, q);
    publish(q);
    q.lock.unlock();
  }
  tick_result r;
  if (!policy_->traits().balances_periodically) return r;
  // rebalance_domains(): each level whose interval has passed since its
  // last balance is balanced, narrowest first.
  const auto& chain = domains_.per_cpu[static_cast<std::size_t>(cpu)];
  const bool was_busy = !q.idle.load(std::memory_order_relaxed);
  bool busy = was_busy;
  cpu_idle_type idle = busy ? cpu_idle_type::not_idle : cpu_idle_type::idle;
  unsigned pulled = 0;
  // The longest newly-idle pass of each level decays by 253/256 once a
  // second (about 1%), and the chain's sum bounds the idle average.
  if (rations_newidle_) {
    std::int64_t max_cost = 0;
    bool decayed = false;
    for (std::size_t level = 0; level < chain.size(); ++level) {
      sd_balance_state& st = sd_state_[static_cast<std::size_t>(cpu)][level];
      if (now() > st.next_decay) {
        st.max_newidle_lb_cost = st.max_newidle_lb_cost * 253 / 256;
        st.next_decay = now() + 1'000 * ns_per_ms;
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
    random = random * 6364136223846793005ULL + 1442695040888963407ULL;
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
  return r;
}

void engine::add_counters(int cpu, worker_stats& out) const {
  const cpu_counters& c = counters(cpu);
  out.newidle_attempts = c.newidle_attempts;
  out.newidle_skipped = c.newidle_skipped;
  out.newidle_pulls = c.newidle_pulls;
  out.fibers_pulled = c.fibers_pulled;
  out.wake_prev = c.wake_prev;
  out.wake_idle_sibling = c.wake_idle_sibling;
  out.wake_other = c.wake_other;
  out.wakeup_preemptions = c.wakeup_preemptions;
  out.tick_preemptions = c.tick_preemptions;
  out.active_pushes = c.active_pushes;
  out.active_abandoned = c.active_abandoned;
  out.handoffs = c.handoffs;
  const auto& chain = domains_.per_cpu[static_cast<std::size_t>(cpu)];
  for (std::size_t l = 0; l < chain.size(); ++l) {
    const level_counters& lc = counters(cpu, l);
    domain_level_stats d;
    d.level = to_string(chain[l].level);
    d.attempts = lc.attempts;
    d.balanced = lc.balanced;
    d.successes = lc.successes;
    d.failures = lc.failures;
    d.moved_load = lc.moved[static_cast<std::size_t>(migration_type::migrate_load)];
    d.moved_util = lc.moved[static_cast<std::size_t>(migration_type::migrate_util)];
    d.moved_task = lc.moved[static_cast<std::size_t>(migration_type::migrate_task)];
    d.moved_misfit = lc.moved[static_cast<std::size_t>(migration_type::migrate_misfit)];
    d.odd_picks = lc.odd_picks;
    out.levels.push_back(std::move(d));
  }
}

}  // namespace usched::detail
