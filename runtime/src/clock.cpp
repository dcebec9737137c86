// clock.cpp: the time-stamp counter's calibration against the steady clock
// (clock.hpp), measured once per process.
#include <chrono>
#include <cmath>
#include <mutex>
#include <thread>

#include "clock.hpp"

namespace usched::detail {

void calibrate_tsc() noexcept {
  static std::once_flag once;
  std::call_once(once, [] {
    const double per_us = tsc_per_us();
    const double ns_per_cycle = 1000.0 / per_us;
    tsc_calibration_value = tsc_calibration{
        cycles(), now_ns(), ns_per_cycle,
        static_cast<std::uint64_t>(std::ldexp(ns_per_cycle, static_cast<int>(tsc_mult_shift)))};
  });
}

double tsc_per_us() noexcept {
  static const double rate = [] {
    const std::int64_t t0 = now_ns();
    const std::uint64_t c0 = cycles();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const std::int64_t t1 = now_ns();
    const std::uint64_t c1 = cycles();
    const double us = static_cast<double>(t1 - t0) / 1000.0;
    return us > 0 ? static_cast<double>(c1 - c0) / us : 1000.0;
  }();
  return rate;
}

}  // namespace usched::detail
