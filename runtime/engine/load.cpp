// load.cpp: load tracking's runqueue side: what a runqueue publishes for
// lock-free snapshots, and the util estimates (util_est) of the fibers
// that leave it. The PELT arithmetic is pelt.hpp's; the per-switch update
// (update_load) is inline, in engine_inline.hpp.
#include "engine.hpp"

#include <algorithm>

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

}  // namespace usched::detail
