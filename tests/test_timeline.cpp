// The fair discipline's timeline (timeline.hpp), a tree and a sorted run,
// against the single red-black tree it stands for: through random inserts,
// erases and yield swaps with many equal keys, both hold the same fibers in
// the same order, equal keys in insertion order, after every step.
#include <catch2/catch.hpp>

#include <boost/intrusive/set.hpp>
#include <cstdint>
#include <deque>
#include <vector>

#include "random.hpp"
#include "timeline.hpp"

namespace {

struct entity {
  boost::intrusive::set_member_hook<boost::intrusive::link_mode<boost::intrusive::normal_link>> timeline_hook;
  boost::intrusive::set_member_hook<boost::intrusive::link_mode<boost::intrusive::normal_link>> reference_hook;
  std::uint64_t vruntime = 0;
  bool queued = false;
};

struct by_key {
  bool operator()(const entity& a, const entity& b) const noexcept {
    return static_cast<std::int64_t>(a.vruntime - b.vruntime) < 0;
  }
};
// The reference: one multiset, which inserts after equal keys.
using reference_t = boost::intrusive::multiset<
    entity,
    boost::intrusive::member_hook<entity, decltype(entity::reference_hook), &entity::reference_hook>,
    boost::intrusive::compare<by_key>>;

using usched::detail::timeline;

std::vector<const entity*> order_of(const timeline<entity>& t) {
  std::vector<const entity*> out;
  for (const entity& e : t) out.push_back(&e);
  return out;
}
std::vector<const entity*> order_of(const reference_t& r) {
  std::vector<const entity*> out;
  for (const entity& e : r) out.push_back(&e);
  return out;
}

}  // namespace

TEST_CASE("timeline: the tree and the run keep the single tree's order, equal keys first in first out",
          "[engine][cfs]") {
  std::deque<entity> all(200);
  timeline<entity> t;
  reference_t ref;
  std::uint64_t rng = 12345;
  auto rand = [&rng](std::uint64_t m) {
    rng = usched::detail::lcg_next(rng);
    return (rng >> 33) % m;
  };
  // Keys from a small range, so that many are equal, near a floor that
  // moves forward as fork-join keys and sleeper credit do; some near the
  // 64-bit wrap.
  std::uint64_t floor = ~std::uint64_t{0} - 5000;
  std::vector<entity*> idle;
  for (entity& e : all) idle.push_back(&e);
  std::size_t in_run_seen = 0, flushes_seen = 0, swaps = 0, both_seen = 0;
  for (int step = 0; step < 200000; ++step) {
    const std::uint64_t what = rand(100);
    floor += rand(3);
    if (what < 45 && !idle.empty()) {
      const std::size_t k = rand(idle.size());
      entity* e = idle[k];
      idle.erase(idle.begin() + static_cast<std::ptrdiff_t>(k));
      // Mostly at or above the top (a spawn), sometimes anywhere (a wake-up).
      e->vruntime = what < 35 ? floor + 40 + rand(8) : floor + rand(48);
      const std::size_t run_before = t.run_size();
      t.insert(*e);
      ref.insert(*e);
      e->queued = true;
      if (t.run_size() < run_before) ++flushes_seen;
    } else if (what < 80 && !t.empty()) {
      // Erase the leftmost (a pick) or one anywhere (a balancer's detach).
      entity* e = what < 65 ? t.leftmost() : nullptr;
      if (!e) {
        std::size_t k = rand(ref.size());
        auto it = ref.begin();
        while (k-- > 0) ++it;
        e = &*it;
      }
      t.erase(*e);
      ref.erase(ref.iterator_to(*e));
      e->queued = false;
      idle.push_back(e);
    } else if (!t.empty() && !idle.empty()) {
      // A yield: an unqueued fiber takes the leftmost's place where that
      // keeps the order, else the leftmost leaves and it is inserted.
      entity* left = t.leftmost();
      REQUIRE(left == &*ref.begin());
      const std::size_t k = rand(idle.size());
      entity* e = idle[k];
      idle[k] = left;
      e->vruntime = left->vruntime + rand(6) - 2;
      if (t.replace_leftmost(*left, *e)) {
        ++swaps;
      } else {
        t.erase(*left);
        t.insert(*e);
      }
      ref.erase(ref.iterator_to(*left));
      ref.insert(*e);
      left->queued = false;
      e->queued = true;
    }
    in_run_seen += t.run_size() > 0 ? 1 : 0;
    both_seen += t.run_size() > 0 && t.run_size() < ref.size() ? 1 : 0;
    const auto order = order_of(t);
    REQUIRE(order == order_of(ref));
    REQUIRE(t.empty() == ref.empty());
    REQUIRE(t.leftmost() == (ref.empty() ? nullptr : &*ref.begin()));
    REQUIRE(t.second() == (order.size() > 1 ? order[1] : nullptr));
    REQUIRE(t.rightmost() == (order.empty() ? nullptr : order.back()));
  }
  // Every path was taken, many times.
  CHECK(in_run_seen > 100000);
  CHECK(both_seen > 100000);
  CHECK(flushes_seen > 1000);
  CHECK(swaps > 1000);
}
