// usched/detail/deadline.hpp: turning the durations and time points a user
// passes to sleep_for / sleep_until / wait_for / wait_until into the
// deadline the wait protocol keeps. Not part of the public API.
//
// A deadline is steady-clock nanoseconds in [0, far_deadline_ns]. Every
// conversion saturates instead of overflowing: std::chrono's own arithmetic
// wraps (now() + seconds::max() is a time in the past, and a negative
// deadline used to read as "no deadline"), so a wait for "forever" returned
// at once and a wait for a time long past blocked forever. Here a time past
// the end of the clock is far_deadline_ns (no timer is armed: only a
// notification ends the wait), and a time before the clock's epoch is 0
// (already due: the wait times out at once).
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <ratio>
#include <type_traits>

namespace usched::detail {

// The deadline that never comes: 2^63-1 ns is 292 years of steady clock.
inline constexpr std::int64_t far_deadline_ns = std::numeric_limits<std::int64_t>::max();

// saturating_ns() is `d` in nanoseconds, rounded up (a wait never ends
// early), clamped to the int64 range. Any representation and period: a
// floating-point one too (NaN counts as zero).
template <class Rep, class Period>
constexpr std::int64_t saturating_ns(const std::chrono::duration<Rep, Period>& d) noexcept {
  constexpr std::int64_t hi = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t lo = std::numeric_limits<std::int64_t>::min();
  using per_ns = std::ratio_divide<Period, std::nano>;  // ns per tick of d
  if constexpr (std::is_floating_point_v<Rep>) {
    const long double ns = static_cast<long double>(d.count()) * per_ns::num / per_ns::den;
    if (!(ns == ns)) return 0;
    // 2^63 is exact in every long double; anything at or past it saturates.
    if (ns >= 9223372036854775808.0L) return hi;
    if (ns <= -9223372036854775808.0L) return lo;
    const auto whole = static_cast<std::int64_t>(ns);  // truncates toward zero
    // Just below 2^63 the long double may not be whole while `whole` is
    // already the largest int64: rounding up would wrap.
    return static_cast<long double>(whole) < ns && whole != hi ? whole + 1 : whole;
  } else {
    static_assert(std::is_integral_v<Rep>, "a duration's representation must be arithmetic");
    // count * num fits 127 bits for any 64-bit count and ratio.
    __extension__ using wide = __int128;
    const wide num = static_cast<wide>(d.count()) * per_ns::num;
    wide q = num / per_ns::den;
    if (q * per_ns::den < num) ++q;  // round up (division truncates toward zero)
    if (q > hi) return hi;
    if (q < lo) return lo;
    return static_cast<std::int64_t>(q);
  }
}

// a + b without wrapping.
constexpr std::int64_t saturating_add(std::int64_t a, std::int64_t b) noexcept {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) {
    return b > 0 ? std::numeric_limits<std::int64_t>::max() : std::numeric_limits<std::int64_t>::min();
  }
  return r;
}

// clamp_deadline() maps a steady-clock nanosecond count onto the deadline
// range: before the epoch is 0 (due now).
constexpr std::int64_t clamp_deadline(std::int64_t steady_ns) noexcept {
  return steady_ns < 0 ? 0 : steady_ns;
}

// steady_now_ns() is the steady clock in ns (the runtime's now_ns()).
inline std::int64_t steady_now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// deadline_after() is the deadline `d` from now, saturated: a negative `d`
// is due now, seconds::max() is far_deadline_ns.
template <class Rep, class Period>
std::int64_t deadline_after(const std::chrono::duration<Rep, Period>& d) noexcept {
  return clamp_deadline(saturating_add(steady_now_ns(), saturating_ns(d)));
}

// deadline_at() is the deadline of a time point of any clock. A steady-clock
// time point converts directly (whatever its duration type); another clock's
// is taken as the time left until it, measured on that clock now and added
// to the steady clock's now, as std::condition_variable does: a later jump
// of that clock (the system clock set back) does not move the deadline.
template <class Clock, class Duration>
std::int64_t deadline_at(const std::chrono::time_point<Clock, Duration>& tp) noexcept {
  if constexpr (std::is_same_v<Clock, std::chrono::steady_clock>) {
    return clamp_deadline(saturating_ns(tp.time_since_epoch()));
  } else {
    const std::int64_t at = saturating_ns(tp.time_since_epoch());
    // The end of that clock (time_point::max()) is no deadline, as it is
    // on the steady clock, not a timer some centuries away.
    if (at == std::numeric_limits<std::int64_t>::max()) return far_deadline_ns;
    const std::int64_t now = saturating_ns(Clock::now().time_since_epoch());
    std::int64_t left = 0;
    if (__builtin_sub_overflow(at, now, &left)) {
      left = at > now ? std::numeric_limits<std::int64_t>::max() : std::numeric_limits<std::int64_t>::min();
    }
    return clamp_deadline(saturating_add(steady_now_ns(), left));
  }
}

}  // namespace usched::detail
