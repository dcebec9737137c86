// events.hpp: what an engine event takes and returns. Every event takes
// the time as a now_source, and returns what the backend must carry out:
// whom to notify or kick after a wake-up, what runs after a switch, what
// the tick moved.
#pragma once

#include <cstdint>

#include "sched_entity.hpp"

namespace usched::detail {

// now_source is the time of one engine event, as the backend supplies it:
// either a value it already has, or its clock, read on first use and then
// kept, so that an event reads the clock at most once and only when its
// decision depends on the time. The FIFO and LIFO disciplines without load
// tracking keep no time: their yields, blocks and wake-ups read no clock
// (a counter read would be half the cost of a yield). Implicit from a
// value, so tests and the simulator pass their time as it is.
class now_source {
 public:
  using clock_fn = std::int64_t (*)() noexcept;
  constexpr now_source(std::int64_t value) noexcept : value_(value) {}  // NOLINT(google-explicit-constructor)
  constexpr explicit now_source(clock_fn clock) noexcept : clock_(clock) {}
  now_source(const now_source&) = delete;
  now_source& operator=(const now_source&) = delete;

  std::int64_t operator()() const noexcept {
    if (clock_ && !read_) [[unlikely]] {
      value_ = clock_();
      read_ = true;
    }
    return value_;
  }
  // fresh() reads the clock again, for what measures its own cost (the
  // newly-idle pass); a fixed value stays what it is.
  std::int64_t fresh() const noexcept {
    if (clock_) {
      value_ = clock_();
      read_ = true;
    }
    return value_;
  }
  // Whether fresh() can tell elapsed time (a clock, not a fixed value).
  bool measures() const noexcept { return clock_ != nullptr; }
  // Whether () costs nothing more: a fixed value, or a clock already read
  // for this event.
  bool at_hand() const noexcept { return !clock_ || read_; }

 private:
  mutable std::int64_t value_ = 0;
  clock_fn clock_ = nullptr;
  mutable bool read_ = false;
};

// What a wake-up or a spawn asks of the backend (engine::wake_up).
struct wake_result {
  // The worker the fiber was queued on; -1 when the wake-up found it still
  // on its worker, on its way to block, which now keeps it: nothing to do.
  // (A fiber EEVDF kept queued as it blocked, delayed, is runnable again
  // where it was: that worker, with nothing to notify.)
  int cpu = -1;
  // cpu's worker may be parked: wake it. False only for a spawn onto the
  // spawner's own running worker.
  bool notify = false;
  // Fibers now wait behind cpu's running one and the policy lets idle
  // workers pull them: get one idle worker to balance (engine::kick; a
  // spinning worker finds them by itself, or is told, see pull).
  bool kick = false;
  // The kick stands in for a fork balance: a spawn stayed on its spawner's
  // busy worker because fork balancing is off (engine_config::fork_balance),
  // under a policy whose spinning workers do not pull by themselves.
  // The kick then goes to a spinning worker too, not only to a parked one,
  // and the worker it reaches balances at once, as newly idle, without the
  // avg_idle rationing (find_work(kicked)): the kernel places a fork on an
  // idle CPU unrationed, and with fork balancing off an idle worker is where
  // the spawn would have gone. Without it, under the CFS family, an idle
  // worker whose short idle periods ration its newly-idle pass took almost
  // none of a fork-join batch queued behind the spawner.
  bool pull = false;
};

// What a worker's scheduling decision asks of the backend (pick_next,
// yield, block, exit).
struct pick_result {
  sched_entity* next = nullptr;  // what runs now; null: nothing (idle)
  // An active balance pushed the previous fiber to this worker, which must
  // be woken; -1 for none.
  int pushed_to = -1;
  // exit_to_joiner() only: fibers wait behind the joiner it handed the
  // worker to, and the policy lets idle workers pull them: kick as for a
  // wake-up (wake_result::kick).
  bool kick = false;
};

// What the tick asks of the backend (engine::tick).
struct tick_result {
  unsigned pulled = 0;  // fibers the periodic balance moved onto this worker
  // The nohz kick: fibers are queued behind this busy worker; get one idle
  // worker (engine::kick) to balance, as for wake_result::kick.
  bool kick = false;
};

// How a fiber arrives on a runqueue.
enum class enqueue_kind : std::uint8_t {
  spawn,        // a new fiber
  spawn_local,  // a new fiber spawned by the fiber running on the same worker
  wakeup,       // a blocked fiber made runnable
};

// What happens to the running fiber when its worker picks the next one.
enum class prev_action : std::uint8_t {
  requeue,  // it stays runnable (preemption)
  yield,    // it stays runnable but steps aside (this_fiber::yield)
  block,    // it waits for something
  exit,     // it has finished
};

// What a kick asks of the backend (engine::kick): notify `cpu`, a parked
// worker (-1: nothing to do: no worker is idle, or a spinning one was
// told); `pull`: the kick stands in for a fork balance (wake_result::pull),
// so the worker balances unrationed when it wakes.
struct kick_result {
  int cpu = -1;
  bool pull = false;
};

}  // namespace usched::detail
