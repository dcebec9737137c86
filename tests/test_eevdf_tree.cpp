// The EEVDF discipline's tree (eevdf_tree.hpp), against a plain list: through
// random inserts and erases with many equal deadlines, the tree keeps its
// AVL shape, its order (equal deadlines in insertion order) and its
// augmented minima after every step, and its one-descent pick returns what a
// scan of every queued fiber in deadline order returns.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "eevdf_tree.hpp"
#include "random.hpp"

namespace {

struct entity {
  usched::detail::eevdf_links<entity> ev{};
  std::uint64_t vruntime = 0;
  std::uint64_t ev_min_vruntime = 0;
  usched::detail::eevdf_slices ev_slice{};
  bool queued = false;
  std::uint64_t seq = 0;  // insertion order, for the reference's ties
};

using usched::detail::eevdf_tree;

std::vector<const entity*> order_of(const eevdf_tree<entity>& t) {
  std::vector<const entity*> out;
  for (entity* e = t.leftmost(); e; e = eevdf_tree<entity>::next(*e)) out.push_back(e);
  return out;
}

// The reference order: by deadline, equal deadlines by insertion.
std::vector<const entity*> reference_order(const std::deque<entity>& all) {
  std::vector<const entity*> out;
  for (const entity& e : all) {
    if (e.queued) out.push_back(&e);
  }
  std::stable_sort(out.begin(), out.end(), [](const entity* a, const entity* b) {
    if (a->ev.deadline != b->ev.deadline) return usched::detail::vtime_before(a->ev.deadline, b->ev.deadline);
    return a->seq < b->seq;
  });
  return out;
}

}  // namespace

TEST_CASE("eevdf tree: shape, order, minima and pick against a scan, through random inserts and erases",
          "[engine][eevdf]") {
  std::deque<entity> all(300);
  eevdf_tree<entity> t;
  std::uint64_t rng = 777;
  auto rand = [&rng](std::uint64_t m) {
    rng = usched::detail::lcg_next(rng);
    return (rng >> 33) % m;
  };
  // Near the top of the 64-bit range, so that the keys wrap.
  const std::uint64_t base = ~std::uint64_t{0} - 5000;
  std::uint64_t seq = 0;
  unsigned queued = 0, picks_checked = 0, max_queued = 0;
  for (int step = 0; step < 20000; ++step) {
    entity& e = all[rand(all.size())];
    if (e.queued) {
      t.erase(e);
      e.queued = false;
      --queued;
    } else {
      e.ev.deadline = base + rand(12000);
      e.vruntime = e.ev.deadline - rand(4000);
      e.ev_slice.request = 100 + static_cast<std::uint32_t>(rand(50)) * 100;
      e.seq = ++seq;
      t.insert(e);
      e.queued = true;
      ++queued;
    }
    max_queued = std::max(max_queued, queued);
    REQUIRE(t.valid());
    const auto order = order_of(t);
    REQUIRE(order == reference_order(all));
    if (order.empty()) continue;
    // min_slice and min_vruntime at the root.
    std::uint32_t ms = order.front()->ev_slice.request;
    std::uint64_t mv = order.front()->vruntime;
    for (const entity* x : order) {
      ms = std::min(ms, x->ev_slice.request);
      if (usched::detail::vtime_before(x->vruntime, mv)) mv = x->vruntime;
    }
    REQUIRE(t.min_slice() == ms);
    REQUIRE(t.min_vruntime() == mv);
    // The pick for a random eligibility threshold: the first in deadline
    // order whose vruntime is not past it.
    const std::uint64_t avg = base + rand(12000);
    auto eligible = [avg](std::uint64_t v) { return !usched::detail::vtime_before(avg, v); };
    const entity* expect = nullptr;
    for (const entity* x : order) {
      if (eligible(x->vruntime)) {
        expect = x;
        break;
      }
    }
    REQUIRE(t.pick_earliest_eligible(eligible) == expect);
    if (expect) ++picks_checked;
  }
  CHECK(max_queued > 100);
  CHECK(picks_checked > 5000);
}

TEST_CASE("eevdf tree: a descending and an ascending run of inserts stay within the AVL height", "[engine][eevdf]") {
  std::deque<entity> all(1024);
  eevdf_tree<entity> t;
  for (std::size_t i = 0; i < all.size(); ++i) {
    all[i].ev.deadline = i % 2 ? 1'000'000 - i : 1'000'000 + i;
    all[i].vruntime = all[i].ev.deadline;
    all[i].ev_slice.request = 3000;
    t.insert(all[i]);
  }
  REQUIRE(t.valid());
  // Height of a 1024-node AVL tree is at most 1.44 log2(1026): 14.
  std::function<int(const entity*)> height = [&](const entity* n) {
    return n ? 1 + std::max(height(n->ev.left), height(n->ev.right)) : 0;
  };
  CHECK(height(t.root()) <= 14);
  // Erase every other one from the front; the leftmost follows.
  for (std::size_t i = 0; i < all.size(); i += 2) t.erase(all[i]);
  REQUIRE(t.valid());
  CHECK(t.leftmost()->ev.deadline == 1'000'000 - 1023);
}
