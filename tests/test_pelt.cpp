// PELT arithmetic driven by an injected clock: half-life, convergence,
// weights, and the runqueue's runnable vs blocked split.
#include <catch2/catch.hpp>

#include <cstdint>

#include "pelt.hpp"
#include "random.hpp"

using usched::detail::pelt_avg;
using usched::detail::pelt_decay;
using usched::detail::rq_pelt;

namespace {

constexpr std::int64_t ms = 1'000'000;
// One PELT period is 1024 x 1024 ns; the half-life is 32 of them (33.6 ms).
constexpr std::int64_t half_life = 32LL * 1024 * 1024;

// Runs an entity from `from` to `to` in steps of `step` ns with a fixed state.
void drive(pelt_avg& sa, std::int64_t from, std::int64_t to, bool on_rq, bool running,
           unsigned long weight = 1024, std::int64_t step = 100'000) {
  for (std::int64_t t = from + step; t <= to; t += step) {
    usched::detail::pelt_update(sa, t, weight, on_rq, running);
  }
}

}  // namespace

TEST_CASE("pelt: y^32 is one half and sums vanish after 63 half-lives", "[pelt]") {
  CHECK(pelt_decay(1u << 20, 32) == (1u << 19) - 1);  // the table's 0xffffffff floor costs one unit
  CHECK(pelt_decay(1024, 64) == 255);
  const std::uint64_t one_period = pelt_decay(1'000'000, 1);
  CHECK(one_period == 978'572);  // y = 0.978572
  CHECK(pelt_decay(~0ULL, 32 * 63 + 1) == 0);
  CHECK(pelt_decay(~0ULL, 32 * 62) > 0);
}

TEST_CASE("pelt: an always-running fiber converges to 1024", "[pelt]") {
  pelt_avg sa;
  drive(sa, 0, 1000 * ms, true, true);
  CHECK(sa.util_avg >= 1015);
  CHECK(sa.util_avg <= 1024);
  CHECK(sa.load_avg >= 1015);
  CHECK(sa.runnable_avg >= 1015);
}

TEST_CASE("pelt: a blocked fiber's signal halves every 32 ms", "[pelt]") {
  pelt_avg sa;
  drive(sa, 0, 1000 * ms, true, true);
  const unsigned long full = sa.util_avg;
  drive(sa, 1000 * ms, 1000 * ms + half_life, false, false);
  // One half-life, give or take the partial period at either end.
  CHECK(sa.util_avg >= full / 2 - 16);
  CHECK(sa.util_avg <= full / 2 + 16);
  drive(sa, 1000 * ms + half_life, 1000 * ms + 2 * half_life, false, false);
  CHECK(sa.util_avg >= full / 4 - 16);
  CHECK(sa.util_avg <= full / 4 + 16);
}

TEST_CASE("pelt: duty cycle and weight scale the averages", "[pelt]") {
  pelt_avg half;
  for (std::int64_t t = 0; t < 1000 * ms; t += 2 * ms) {
    drive(half, t, t + ms, true, true);
    drive(half, t + ms, t + 2 * ms, false, false);
  }
  CHECK(half.util_avg >= 480);
  CHECK(half.util_avg <= 545);

  // Runnable but waiting (queued behind another fiber): load and runnable
  // grow, util does not.
  pelt_avg waiting;
  drive(waiting, 0, 1000 * ms, true, false, 2048);
  CHECK(waiting.util_avg == 0);
  CHECK(waiting.runnable_avg >= 1015);
  CHECK(waiting.load_avg >= 2030);
  CHECK(waiting.load_avg <= 2048);
}

TEST_CASE("pelt: a runqueue keeps blocked load apart from runnable load", "[pelt]") {
  rq_pelt rq;
  pelt_avg a, b;
  // Two fibers of weight 1024 share the worker for a second: both are
  // runnable all the time, one runs at a time.
  rq.enqueue_runnable(a);
  rq.enqueue_runnable(b);
  for (std::int64_t t = 100'000; t <= 1000 * ms; t += 100'000) {
    const bool a_runs = (t / (3 * ms)) % 2 == 0;
    usched::detail::pelt_update(a, t, 1024, true, a_runs);
    usched::detail::pelt_update(b, t, 1024, true, !a_runs);
    rq.update(t, 2048, 2, true);
  }
  CHECK(rq.all.util_avg >= 1010);
  CHECK(rq.all.runnable_avg >= 2030);
  CHECK(rq.all.load_avg >= 2030);
  CHECK(rq.runnable_load_avg >= 2030);
  CHECK(a.util_avg >= 480);
  CHECK(a.util_avg <= 545);

  // Both block: runnable load drops at once, the blocked load stays in
  // load_avg and decays with the 32 ms half-life.
  rq.dequeue_runnable(a);
  rq.dequeue_runnable(b);
  CHECK(rq.runnable_load_avg < 2030 - 2 * 1015 + 40);
  const unsigned long blocked = rq.all.load_avg;
  for (std::int64_t t = 1000 * ms + 100'000; t <= 1000 * ms + half_life; t += 100'000) {
    rq.update(t, 0, 0, false);
  }
  CHECK(rq.all.load_avg >= blocked / 2 - 40);
  CHECK(rq.all.load_avg <= blocked / 2 + 40);
  CHECK(rq.runnable_load_avg < 40);

  // One wakes up on another worker: its (decayed) share leaves this runqueue.
  drive(a, 1000 * ms, 1000 * ms + half_life, false, false);
  const unsigned long before = rq.all.load_avg;
  rq.remove(a.load_avg, a.util_avg, a.runnable_avg);
  CHECK(rq.all.load_avg == before - a.load_avg);
}

TEST_CASE("pelt: a runqueue whose inputs do not change may accrue at period ends only",
          "[pelt]") {
  // The same busy runqueue updated every 300 ns (update) and only when a
  // period ends (update_unchanged): the averages agree to the rounding of
  // the decay at every period, and the deferred one accrues far less often.
  rq_pelt eager, lazy;
  int eager_changes = 0, lazy_changes = 0;
  for (std::int64_t t = 300; t <= 200 * ms; t += 300) {
    eager_changes += eager.update(t, 2048, 2, true);
    lazy_changes += lazy.update_unchanged(t, 2048, 2, true);
    if (lazy.all.last_update == eager.all.last_update) {
      CHECK(lazy.all.util_avg + 1 >= eager.all.util_avg);
      CHECK(lazy.all.util_avg <= eager.all.util_avg + 1);
      CHECK(lazy.all.load_avg + 2 >= eager.all.load_avg);
      CHECK(lazy.all.load_avg <= eager.all.load_avg + 2);
    }
  }
  CHECK(eager_changes == lazy_changes);
  // Six half-lives in: 1 - 2^-6 of the maximum.
  CHECK(lazy.all.util_avg >= 1000);
  CHECK(lazy.all.runnable_avg >= 2000);
}

TEST_CASE("pelt: the running entity's one-step update equals accruing at the pick and again",
          "[pelt]") {
  // An entity alternates between waiting in the queue and running, for
  // lengths from 0.1 us to 3 ms (some periods are crossed while queued,
  // some while running, some not at all). `two` is updated at each pick
  // (runnable) and each put (running), as the kernel does; `one` only at
  // each put, with the pick time. Every sum and average must be identical.
  pelt_avg two, one;
  std::uint64_t rng = 12345;
  const auto next_len = [&rng] {
    rng = usched::detail::lcg_next(rng);
    const std::uint64_t r = rng >> 33;
    return static_cast<std::int64_t>(r % 4 == 0 ? r % 3'000'000 : r % 20'000) + 100;
  };
  std::int64_t t = 0;
  for (int i = 0; i < 20'000; ++i) {
    const std::int64_t picked = t + next_len();
    const std::int64_t put = picked + next_len();
    usched::detail::pelt_update(two, picked, 1024, true, false);
    usched::detail::pelt_update(two, put, 1024, true, true);
    usched::detail::pelt_update_running(one, put, picked, 1024);
    REQUIRE(one.last_update == two.last_update);
    REQUIRE(one.period_contrib == two.period_contrib);
    REQUIRE(one.load_sum == two.load_sum);
    REQUIRE(one.runnable_sum == two.runnable_sum);
    REQUIRE(one.util_sum == two.util_sum);
    REQUIRE(one.util_avg == two.util_avg);
    REQUIRE(one.load_avg == two.load_avg);
    t = put;
  }
  // The duty cycle shows: roughly half running, fully runnable.
  CHECK(two.util_avg > 300);
  CHECK(two.util_avg < 800);
  CHECK(two.runnable_avg > 1000);
}
