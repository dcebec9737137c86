// test_cross_runtime.cpp: two runtimes meeting: a fiber of one joins a
// fiber of the other, in both directions, under every policy at 1 and 2
// workers, with the join hand-off on and off. A fiber is only ever run by
// its own runtime's workers; the hand-off applies within one runtime only.
#include <catch2/catch.hpp>

#include <atomic>
#include <string>

#include <usched/usched.hpp>

#include "test_support.hpp"

namespace {

usched::options cross_options(const usched::test::config& c, bool handoff) {
  usched::options o = usched::test::make_options(c.policy, c.workers);
  o.join_handoff = handoff;
  return o;
}

}  // namespace

TEST_CASE("cross-runtime: a fiber joins fibers of another runtime and stays on its own", "[runtime][join]") {
  const auto c = GENERATE(from_range(usched::test::one_and_two_worker_configs()));
  const bool handoff = GENERATE(true, false);
  INFO(usched::test::label(c) << " join_handoff=" << handoff);
  constexpr int joins = 200;
  usched::runtime a(cross_options(c, handoff));
  usched::runtime b(cross_options(c, handoff));
  // Each side counts what it saw (Catch2's checks are not thread-safe).
  std::atomic<int> a_wrong_home{0}, b_wrong_home{0}, a_sum{0}, b_sum{0};
  auto from_a = a.spawn([&] {
    for (int i = 0; i < joins; ++i) {
      a_sum += b.spawn([&b_wrong_home, &b, i] {
                  if (usched::runtime::current() != &b) b_wrong_home++;
                  return i;
                }).join();
      if (usched::runtime::current() != &a) a_wrong_home++;
    }
  });
  auto from_b = b.spawn([&] {
    for (int i = 0; i < joins; ++i) {
      b_sum += a.spawn([&a_wrong_home, &a, i] {
                  if (usched::runtime::current() != &a) a_wrong_home++;
                  return i;
                }).join();
      if (usched::runtime::current() != &b) b_wrong_home++;
    }
  });
  from_a.join();
  from_b.join();
  CHECK(a_wrong_home.load() == 0);
  CHECK(b_wrong_home.load() == 0);
  CHECK(a_sum.load() == joins * (joins - 1) / 2);
  CHECK(b_sum.load() == joins * (joins - 1) / 2);
}

TEST_CASE("cross-runtime: a runtime built, run and destroyed inside another runtime's fiber", "[runtime][join]") {
  const auto c = GENERATE(from_range(usched::test::one_and_two_worker_configs()));
  const bool handoff = GENERATE(true, false);
  INFO(usched::test::label(c) << " join_handoff=" << handoff);
  usched::runtime outer(cross_options(c, handoff));
  const int got = outer.run([&] {
    int sum = 0;
    for (int round = 0; round < 3; ++round) {
      usched::runtime inner(cross_options(c, handoff));
      sum += inner.run([&] {
        // The inner fiber is the inner runtime's, and spawns there.
        int s = usched::runtime::current() == &inner ? 1 : 1000;
        s += usched::spawn([] { return 10; }).join();
        return s;
      });
      // Back on the outer runtime after the inner run and its destructor.
      if (usched::runtime::current() != &outer) sum += 100000;
    }
    return sum;
  });
  CHECK(got == 3 * 11);
}
