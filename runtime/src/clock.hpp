// clock.hpp: the two clocks of the runtime.
//
// now_ns() is the steady clock in nanoseconds: timers, statistics and every
// `now` handed to the engine come from it (the simulator hands virtual time
// instead). cycles() is the raw time-stamp counter: the monitor's clock
// (monitor.cpp), which times slices and stalls so that this_fiber::
// preempt_point() reads no clock at all, and the tick's and the idle
// loop's; tsc_per_us() converts slices to counter ticks once, at runtime
// start.
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
  // ns_per_cycle as a fixed-point multiplier: ns = ticks x mult >> 40. Its
  // truncation loses under 2^-40 ns a tick, under a microsecond a day at
  // GHz rates, far below the calibration's own error.
  std::uint64_t mult;
};
inline constexpr unsigned tsc_mult_shift = 40;
__extension__ typedef __int128 tsc_product;  // GCC's and Clang's 128-bit integer
// calibrate_tsc() sets it, once per process; every runtime calls it as it
// starts, before any of its workers or wakers reads the engine clock, so
// that tsc() is a plain load on a switch (no call, no guard).
void calibrate_tsc() noexcept;
inline tsc_calibration tsc_calibration_value{};
inline const tsc_calibration& tsc() noexcept { return tsc_calibration_value; }

// engine_now_ns() is the clock of the engine in the real backend: the
// time-stamp counter converted to nanoseconds. It is read on every switch
// under a fair policy (vruntime and PELT accounting), where the counter costs
// a fraction of clock_gettime(). It is monotonic and shared by all workers
// (invariant, synchronized TSC), but it drifts slowly from the steady clock,
// so it is never compared with steady-clock times: timers use now_ns().
inline std::int64_t engine_now_ns(std::uint64_t counter) noexcept {
  const tsc_calibration& k = tsc();
  // A 64 x 64 -> 128-bit multiply and a shift: a few cycles where the
  // conversions to and from double take a dozen, on the switch's path.
  // Signed: a counter a little behind the calibration's (another CPU's,
  // within the TSC skew) is a little earlier, not centuries later.
  const auto ticks = static_cast<std::int64_t>(counter - k.c0);
  return k.t0 +
         static_cast<std::int64_t>((static_cast<tsc_product>(ticks) * static_cast<tsc_product>(k.mult)) >> tsc_mult_shift);
}
inline std::int64_t engine_now_ns() noexcept { return engine_now_ns(cycles()); }

}  // namespace usched::detail
