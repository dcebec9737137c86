// placement.cpp: where a new or woken fiber goes. The engine reads every
// worker (or only the LLCs a wake-up reads) into a snapshot, asks the
// policy (select_cpu), and applies what the placement noted: the fiber's
// recent_used_cpu, the LLC's has_idle_cores hint, the waker's scan cost.
#include "engine.hpp"

#include <algorithm>
#include <cassert>

namespace usched::detail {

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
  // The idle state its backend reported; a busy worker's is stale, and
  // nothing reads it.
  s.idle_exit_latency_ns = s.idle ? q.idle_exit_latency.load(std::memory_order_relaxed) : 0;
  s.idle_stamp_ns = s.idle ? q.idle_since.load(std::memory_order_relaxed) : 0;
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
  // (an idle worker's estimate is 0: nothing is queued there); util_avg
  // alone for a policy of a kernel before util_est (v4.17).
  const unsigned long est = util_est_ ? q.util_est_pub.load(std::memory_order_relaxed) : 0;
  s.util_avg = std::min(std::max(current(q.util_avg_pub, q.removed_util), est), s.capacity);
  s.runnable_avg = current(q.runnable_avg_pub, q.removed_runnable);
  s.curr_preferred_node = q.curr_preferred_node.load(std::memory_order_relaxed);
  s.curr_load = q.curr_load.load(std::memory_order_relaxed);
  s.nr_numa_running = q.nr_numa_running.load(std::memory_order_relaxed);
  s.nr_preferred_running = q.nr_preferred_running.load(std::memory_order_relaxed);
  // rq->cpu_load[] as its worker last wrote it: a remote balancer reads a
  // parked worker's history as that worker left it, decayed only by the
  // catch-ups of its missed ticks (cpu_load_update_idle(),
  // cpu_load_update_nohz_stop()).
  if (keeps_cpu_load_) {
    for (std::size_t k = 0; k < cpu_snapshot::cpu_load_indices; ++k) {
      s.cpu_load[k] = q.cpu_load[k].load(std::memory_order_relaxed);
    }
  }
}

fiber_view engine::view_of(const sched_entity& se, const now_source& now, bool hot_check) const noexcept {
  fiber_view v;
  v.load_avg = se.avg.load_avg;
  v.util_avg = util_est_ ? task_util_est(se) : se.avg.util_avg;
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
  if (traits_.places_without_snapshot) {
    if (scratch.size() != nr_cpus()) scratch.resize(nr_cpus());
  } else if (kind == placement_kind::wake && traits_.wake_reads_only_llcs && se.preferred_node < 0) {
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
  if (origin >= 0 && !traits_.places_without_snapshot) {
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

}  // namespace usched::detail
