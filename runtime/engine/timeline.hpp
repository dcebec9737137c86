// timeline.hpp: the fair discipline's queue order (the kernel's
// cfs_rq->tasks_timeline), as a red-black tree and a sorted run beside it.
//
// The kernel keeps every queued entity in one red-black tree by vruntime.
// Under fork-join code nearly every insert is a new fiber a slice behind its
// spawner (START_DEBIT), whose key follows the one inserted before it, and
// nearly every erase is the leftmost or a fiber a join hands the worker to:
// a tree rebalances at both, and each rotation reads and writes the links of
// other fibers, lines that have gone cold in a batch of a thousand. Here a
// stream of keys that follow one another is kept apart, in a doubly linked
// list sorted by key (the run): a key not below the run's last joins it at
// the tail, one comparison and no walk, and leaving it is an unlink. The
// tree holds the rest. The run follows the newest stream: an insert below a
// run of one or two fibers moves them to the tree and starts a new run (the
// first spawns of a batch get slices that shrink as the queue grows, so
// their keys fall before the stream that follows settles); one that falls
// inside the run goes into it near the tail, or moves the run to the tree
// when it is further in.
//
// The order is exactly the single tree's: by vruntime (wrap-safe, as the
// kernel's entity_before()), equal keys in the order they were inserted.
// Within each part that is the part's own order. Between the parts, where a
// tree key equals a run key the tree's fiber is the older: an insert goes to
// the tree only when it is strictly below the run's head, and fibers move
// from the run to the tree only behind the tree's own (each insert there
// goes after equal keys). So the leftmost is the lower of the two heads, the
// tree's on a tie, and iteration merges the two the same way.
//
// A fiber in the run keeps its links in the tree hook's own fields, which
// an unlinked node (normal_link) leaves free: left and right are the
// previous and next in the run, and the parent is the run's marker, which
// no tree node points at. The sched_entity's layout does not change, and
// the timeline takes the 56 bytes of the tree's header, the run's ends and
// the tree's insert hint (the tree keeps no count), so that it and the
// hand-off share the runqueue's fair line as the tree alone did.
#pragma once

#include <boost/intrusive/set.hpp>
#include <cstddef>
#include <cstdint>
#include <iterator>

namespace usched::detail {

// Entity: has `timeline_hook` (a normal_link set_member_hook) and a
// 64-bit `vruntime`.
template <class Entity>
class timeline {
  using hook_t = decltype(Entity::timeline_hook);

 public:
  // Wrap-safe, as the kernel's entity_before().
  static bool before(const Entity& a, const Entity& b) noexcept {
    return static_cast<std::int64_t>(a.vruntime - b.vruntime) < 0;
  }
  struct by_vruntime {
    bool operator()(const Entity& a, const Entity& b) const noexcept { return before(a, b); }
  };
  using tree_t = boost::intrusive::multiset<
      Entity, boost::intrusive::member_hook<Entity, hook_t, &Entity::timeline_hook>,
      boost::intrusive::compare<by_vruntime>, boost::intrusive::constant_time_size<false>>;

  timeline() = default;
  timeline(const timeline&) = delete;
  timeline& operator=(const timeline&) = delete;

  bool empty() const noexcept { return tree_.empty() && run_head_ == nullptr; }

  // The first fiber in order, null when empty.
  Entity* leftmost() const noexcept { return first_of(tree_first(), run_head_); }

  // The fiber after the leftmost, null when it is the only one.
  Entity* second() const noexcept {
    Entity* left = leftmost();
    if (left == nullptr) return nullptr;
    if (in_run(*left)) return first_of(tree_first(), run_next(*left));
    auto it = std::next(tree_.iterator_to(*left));
    return first_of(it == tree_.end() ? nullptr : const_cast<Entity*>(&*it), run_head_);
  }

  // The last fiber in order, null when empty.
  Entity* rightmost() const noexcept {
    Entity* t = tree_.empty() ? nullptr : const_cast<Entity*>(&*std::prev(tree_.end()));
    if (t == nullptr) return run_tail_;
    if (run_tail_ == nullptr) return t;
    return before(*run_tail_, *t) ? t : run_tail_;
  }

  void insert(Entity& se) noexcept {
    if (run_tail_ == nullptr || !before(se, *run_tail_)) return run_append(se);
    if (before(se, *run_head_)) {
      if (!run_is_short()) return tree_insert(se);
      flush_run();
      return run_append(se);
    }
    // Inside the run: after the last fiber not above it, found from the
    // tail within a few steps.
    Entity* at = run_prev(*run_tail_);
    for (unsigned steps = 0; at != nullptr && steps < walk_len; ++steps, at = run_prev(*at)) {
      if (!before(se, *at)) return run_insert_after(*at, se);
    }
    flush_run();
    run_append(se);
  }

  void erase(Entity& se) noexcept {
    if (in_run(se)) {
      Entity* p = run_prev(se);
      Entity* n = run_next(se);
      if (p) set_run_next(*p, n);
      else run_head_ = n;
      if (n) set_run_prev(*n, p);
      else run_tail_ = p;
      node_traits::set_parent(node(se), nullptr);
      return;
    }
    if (&se == last_inserted_) last_inserted_ = nullptr;
    tree_.erase(tree_.iterator_to(se));
  }

  // The yield's swap: `prev` (not queued) takes the place of `left`, the
  // leftmost, when that keeps the order, that is when prev sorts strictly
  // before every other queued fiber; the same as erase(left) then
  // insert(prev), without either's rebalancing. False (nothing changed)
  // otherwise.
  bool replace_leftmost(Entity& left, Entity& prev) noexcept {
    Entity* succ = second();
    if (succ != nullptr && !before(prev, *succ)) return false;
    if (in_run(left)) {
      Entity* p = run_prev(left);
      Entity* n = run_next(left);
      set_run_prev(prev, p);
      set_run_next(prev, n);
      node_traits::set_parent(node(prev), run_marker());
      if (p) set_run_next(*p, &prev);
      else run_head_ = &prev;
      if (n) set_run_prev(*n, &prev);
      else run_tail_ = &prev;
      node_traits::set_parent(node(left), nullptr);
      return true;
    }
    if (&left == last_inserted_) last_inserted_ = nullptr;
    tree_.replace_node(tree_.iterator_to(left), prev);
    last_inserted_ = &prev;
    return true;
  }

  // Iteration in order: the two parts merged. Forward only.
  class iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = Entity;
    using difference_type = std::ptrdiff_t;
    using pointer = Entity*;
    using reference = Entity&;

    iterator() = default;
    reference operator*() const noexcept { return *current(); }
    pointer operator->() const noexcept { return current(); }
    iterator& operator++() noexcept {
      if (from_run()) {
        run_ = run_next(*run_);
      } else {
        ++it_;
      }
      return *this;
    }
    iterator operator++(int) noexcept {
      iterator old = *this;
      ++*this;
      return old;
    }
    bool operator==(const iterator& o) const noexcept { return it_ == o.it_ && run_ == o.run_; }
    bool operator!=(const iterator& o) const noexcept { return !(*this == o); }

   private:
    friend class timeline;
    iterator(typename tree_t::const_iterator it, typename tree_t::const_iterator end, Entity* run)
        : it_(it), end_(end), run_(run) {}
    bool from_run() const noexcept { return it_ == end_ || (run_ != nullptr && before(*run_, *it_)); }
    Entity* current() const noexcept { return from_run() ? run_ : const_cast<Entity*>(&*it_); }
    typename tree_t::const_iterator it_, end_;
    Entity* run_ = nullptr;
  };
  iterator begin() const noexcept { return iterator(tree_.begin(), tree_.end(), run_head_); }
  iterator end() const noexcept { return iterator(tree_.end(), tree_.end(), nullptr); }

  // How many of the queued fibers are in the run (for tests).
  std::size_t run_size() const noexcept {
    std::size_t n = 0;
    for (Entity* e = run_head_; e; e = run_next(*e)) ++n;
    return n;
  }

 private:
  using value_traits = typename tree_t::value_traits;
  using node_traits = typename tree_t::node_traits;
  using node_ptr = typename node_traits::node_ptr;

  static node_ptr node(Entity& se) noexcept { return value_traits::to_node_ptr(se); }
  static Entity* entity(node_ptr n) noexcept { return n ? value_traits::to_value_ptr(n) : nullptr; }
  static node_ptr run_marker() noexcept { return &marker_; }
  bool in_run(Entity& se) const noexcept { return node_traits::get_parent(node(se)) == run_marker(); }
  static Entity* run_prev(Entity& se) noexcept { return entity(node_traits::get_left(node(se))); }
  static Entity* run_next(Entity& se) noexcept { return entity(node_traits::get_right(node(se))); }
  static void set_run_prev(Entity& se, Entity* p) noexcept { node_traits::set_left(node(se), p ? node(*p) : nullptr); }
  static void set_run_next(Entity& se, Entity* n) noexcept { node_traits::set_right(node(se), n ? node(*n) : nullptr); }

  // A run of one or two is moved to the tree by an insert below it, which
  // starts a new run; a longer one stays, and the insert goes to the tree.
  bool run_is_short() const noexcept { return run_head_ == run_tail_ || run_next(*run_head_) == run_tail_; }
  // How far from the run's tail an insert inside it is placed in it.
  static constexpr unsigned walk_len = 4;

  Entity* tree_first() const noexcept { return tree_.empty() ? nullptr : const_cast<Entity*>(&*tree_.begin()); }
  // The earlier of a tree fiber and a run fiber (either may be null): the
  // tree's on a tie.
  static Entity* first_of(Entity* tree, Entity* run) noexcept {
    if (tree == nullptr) return run;
    if (run == nullptr) return tree;
    return before(*run, *tree) ? run : tree;
  }

  void run_append(Entity& se) noexcept {
    node_traits::set_parent(node(se), run_marker());
    set_run_prev(se, run_tail_);
    set_run_next(se, nullptr);
    if (run_tail_) set_run_next(*run_tail_, &se);
    else run_head_ = &se;
    run_tail_ = &se;
  }

  void run_insert_after(Entity& at, Entity& se) noexcept {
    Entity* n = run_next(at);
    node_traits::set_parent(node(se), run_marker());
    set_run_prev(se, &at);
    set_run_next(se, n);
    set_run_next(at, &se);
    if (n) set_run_prev(*n, &se);
    else run_tail_ = &se;
  }

  // The run moves into the tree, in order, each after the equal keys there.
  void flush_run() noexcept {
    Entity* e = run_head_;
    run_head_ = run_tail_ = nullptr;
    while (e) {
      Entity* n = run_next(*e);
      tree_insert(*e);
      e = n;
    }
  }

  // Into the tree: after the previous insert when the key falls right after
  // it, at the left end when it is below every key (a woken fiber's sleeper
  // credit), else a search.
  void tree_insert(Entity& se) noexcept {
    if (Entity* last = last_inserted_) {
      const auto next = std::next(tree_.iterator_to(*last));
      if (!before(se, *last) && (next == tree_.end() || before(se, *next))) {
        tree_.insert_before(next, se);
        last_inserted_ = &se;
        return;
      }
    }
    if (!tree_.empty() && before(se, *tree_.begin())) {
      tree_.push_front(se);
    } else {
      tree_.insert(se);
    }
    last_inserted_ = &se;
  }

  tree_t tree_;
  Entity* run_head_ = nullptr;
  Entity* run_tail_ = nullptr;
  Entity* last_inserted_ = nullptr;  // the tree's newest fiber, the next tree insert's first guess
  // The parent of every fiber in a run (any timeline's): an address no tree
  // node points at. Never written.
  static inline typename node_traits::node marker_{};
};

}  // namespace usched::detail
