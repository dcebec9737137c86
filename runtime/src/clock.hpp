// clock.hpp: the two clocks of the runtime.
//
// now_ns() is the steady clock in nanoseconds: timers, statistics and every
// `now` handed to the engine come from it (the simulator hands virtual time
// instead). cycles() is the raw time-stamp counter, used only by
// this_fiber::preempt_point() to ask "has this slice run out?" in a few
// nanoseconds; tsc_per_us() converts slices to counter ticks once, at
// runtime start.
#pragma once

#include <chrono>
#include <cstdint>

namespace usched::detail {

inline std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline std::uint64_t cycles() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_ia32_rdtsc();
#else
  return static_cast<std::uint64_t>(now_ns());
#endif
}

// Counter ticks per microsecond, measured once per process against the steady
// clock (the counter's rate is a property of the machine, not of a runtime).
double tsc_per_us() noexcept;

// The calibration engine_now_ns() converts with: a counter reading, the
// steady-clock time it was taken at, and ns per tick.
struct tsc_calibration {
  std::uint64_t c0;
  std::int64_t t0;
  double ns_per_cycle;
};
const tsc_calibration& tsc() noexcept;

// engine_now_ns() is the clock of the engine in the real backend: the
// time-stamp counter converted to nanoseconds. It is read on every switch
// under a fair policy (vruntime and PELT accounting), where the counter costs
// a fraction of clock_gettime(). It is monotonic and shared by all workers
// (invariant, synchronized TSC), but it drifts slowly from the steady clock,
// so it is never compared with steady-clock times: timers use now_ns().
inline std::int64_t engine_now_ns(std::uint64_t counter) noexcept {
  const tsc_calibration& k = tsc();
  return k.t0 + static_cast<std::int64_t>(static_cast<double>(counter - k.c0) * k.ns_per_cycle);
}
inline std::int64_t engine_now_ns() noexcept { return engine_now_ns(cycles()); }

}  // namespace usched::detail
