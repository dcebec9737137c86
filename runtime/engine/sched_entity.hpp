// sched_entity.hpp: the part of a fiber the engine sees, and the entity's
// own arithmetic (its util estimate, vruntime scaling). The kernel's struct
// sched_entity and the helpers of fair.c that read one entity only.
#pragma once

#include <atomic>
#include <boost/intrusive/set.hpp>
#include <cstdint>

#include "eevdf_tree.hpp"
#include "pelt.hpp"

namespace usched::detail {
// The part of a fiber the engine sees (the kernel's struct sched_entity).
struct sched_entity {
  sched_entity() = default;
  sched_entity(const sched_entity&) = delete;
  sched_entity& operator=(const sched_entity&) = delete;
  // The timeline hook's destructor does nothing in normal_link mode; a
  // union with it needs one of its own.
  ~sched_entity() {}

  // The fields a wake-up from another worker reads and writes come first,
  // 48 bytes that share a cache line with the fiber's wait token (see
  // struct fiber).
  //
  // Queue order, kept by every discipline: under FIFO the head has waited
  // longest, under LIFO the tail has; balancing walks from that end to take
  // the least recently run.
  sched_entity* rq_next = nullptr;
  sched_entity* rq_prev = nullptr;
  // The runqueue it is on, or the worker it last ran on. Written under the
  // lock of the runqueue it joins (relaxed; on_rq's release store follows);
  // atomic because hand_off() reads it under another runqueue's lock while a
  // thief may be attaching the fiber to its own.
  std::atomic<int> cpu{-1};
  int pinned = -1;  // the only worker it may run on, or -1
  int preferred_node = -1;
  unsigned weight = nice_0_weight;
  // Queued or running (the kernel's se->on_rq). Written under the runqueue's
  // lock; read without it by a waker, which only needs to know whether the
  // fiber may still be running on its worker (see engine::wake_running).
  std::atomic<bool> on_rq{false};
  // A wake-up arrived while the fiber was still running on its way to
  // block: its worker must keep it runnable (under the runqueue's lock).
  bool wake_pending = false;
  // The wake-up that made it runnable and has not yet been followed by a
  // run: its wake_reason + 1, 0 for none. Written with the wake-up's count
  // (under the runqueue lock the enqueue holds), read and cleared by the
  // pick that runs it, which records the delay (engine::note_run). In the
  // line's padding; its time-stamp is in engine::wake_stamp_slot().
  std::uint8_t wake_why = 0;
  // EEVDF's flags (ev_flag), in the line's padding: a waker reads
  // ev_delayed under the runqueue lock as it finds the fiber still queued.
  std::uint8_t ev_flags = 0;
  // The kernel's p->recent_used_cpu: a worker it was recently woken
  // towards, tried by the wake-up placement before it scans the LLC. Set at
  // a spawn to the spawner's worker, and by each wake-up the fiber makes
  // while running; the placement may hand it the fiber's previous worker.
  int recent_used_cpu = -1;
  // util_est (v4.17+, UTIL_EST and UTIL_EST_FASTUP): the util it had when
  // it last went to sleep, and a moving average of those that follows
  // rises at once and falls with weight 1/4. A fiber that sleeps loses its
  // util_avg at PELT's pace; its estimate keeps what it will need when it
  // wakes, and that is what balancing and placement read (task_util_est).
  // 32 bits each, as the kernel's struct util_est: a util is at most 1024.
  // Here, on the first line that an enqueue and a dequeue write anyway,
  // they end it exactly (struct fiber), so that the timeline's fields
  // start the next one.
  std::uint32_t util_est_enqueued = 0;
  std::uint32_t util_est_ewma = 0;

  // The virtual-time disciplines' line: the queue's node and the time kept
  // for it. A walk or a rebalancing of the tree reads a node's links and
  // its keys, so they share one line: one line of another fiber per node
  // visited, not two. CFS's timeline (fair) and EEVDF's tree (eevdf) are
  // never both in use in one engine (its policy has one discipline), so
  // they share the line's storage: each union below holds CFS's field
  // first and EEVDF's after it.
  union {
    // fair: the timeline node. normal_link: the engine unlinks
    // explicitly; no auto-unlink bookkeeping on the switch path.
    boost::intrusive::set_member_hook<boost::intrusive::link_mode<boost::intrusive::normal_link>> timeline_hook{};
    // eevdf: the tree node and its key, the virtual deadline.
    eevdf_links<sched_entity> ev;
  };
  std::uint64_t vruntime = 0;     // runtime scaled by nice_0_weight / weight
  std::int64_t exec_start = 0;    // when it last started running or was last accounted
  union {
    std::int64_t sum_exec = 0;    // fair: total time run, ns
    // eevdf, one at a time, each for a state in which the others are
    // meaningless (as the kernel's union of vlag and vprot):
    std::uint64_t ev_min_vruntime;  // queued: the smallest vruntime of its subtree
    std::int64_t vlag;              // off the queue: its lag when it left (avg_vruntime - vruntime)
    std::uint64_t vprot;            // running: RUN_TO_PARITY protects its slice until this vruntime
  };
  union {
    std::int64_t prev_sum_exec = 0;  // fair: sum_exec when it was last picked
    eevdf_slices ev_slice;           // eevdf: its slice request, and the smallest of its subtree
  };
  // Load tracking's line.
  pelt_avg avg;
};

// EEVDF's per-fiber flags (sched_entity::ev_flags).
enum ev_flag : std::uint8_t {
  // DELAY_DEQUEUE: it blocked while not eligible and stays queued, not
  // runnable, until its lag is paid (a pick dequeues it) or it wakes (it
  // is requeued where it is).
  ev_delayed = 1,
  // Its slice was asked for (spawn_options::slice), not the base slice.
  ev_custom_slice = 2,
  // PLACE_REL_DEADLINE: its deadline is kept relative to its vruntime
  // while it moves between workers.
  ev_rel_deadline = 4,
};

// The estimate a fiber brings to a runqueue (_task_util_est), and its
// util as balancing reads it (task_util_est: the larger of that and util_avg).
inline unsigned long util_est_of(const sched_entity& se) noexcept {
  return se.util_est_ewma > se.util_est_enqueued ? se.util_est_ewma : se.util_est_enqueued;
}
inline unsigned long task_util_est(const sched_entity& se) noexcept {
  const unsigned long est = util_est_of(se);
  return se.avg.util_avg > est ? se.avg.util_avg : est;
}

// calc_delta_fair(): runtime scaled to vruntime by the fiber's weight.
inline std::uint64_t calc_delta_fair(std::int64_t delta, unsigned weight) noexcept {
  if (weight == nice_0_weight) return static_cast<std::uint64_t>(delta);
  return static_cast<std::uint64_t>(delta) * nice_0_weight / weight;
}

}  // namespace usched::detail
