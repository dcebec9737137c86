// load.cpp: load tracking's runqueue side: what a runqueue publishes for
// lock-free snapshots, and the util estimates (util_est) of the fibers
// that leave it. The PELT arithmetic is pelt.hpp's; the per-switch update
// (update_load) is inline, in engine_inline.hpp.
#include "engine.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace usched::detail {

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


// ---- v4.11's per-CPU load history (policy_traits::cpu_load_signal) -----------

namespace {

// Which tick a time falls in: the kernel's jiffies.
std::int64_t jiffies_of(std::int64_t now, std::int64_t tick_ns) noexcept {
  return tick_ns > 0 ? now / tick_ns : 0;
}

// decay_load_missed()'s fixed point: a factor is out of 1 << 7 (the
// kernel's DEGRADE_SHIFT: a 128-point scale).
constexpr unsigned degrade_shift = 7;

// After this many missed ticks index i has decayed to nothing, as the
// kernel's degrade_zero_ticks[] rounds it (index 0 never decays; index 1
// halves at each tick).
constexpr std::uint64_t degrade_zero_ticks[cpu_snapshot::cpu_load_indices] = {0, 8, 32, 64, 128};

// degrade_factor[i][j] = 128 x (1 - 1/2^i)^(2^j), rounded down: what is
// left of a load at index i after 2^j missed ticks, on the 128-point scale.
// Computed, not typed: the same numbers as the kernel's table.
struct degrade_table {
  unsigned factor[cpu_snapshot::cpu_load_indices][degrade_shift + 1] = {};
  constexpr degrade_table() {
    for (std::size_t i = 1; i < cpu_snapshot::cpu_load_indices; ++i) {
      // 1 - 1/2^i, squared once per step j.
      double keep = 1.0 - 1.0 / static_cast<double>(1u << i);
      for (unsigned j = 0; j <= degrade_shift; ++j) {
        factor[i][j] = static_cast<unsigned>(keep * (1u << degrade_shift));
        keep *= keep;
      }
    }
  }
};
constexpr degrade_table degrade{};

// decay_load_missed(): `load` x (1 - 1/2^idx)^missed, for the ticks a
// worker missed while idle with its tick stopped (nothing accrued then),
// by the binary digits of `missed`.
unsigned long decay_load_missed(unsigned long load, std::uint64_t missed, std::size_t idx) noexcept {
  if (missed == 0) return load;
  if (missed >= degrade_zero_ticks[idx]) return 0;
  if (idx == 1) return load >> missed;
  for (unsigned j = 0; missed != 0; ++j, missed >>= 1) {
    if (missed & 1) load = (load * degrade.factor[idx][j]) >> degrade_shift;
  }
  return load;
}

}  // namespace

// weighted_cpuload(): the root cfs_rq's runnable_load_avg. With the fibers
// in the root cgroup that is their runnable load; with them in one cgroup
// it is the group entity's load while the entity is queued, the group's
// load_avg with its blocked part (update_tg_cfs_load() set the entity's
// load from it), and what is left of the root's runnable load, nothing or
// a rounding's worth, once the entity is dequeued with the last runnable
// fiber (dequeue_entity_load_avg()).
unsigned long engine::weighted_cpuload(const runqueue& q) const noexcept {
  if (traits_.cpu_load_signal == weighted_load::group_entity && q.nr_running > 0) return q.pelt.all.load_avg;
  return q.pelt.runnable_load_avg;
}

namespace {

// cpu_load_update(): index 0 takes `load`; index i keeps 1 - 1/2^i of its
// old value and takes 1/2^i of `load`, rounding up while the load rises so
// that it reaches a steady load. With pending > 1 ticks missed (the
// worker's tick was stopped while idle) the old value first decays over the
// pending - 1 missed ticks, the part recorded at idle entry (index 0, the
// tickless load) held steady instead of decaying.
void cpu_load_update(std::atomic<unsigned long> (&cpu_load)[cpu_snapshot::cpu_load_indices], unsigned long load,
                     std::uint64_t pending) noexcept {
  const unsigned long tickless = cpu_load[0].load(std::memory_order_relaxed);
  cpu_load[0].store(load, std::memory_order_relaxed);
  for (std::size_t i = 1; i < cpu_snapshot::cpu_load_indices; ++i) {
    const unsigned long scale = 1UL << i;
    unsigned long old = decay_load_missed(cpu_load[i].load(std::memory_order_relaxed), pending - 1, i);
    // Never below zero: a decayed tickless load is at most the tickless
    // load, so the unsigned wrap of the subtraction is undone by the sum.
    if (tickless != 0) old = old - decay_load_missed(tickless, pending - 1, i) + tickless;
    const unsigned long incoming = load > old ? load + scale - 1 : load;
    cpu_load[i].store((old * (scale - 1) + incoming) >> i, std::memory_order_relaxed);
  }
}

}  // namespace

// cpu_load_catch_up(): cpu_load_update_nohz(): the ticks since the last
// update, if any, in one step.
void engine::cpu_load_catch_up(runqueue& q, std::int64_t jiffies, unsigned long load) noexcept {
  if (jiffies <= q.last_load_update_tick) return;
  const auto pending = static_cast<std::uint64_t>(jiffies - q.last_load_update_tick);
  q.last_load_update_tick = jiffies;
  cpu_load_update(q.cpu_load, load, pending);
}

void engine::cpu_load_tick(runqueue& q, const now_source& now) noexcept {
  if (!keeps_cpu_load_) return;
  const std::int64_t jiffies = jiffies_of(now(), cfg_.tick_ns);
  if (q.tick_stopped) {
    if (q.nr_running > 0) {
      // Running again without having passed its idle exit (a fiber queued
      // by another path): that exit's catch-up now.
      q.tick_stopped = false;
      cpu_load_catch_up(q, jiffies, weighted_cpuload(q));
      return;
    }
    // Still idle: nohz_idle_balance()'s cpu_load_update_idle() on its
    // behalf, which decays the history with a load of 0, unless there is
    // load (a rounding's worth of runnable load left: it bails out).
    if (weighted_cpuload(q) == 0) cpu_load_catch_up(q, jiffies, 0);
    return;
  }
  // cpu_load_update_periodic(): one tick, whatever the time since the last
  // (a busy worker's ticks are late by its preempt points, never missed).
  q.last_load_update_tick = jiffies;
  cpu_load_update(q.cpu_load, weighted_cpuload(q), 1);
}

void engine::cpu_load_idle_enter(runqueue& q) noexcept {
  if (!keeps_cpu_load_) return;
  q.lock.lock();
  if (!q.tick_stopped && q.nr_running == 0) {
    q.tick_stopped = true;
    q.cpu_load[0].store(weighted_cpuload(q), std::memory_order_relaxed);
  }
  q.lock.unlock();
}

void engine::cpu_load_idle_exit(runqueue& q, const now_source& now) noexcept {
  if (!keeps_cpu_load_ || !q.tick_stopped) return;
  q.lock.lock();
  q.tick_stopped = false;
  cpu_load_catch_up(q, jiffies_of(now(), cfg_.tick_ns), weighted_cpuload(q));
  q.lock.unlock();
}

}  // namespace usched::detail
