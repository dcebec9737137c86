// pelt.hpp: per-entity load tracking (PELT), the kernel's geometric averages
// (kernel/sched/pelt.c), driven by the `now` the engine is given.
//
// Time is cut into periods of 1024 units of 1024 ns (about a millisecond).
// Each signal is a sum of contributions, one per period, where the
// contribution of a period p periods ago is multiplied by y^p with y^32 = 1/2:
// what happened 32 ms ago counts half as much as what happens now. Three
// signals are kept, all scaled to 1024:
//   util_avg      fraction of time running (1024 = always running)
//   runnable_avg  fraction of time runnable, queued or running, times the
//                 number of runnable entities for a runqueue
//   load_avg      weight x fraction of time runnable (a fiber of weight 1024
//                 that is always runnable has load_avg 1024)
// A runqueue's signals are the sums of its entities' (maintained
// incrementally, as the kernel does for a cfs_rq): blocked fibers stop
// accruing but their past contribution stays and decays. The runqueue also
// keeps runnable_load, the load of queued and running fibers only (the
// pre-5.7 kernel's runnable_load_avg), so a policy can choose whether blocked
// load counts (seeds/003).
#pragma once

#include <cstdint>

namespace usched::detail {

// Time unit of PELT: ns >> 10.
inline constexpr unsigned pelt_time_shift = 10;
// Units per period.
inline constexpr std::uint32_t pelt_period = 1024;
// Periods for a contribution to halve (y^32 = 1/2).
inline constexpr unsigned pelt_half_life = 32;
// The largest value a sum reaches, 1024 x sum of y^n: the divider that makes
// an always-on signal average 1024.
inline constexpr std::uint32_t load_avg_max = 47742;
// Weight of a fiber at the default priority (the kernel's NICE_0_LOAD).
inline constexpr unsigned nice_0_weight = 1024;

// pelt_decay() returns val * y^periods.
std::uint64_t pelt_decay(std::uint64_t val, std::uint64_t periods) noexcept;

// The sums and averages of one entity or runqueue.
struct pelt_avg {
  std::int64_t last_update = 0;  // ns, a multiple of 1024
  std::uint64_t load_sum = 0;
  std::uint64_t runnable_sum = 0;
  std::uint64_t util_sum = 0;
  std::uint32_t period_contrib = 0;  // units already accrued in the current period
  // Not PELT's: a fiber's wake-up time-stamp under load tracking, which
  // writes this line at every enqueue anyway (engine::wake_stamp_slot); in
  // what would otherwise be padding.
  std::uint32_t wake_stamp = 0;
  unsigned long load_avg = 0;
  unsigned long runnable_avg = 0;
  unsigned long util_avg = 0;

  // The divider for the current position in the period (get_pelt_divider).
  std::uint32_t divider() const noexcept { return load_avg_max - pelt_period + period_contrib; }
};

// pelt_accumulate() advances `sa` to `now`, accruing the time since its last
// update with `load` (a weight sum, or 1 for an entity on a runqueue),
// `runnable` (entities runnable) and `running` (0 or 1). Returns true when a
// period boundary was crossed: only then do the averages change, and the
// caller recomputes them with pelt_average().
bool pelt_accumulate(pelt_avg& sa, std::int64_t now, unsigned long load, unsigned long runnable,
                     unsigned running) noexcept;

// pelt_due() is false when less than one PELT time unit (1024 ns) has passed
// since `sa`'s last update, so an update would change nothing. It guards a
// runqueue's update where its inputs change (enqueue, dequeue, tick); the
// switch path uses pelt_period_due() for the runqueue and the branch-free
// pelt_update_running() for the entity instead.
inline bool pelt_due(const pelt_avg& sa, std::int64_t now) noexcept {
  return now - sa.last_update >= (std::int64_t{1} << pelt_time_shift) || now < sa.last_update;
}

// pelt_period_due() is true once `now` reaches the end of the period `sa`
// last accrued into: only then would an update change the averages. While
// an entity's or runqueue's inputs stay the same, accruing [a, b) and then
// [b, c) adds what accruing [a, c) in one step adds (up to the rounding of
// the decay), so an update that changes nothing but the sums may wait for
// the period's end or for the next change of inputs.
inline bool pelt_period_due(const pelt_avg& sa, std::int64_t now) noexcept {
  return now - sa.last_update >= static_cast<std::int64_t>(pelt_period - sa.period_contrib) << pelt_time_shift ||
         now < sa.last_update;
}
// pelt_average() recomputes the averages from the sums; `weight` scales
// load_avg (an entity's weight; 1 for a runqueue whose load is a weight sum).
void pelt_average(pelt_avg& sa, unsigned long weight) noexcept;

// pelt_update() is accumulate then average, for an entity. It (or
// pelt_update_running() below, for the running entity) runs on every switch
// and wake-up under load tracking, so the common case is inline and has no
// data-dependent branch: within one period nothing decays, and accruing is
// adding the elapsed whole units (often none) to the sums. Asking first
// whether a unit has passed (pelt_due) is a branch that goes one way or the
// other every few switches; mispredicted, it cost more than the additions it
// skips.
inline void pelt_update(pelt_avg& sa, std::int64_t now, unsigned long weight, bool on_rq,
                        bool running) noexcept {
  const auto units = static_cast<std::uint64_t>(now - sa.last_update) >> pelt_time_shift;
  if (now >= sa.last_update && sa.period_contrib + units < pelt_period) [[likely]] {
    sa.last_update += static_cast<std::int64_t>(units << pelt_time_shift);
    sa.period_contrib += static_cast<std::uint32_t>(units);
    if (on_rq) {
      sa.load_sum += units;
      sa.runnable_sum += units << pelt_time_shift;
      if (running) sa.util_sum += units << pelt_time_shift;
    }
    return;
  }
  if (pelt_accumulate(sa, now, on_rq ? 1 : 0, on_rq ? 1 : 0, running ? 1 : 0)) {
    pelt_average(sa, weight);
  }
}
// pelt_update_running() is pelt_update() for the running entity, picked at
// `picked_at` after waiting in its runqueue since its last update: the time
// up to the pick accrues as runnable and not running, the rest as running
// (the kernel accrues at the pick, in set_next_entity(), and again here).
// Within one period that is the same sums as the two updates, computed in
// one step: the whole units since the last update, less those a pick-time
// update would have taken for the queue, count as running. Across a period
// boundary it is the two updates.
inline void pelt_update_running(pelt_avg& sa, std::int64_t now, std::int64_t picked_at,
                                unsigned long weight) noexcept {
  const auto units = static_cast<std::uint64_t>(now - sa.last_update) >> pelt_time_shift;
  if (now >= sa.last_update && sa.period_contrib + units < pelt_period) [[likely]] {
    const std::int64_t waited = picked_at > sa.last_update ? picked_at - sa.last_update : 0;
    const auto queued = static_cast<std::uint64_t>(waited) >> pelt_time_shift;
    sa.last_update += static_cast<std::int64_t>(units << pelt_time_shift);
    sa.period_contrib += static_cast<std::uint32_t>(units);
    sa.load_sum += units;
    sa.runnable_sum += units << pelt_time_shift;
    sa.util_sum += (units - queued) << pelt_time_shift;
    return;
  }
  if (picked_at > sa.last_update && picked_at <= now) pelt_update(sa, picked_at, weight, true, false);
  pelt_update(sa, now, weight, true, true);
}

// The signals of a runqueue. `all` is the kernel's cfs_rq->avg: it includes
// the decaying contribution of fibers that blocked here. runnable_load_* is
// the same load signal restricted to queued and running fibers: added at
// enqueue, removed at dequeue, decayed and accrued together with `all`.
struct rq_pelt {
  pelt_avg all;
  std::uint64_t runnable_load_sum = 0;
  unsigned long runnable_load_avg = 0;

  // update() advances to `now` with the runqueue's current state: the summed
  // weight of its queued and running fibers, how many they are, and whether
  // one is running. Returns true when the averages changed.
  bool update(std::int64_t now, unsigned long queued_weight, unsigned nr_running,
              bool running) noexcept {
    return pelt_due(all, now) && update_slow(now, queued_weight, nr_running, running);
  }
  // update_unchanged() is update() for a caller whose inputs stay as they
  // were (a switch between two runnable fibers): nothing is accrued before
  // the period ends (see pelt_period_due), and the averages it returns are
  // the same as with update().
  bool update_unchanged(std::int64_t now, unsigned long queued_weight, unsigned nr_running,
                        bool running) noexcept {
    return pelt_period_due(all, now) && update_slow(now, queued_weight, nr_running, running);
  }
  bool update_slow(std::int64_t now, unsigned long queued_weight, unsigned nr_running,
                   bool running) noexcept;

  // attach()/detach(): an entity's whole contribution arrives on (a new or
  // migrated fiber) or leaves (a migrating fiber) this runqueue. The entity
  // must have been updated to the runqueue's last_update.
  void attach(pelt_avg& se, unsigned long weight) noexcept;
  void detach(const pelt_avg& se) noexcept;
  // Remove a contribution already decayed elsewhere (a blocked fiber that
  // wakes up on another worker): values only, clamped at zero.
  void remove(unsigned long load_avg, unsigned long util_avg, unsigned long runnable_avg) noexcept;

  // enqueue_runnable()/dequeue_runnable(): the entity starts/stops counting in
  // runnable_load.
  void enqueue_runnable(const pelt_avg& se) noexcept;
  void dequeue_runnable(const pelt_avg& se) noexcept;
};

}  // namespace usched::detail
