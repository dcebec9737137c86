// monitor.hpp: the runtime's monitor, the decision half (Go's sysmon,
// Seastar's task-quota timer). One thread per runtime (runtime_impl::
// monitor_main, monitor.cpp) wakes at the tick's rate while some worker
// runs a fiber, and at each look (monitor::step) it:
//   - asks a worker's running fiber to look at its preempt point (the
//     worker's preempt request word): when the worker's tick is due, when a
//     wake-up or an active balance asked it to yield (need_resched), and
//     when the fiber has used up its slice under a FIFO or LIFO policy
//     while others wait. this_fiber::preempt_point() is then one relaxed
//     load of that word and a branch, with no clock read;
//   - reports once a fiber that has run past the stall threshold without
//     reaching a switch or a preempt point (options::stall): a fiber that
//     answers the monitor's requests at its preempt points is cooperating,
//     however long it runs;
//   - reports once a hang: every worker parked, fibers alive, and nothing
//     inside the runtime that could wake one (no timer armed, no I/O in
//     flight, no blocking call running), for hang_quiet.
// step() reads no clock and starts no thread: it depends only on what its
// host reports (on a runtime, monitor_host in monitor.cpp: atomics of the
// workers and the engine, and the blocking pool's counts under its lock)
// and on `now`, so tests drive it with a hand-made host and a made-up
// clock (tests/test_monitor.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

namespace usched::detail {

// The preempt request word of a worker (worker::preempt_request_), as the
// monitor, the wakers and the worker itself write it.
//   request_look:  run the preempt point's slow path (worker::preempt_check):
//                  the tick if due, should_preempt, I/O if in flight;
//   request_slice: the run whose mark is in the bits above request_mark_shift
//                  has used up its slice (should_preempt is asked as if the
//                  slice had run out, which it has for that run only).
inline constexpr std::uint64_t request_look = 1;
inline constexpr std::uint64_t request_slice = 2;
inline constexpr unsigned request_mark_shift = 2;

// A run mark (worker::run_mark_): the worker's switch count times two, plus
// one while a fiber runs. The monitor's "same run since my last look" is
// "same mark": a fiber that yields and is picked again gets a new mark, as
// its slice starts again.
inline constexpr bool mark_running(std::uint64_t mark) noexcept { return (mark & 1) != 0; }

class monitor {
 public:
  struct config {
    std::uint64_t slice = 0;  // counter ticks; 0: the engine ends slices at its tick (fair)
    std::uint64_t stall = 0;  // counter ticks; 0: no stall or hang reports
    std::uint64_t hang_quiet = 0;  // counter ticks every worker stays parked before a hang is reported
    std::uint64_t period = 0;      // counter ticks between looks while a fiber runs (the tick)
  };

  // What step() decides about one look; the host carries it out.
  struct outcome {
    // The earliest counter value at which the monitor should look again;
    // never_again when every worker is parked and nothing is left to
    // report (then only an unpark wakes it).
    std::uint64_t next = never_again;
    bool all_parked = false;
  };
  static constexpr std::uint64_t never_again = std::numeric_limits<std::uint64_t>::max();

  monitor(const config& c, std::size_t nr_workers) : cfg_(c), seen_(nr_workers) {}

  // step() looks at every worker at counter time `now` and calls, on
  // `host` (H, a type with these members):
  //   std::size_t nr_workers();
  //   std::uint64_t run_mark(std::size_t i);     // worker::run_mark_
  //   std::uint64_t looks(std::size_t i);        // preempt points' slow paths so far
  //   std::uint64_t next_tick(std::size_t i);    // counter time of its next tick
  //   bool resched_asked(std::size_t i);          // the engine's need_resched
  //   bool has_queued(std::size_t i);             // fibers wait behind it
  //   void request(std::size_t i, std::uint64_t bits, std::uint64_t mark);
  //   void stalled(std::size_t i, std::uint64_t mark, std::uint64_t ran);
  //   bool all_parked();                          // every worker parked
  //   std::uint64_t park_epoch();                 // changes whenever a worker parks anew
  //   bool hang_possible();   // fibers alive, none can be woken from inside
  //   void hung(std::uint64_t quiet);             // the hang report
  // Only the monitor's thread (or a test) calls it.
  template <class H>
  outcome step(H& host, std::uint64_t now);

 private:
  struct seen {
    std::uint64_t mark = 0;      // the run mark at the last look
    std::uint64_t since = 0;     // when that mark was first seen
    std::uint64_t looks = 0;     // the worker's looks at the last look
    std::uint64_t quiet_since = 0;  // when this run last switched or looked
    bool stall_reported = false;  // this stall has been reported
  };
  config cfg_;
  std::vector<seen> seen_;
  // The hang watch: the park epoch at which every worker was first seen
  // parked with a hang possible, when, and whether that hang was reported.
  bool parked_seen_ = false;
  std::uint64_t parked_epoch_ = 0;
  std::uint64_t parked_since_ = 0;
  bool hang_reported_ = false;
};

template <class H>
monitor::outcome monitor::step(H& host, std::uint64_t now) {
  outcome out;
  const std::size_t n = std::min<std::size_t>(host.nr_workers(), seen_.size());
  for (std::size_t i = 0; i < n; ++i) {
    seen& s = seen_[i];
    const std::uint64_t mark = host.run_mark(i);
    if (mark != s.mark) {
      // A switch since the last look: the run started at most one look
      // ago. Counting it from now makes a slice end up to one period late,
      // never early (the kernel's tick, too, notices a slice's end only
      // at the next tick).
      s.mark = mark;
      s.since = now;
      s.quiet_since = now;
      s.stall_reported = false;
    }
    // A preempt point that took the monitor's request: the fiber is not
    // stalled, only long (its slice is still timed from the switch).
    const std::uint64_t looks = host.looks(i);
    if (looks != s.looks) {
      s.looks = looks;
      s.quiet_since = now;
      s.stall_reported = false;
    }
    if (!mark_running(mark)) continue;
    const std::uint64_t ran = now - s.since;
    const std::uint64_t tick = host.next_tick(i);
    std::uint64_t bits = 0;
    if (now >= tick || host.resched_asked(i)) bits |= request_look;
    if (cfg_.slice != 0 && ran >= cfg_.slice && host.has_queued(i)) bits |= request_slice;
    if (bits != 0) host.request(i, bits, mark);
    const std::uint64_t quiet = now - s.quiet_since;
    if (cfg_.stall != 0 && !s.stall_reported && quiet >= cfg_.stall) {
      s.stall_reported = true;
      host.stalled(i, mark, quiet);
    }
    // Look again at the next tick, at the slice's end and at the stall
    // threshold, whichever comes first, and at least once a period.
    std::uint64_t next = now + cfg_.period;
    if (tick > now) next = std::min(next, tick);
    if (cfg_.slice != 0 && ran < cfg_.slice) next = std::min(next, s.since + cfg_.slice);
    if (cfg_.stall != 0 && !s.stall_reported) next = std::min(next, s.quiet_since + cfg_.stall);
    out.next = std::min(out.next, next);
  }

  out.all_parked = host.all_parked();
  // A worker awake but idle (spinning, or on its way to park) runs its own
  // tick; the monitor looks again a period later, until every one parks.
  if (!out.all_parked) out.next = std::min(out.next, now + cfg_.period);
  if (!out.all_parked || cfg_.stall == 0 || !host.hang_possible()) {
    parked_seen_ = false;
    return out;
  }
  // Every worker parked with fibers alive that nothing inside the runtime
  // can wake. A new park (a worker woke and parked again) starts a new
  // watch: the runtime made progress in between.
  const std::uint64_t epoch = host.park_epoch();
  if (!parked_seen_ || epoch != parked_epoch_) {
    parked_seen_ = true;
    parked_epoch_ = epoch;
    parked_since_ = now;
    hang_reported_ = false;
  }
  if (hang_reported_) return out;
  if (now - parked_since_ >= cfg_.hang_quiet) {
    hang_reported_ = true;
    host.hung(now - parked_since_);
    return out;
  }
  out.next = std::min(out.next, parked_since_ + cfg_.hang_quiet);
  return out;
}

}  // namespace usched::detail
