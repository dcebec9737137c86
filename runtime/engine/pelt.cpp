// pelt.cpp: the arithmetic of kernel/sched/pelt.c, written for usched.
#include "pelt.hpp"

#include <array>
#include <cmath>

namespace usched::detail {
namespace {

// y^n in 0.32 fixed point for n in [0, 32): floor((2^32 - 1) * y^n) with
// y = 2^(-1/32), the same values as the kernel's generated table.
const std::array<std::uint32_t, pelt_half_life>& decay_table() noexcept {
  static const std::array<std::uint32_t, pelt_half_life> table = [] {
    std::array<std::uint32_t, pelt_half_life> t{};
    for (unsigned n = 0; n < pelt_half_life; ++n) {
      const double y_n = std::pow(0.5, static_cast<double>(n) / pelt_half_life);
      t[n] = static_cast<std::uint32_t>(std::floor(4294967295.0 * y_n));
    }
    return t;
  }();
  return table;
}

// After 63 half-lives every 64-bit sum has decayed to zero.
constexpr std::uint64_t decay_to_zero_periods = pelt_half_life * 63;

// Contribution of the time since the last update that spans `periods`
// boundaries: the rest of the first period (d1, decayed by all of them), the
// full periods in between (a closed form of 1024 * sum y^k), and the start of
// the current one (d3).
std::uint64_t accumulate_segments(std::uint64_t periods, std::uint32_t d1, std::uint32_t d3) noexcept {
  const std::uint64_t c1 = pelt_decay(d1, periods);
  const std::uint64_t c2 = load_avg_max - pelt_decay(load_avg_max, periods) - pelt_period;
  return c1 + c2 + d3;
}

template <class T>
void sub_positive(T& v, T d) noexcept {
  v = v > d ? v - d : 0;
}

}  // namespace

std::uint64_t pelt_decay(std::uint64_t val, std::uint64_t periods) noexcept {
  if (periods > decay_to_zero_periods) return 0;
  if (periods >= pelt_half_life) {
    val >>= periods / pelt_half_life;
    periods %= pelt_half_life;
  }
  // val * y^periods, with the 64x32-bit product split to avoid overflow.
  const std::uint64_t mul = decay_table()[periods];
  const std::uint64_t hi = (val >> 32) * mul;
  const std::uint64_t lo = ((val & 0xffffffffULL) * mul) >> 32;
  return hi + lo;
}

namespace {

// The body of pelt_accumulate(). `shadow_load_sum`, when given, is a second
// load sum with the same input as sa.load_sum (a runqueue's runnable_load):
// it is decayed and accrued in the same step.
bool accumulate(pelt_avg& sa, std::int64_t now, unsigned long load, unsigned long runnable,
                unsigned running, std::uint64_t* shadow_load_sum) noexcept {
  const std::int64_t delta_ns = now - sa.last_update;
  if (delta_ns < 0) {
    // Time went backwards (a clock handed in by a caller that moved); restart.
    sa.last_update = now;
    return false;
  }
  std::uint64_t delta = static_cast<std::uint64_t>(delta_ns) >> pelt_time_shift;
  if (delta == 0) return false;
  sa.last_update += static_cast<std::int64_t>(delta << pelt_time_shift);
  if (load == 0) runnable = running = 0;

  std::uint64_t contrib = delta;
  delta += sa.period_contrib;
  const std::uint64_t periods = delta / pelt_period;
  if (periods) {
    sa.load_sum = pelt_decay(sa.load_sum, periods);
    sa.runnable_sum = pelt_decay(sa.runnable_sum, periods);
    sa.util_sum = pelt_decay(sa.util_sum, periods);
    if (shadow_load_sum) *shadow_load_sum = pelt_decay(*shadow_load_sum, periods);
    delta %= pelt_period;
    if (load) {
      contrib = accumulate_segments(periods, pelt_period - sa.period_contrib,
                                    static_cast<std::uint32_t>(delta));
    }
  }
  sa.period_contrib = static_cast<std::uint32_t>(delta);
  if (load) {
    sa.load_sum += load * contrib;
    if (shadow_load_sum) *shadow_load_sum += load * contrib;
  }
  if (runnable) sa.runnable_sum += (runnable * contrib) << pelt_time_shift;
  if (running) sa.util_sum += contrib << pelt_time_shift;
  return periods != 0;
}

}  // namespace

bool pelt_accumulate(pelt_avg& sa, std::int64_t now, unsigned long load, unsigned long runnable,
                     unsigned running) noexcept {
  return accumulate(sa, now, load, runnable, running, nullptr);
}

void pelt_average(pelt_avg& sa, unsigned long weight) noexcept {
  const std::uint32_t div = sa.divider();
  sa.load_avg = static_cast<unsigned long>(weight * sa.load_sum / div);
  sa.runnable_avg = static_cast<unsigned long>(sa.runnable_sum / div);
  sa.util_avg = static_cast<unsigned long>(sa.util_sum / div);
}

bool rq_pelt::update_slow(std::int64_t now, unsigned long queued_weight, unsigned nr_running,
                          bool running) noexcept {
  if (!accumulate(all, now, queued_weight, nr_running, running ? 1 : 0, &runnable_load_sum)) return false;
  pelt_average(all, 1);
  runnable_load_avg = static_cast<unsigned long>(runnable_load_sum / all.divider());
  return true;
}

void rq_pelt::attach(pelt_avg& se, unsigned long weight) noexcept {
  // Align the entity with this runqueue's period so that sums and averages
  // stay consistent (attach_entity_load_avg).
  const std::uint32_t div = all.divider();
  se.last_update = all.last_update;
  se.period_contrib = all.period_contrib;
  se.util_sum = static_cast<std::uint64_t>(se.util_avg) * div;
  se.runnable_sum = static_cast<std::uint64_t>(se.runnable_avg) * div;
  se.load_sum = weight ? static_cast<std::uint64_t>(se.load_avg) * div / weight : 0;
  all.util_avg += se.util_avg;
  all.util_sum += se.util_sum;
  all.runnable_avg += se.runnable_avg;
  all.runnable_sum += se.runnable_sum;
  all.load_avg += se.load_avg;
  all.load_sum += se.load_avg * static_cast<std::uint64_t>(div);
}

void rq_pelt::detach(const pelt_avg& se) noexcept {
  sub_positive(all.util_avg, se.util_avg);
  sub_positive(all.util_sum, se.util_sum);
  sub_positive(all.runnable_avg, se.runnable_avg);
  sub_positive(all.runnable_sum, se.runnable_sum);
  sub_positive(all.load_avg, se.load_avg);
  sub_positive(all.load_sum, static_cast<std::uint64_t>(se.load_avg) * all.divider());
}

void rq_pelt::remove(unsigned long load_avg, unsigned long util_avg, unsigned long runnable_avg) noexcept {
  const std::uint32_t div = all.divider();
  sub_positive(all.util_avg, util_avg);
  sub_positive(all.util_sum, static_cast<std::uint64_t>(util_avg) * div);
  sub_positive(all.runnable_avg, runnable_avg);
  sub_positive(all.runnable_sum, static_cast<std::uint64_t>(runnable_avg) * div);
  sub_positive(all.load_avg, load_avg);
  sub_positive(all.load_sum, static_cast<std::uint64_t>(load_avg) * div);
}

void rq_pelt::enqueue_runnable(const pelt_avg& se) noexcept {
  runnable_load_avg += se.load_avg;
  runnable_load_sum += static_cast<std::uint64_t>(se.load_avg) * all.divider();
}

void rq_pelt::dequeue_runnable(const pelt_avg& se) noexcept {
  sub_positive(runnable_load_avg, se.load_avg);
  sub_positive(runnable_load_sum, static_cast<std::uint64_t>(se.load_avg) * all.divider());
}

}  // namespace usched::detail
