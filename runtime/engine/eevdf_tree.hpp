// eevdf_tree.hpp: the EEVDF discipline's queue (the kernel's
// cfs_rq->tasks_timeline since v6.8): the queued fibers ordered by virtual
// deadline, each node augmented with the smallest vruntime and the
// smallest slice of its subtree, so that the pick of the earliest deadline
// among the eligible fibers is one descent from the root.
//
// The pick: a fiber is eligible when its vruntime is at most the queue's
// weighted average (its lag is not negative). The tree is ordered by
// deadline, so the answer is the leftmost eligible node: at each node, go
// left when the left subtree holds an eligible fiber (its smallest vruntime
// is eligible), else take the node if it is eligible, else go right. One
// path, O(log n) (the kernel's __pick_eevdf()).
//
// The kernel keeps this in a red-black tree with augmented callbacks
// (rb_add_augmented_cached, RB_DECLARE_CALLBACKS). Here it is an AVL tree:
// its two balance bits fit the low bits of the parent link, and every
// change is an attach or detach, after which the augmented values are
// recomputed up the path while they change, and then rotations, each of
// which recomputes the two or three nodes it moves (a rotation does not
// change what its subtree holds, so nothing above it changes). Its height
// is at most 1.44 log2(n), the red-black tree's 2 log2(n).
//
// Both ends are cached: the leftmost for the pick, the rightmost for an
// insert after every queued deadline (a burst of spawns, whose deadlines
// follow one another), which then attaches there without a descent: the
// nodes of a descent are other fibers' cold lines.
//
// Equal deadlines keep their insertion order (an insert goes after the
// equal keys, as rb_add's `less` does), so the leftmost eligible fiber is
// the oldest of equal deadlines, as in the kernel.
//
// Entity: has `ev` (an eevdf_links<Entity>: the links and the key),
// `ev_slice` (an eevdf_slices), and 64-bit `vruntime` and `ev_min_vruntime`.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>

namespace usched::detail {

// A node's links and its key.
template <class Entity>
struct eevdf_links {
  Entity* left;
  Entity* right;
  // The parent, with the AVL balance (right height - left height, + 1:
  // 0, 1 or 2) in the low two bits.
  std::uintptr_t parent_balance;
  std::uint64_t deadline;  // virtual deadline: the tree's key
};

// A fiber's slice request and the smallest request of its subtree, in ns
// (at most 100 ms: 32 bits).
struct eevdf_slices {
  std::uint32_t request;
  std::uint32_t min;
};

// Wrap-safe orders of virtual times, as the kernel's.
inline bool vtime_before(std::uint64_t a, std::uint64_t b) noexcept {
  return static_cast<std::int64_t>(a - b) < 0;
}

template <class Entity>
class eevdf_tree {
 public:
  eevdf_tree() = default;
  eevdf_tree(const eevdf_tree&) = delete;
  eevdf_tree& operator=(const eevdf_tree&) = delete;

  bool empty() const noexcept { return root_ == nullptr; }
  Entity* root() const noexcept { return root_; }
  // The earliest deadline, null when empty.
  Entity* leftmost() const noexcept { return leftmost_; }
  // The latest deadline, null when empty.
  Entity* rightmost() const noexcept { return rightmost_; }

  // The smallest slice queued; only when not empty.
  std::uint32_t min_slice() const noexcept { return root_->ev_slice.min; }
  // The smallest vruntime queued; only when not empty.
  std::uint64_t min_vruntime() const noexcept { return root_->ev_min_vruntime; }

  void insert(Entity& se) noexcept {
    se.ev.left = se.ev.right = nullptr;
    se.ev_min_vruntime = se.vruntime;
    se.ev_slice.min = se.ev_slice.request;
    if (root_ == nullptr) {
      set_parent(se, nullptr, 1);
      root_ = leftmost_ = rightmost_ = &se;
      return;
    }
    Entity* p = root_;
    bool leftmost = true;
    bool rightmost = true;
    if (!vtime_before(se.ev.deadline, rightmost_->ev.deadline)) {
      // After every key (equal ones included): the rightmost's right child.
      p = rightmost_;
      p->ev.right = &se;
      leftmost = false;
    } else {
      rightmost = false;
    }
    for (; !rightmost;) {
      if (vtime_before(se.ev.deadline, p->ev.deadline)) {
        if (p->ev.left == nullptr) {
          p->ev.left = &se;
          break;
        }
        p = p->ev.left;
      } else {
        leftmost = false;
        if (p->ev.right == nullptr) {
          p->ev.right = &se;
          break;
        }
        p = p->ev.right;
      }
    }
    set_parent(se, p, 1);
    if (leftmost) leftmost_ = &se;
    if (rightmost) rightmost_ = &se;
    propagate(p, nullptr);
    insert_retrace(&se);
  }

  void erase(Entity& se) noexcept {
    if (&se == leftmost_) leftmost_ = next(se);
    if (&se == rightmost_) rightmost_ = prev(se);
    Entity* start;  // the lowest node whose subtree lost a member
    int side;       // which of start's subtrees became shorter (-1 left, +1 right)
    Entity* moved;  // the successor that took se's place, whose values are stale
    if (se.ev.left != nullptr && se.ev.right != nullptr) {
      // The successor takes se's place: the leftmost of its right subtree.
      Entity* s = se.ev.right;
      while (s->ev.left != nullptr) s = s->ev.left;
      moved = s;
      Entity* sr = s->ev.right;
      if (s == se.ev.right) {
        start = s;
        side = +1;
      } else {
        Entity* sp = parent(*s);
        sp->ev.left = sr;
        if (sr) set_parent(*sr, sp, balance_bits(*sr));
        s->ev.right = se.ev.right;
        set_parent(*se.ev.right, s, balance_bits(*se.ev.right));
        start = sp;
        side = -1;
      }
      s->ev.left = se.ev.left;
      set_parent(*se.ev.left, s, balance_bits(*se.ev.left));
      set_parent(*s, parent(se), balance_bits(se));
      replace_child(parent(se), &se, s);
    } else {
      Entity* child = se.ev.left ? se.ev.left : se.ev.right;
      Entity* p = parent(se);
      if (child) set_parent(*child, p, balance_bits(*child));
      if (p == nullptr) {
        root_ = child;
        return;
      }
      side = p->ev.left == &se ? -1 : +1;
      replace_child(p, &se, child);
      start = p;
      moved = nullptr;
    }
    propagate(start, moved, &se);
    erase_retrace(start, side);
  }

  // The leftmost node whose vruntime satisfies `eligible`, null if none.
  template <class Eligible>
  Entity* pick_earliest_eligible(Eligible&& eligible) const noexcept {
    for (Entity* n = root_; n != nullptr;) {
      Entity* l = n->ev.left;
      if (l != nullptr && eligible(l->ev_min_vruntime)) {
        n = l;
        continue;
      }
      if (eligible(n->vruntime)) return n;
      n = n->ev.right;
    }
    return nullptr;
  }

  // In-order predecessor, null at the start.
  static Entity* prev(Entity& se) noexcept {
    if (Entity* l = se.ev.left) {
      while (l->ev.right) l = l->ev.right;
      return l;
    }
    Entity* c = &se;
    Entity* p = parent(se);
    while (p != nullptr && p->ev.left == c) {
      c = p;
      p = parent(*p);
    }
    return p;
  }

  // In-order successor (the next later deadline), null at the end.
  static Entity* next(Entity& se) noexcept {
    if (Entity* r = se.ev.right) {
      while (r->ev.left) r = r->ev.left;
      return r;
    }
    Entity* c = &se;
    Entity* p = parent(se);
    while (p != nullptr && p->ev.right == c) {
      c = p;
      p = parent(*p);
    }
    return p;
  }

  // Checks the AVL shape, the order and the augmented values (tests).
  bool valid() const noexcept {
    int h = 0;
    if (root_ && parent(*root_) != nullptr) return false;
    if (!valid_at(root_, h)) return false;
    Entity* first = root_;
    while (first && first->ev.left) first = first->ev.left;
    Entity* last = root_;
    while (last && last->ev.right) last = last->ev.right;
    return first == leftmost_ && last == rightmost_;
  }

 private:
  static Entity* parent(const Entity& se) noexcept {
    return reinterpret_cast<Entity*>(se.ev.parent_balance & ~std::uintptr_t{3});
  }
  static unsigned balance_bits(const Entity& se) noexcept { return se.ev.parent_balance & 3u; }
  static int balance(const Entity& se) noexcept { return static_cast<int>(balance_bits(se)) - 1; }
  static void set_parent(Entity& se, Entity* p, unsigned bits) noexcept {
    se.ev.parent_balance = reinterpret_cast<std::uintptr_t>(p) | bits;
  }
  static void set_balance(Entity& se, int b) noexcept {
    se.ev.parent_balance = (se.ev.parent_balance & ~std::uintptr_t{3}) | static_cast<unsigned>(b + 1);
  }

  void replace_child(Entity* p, Entity* old_child, Entity* new_child) noexcept {
    if (p == nullptr) {
      root_ = new_child;
    } else if (p->ev.left == old_child) {
      p->ev.left = new_child;
    } else {
      p->ev.right = new_child;
    }
  }

  // The node's augmented values from its own and its children's.
  static void recompute(Entity& n) noexcept {
    std::uint64_t v = n.vruntime;
    std::uint32_t s = n.ev_slice.request;
    for (const Entity* c : {n.ev.left, n.ev.right}) {
      if (c == nullptr) continue;
      if (vtime_before(c->ev_min_vruntime, v)) v = c->ev_min_vruntime;
      if (c->ev_slice.min < s) s = c->ev_slice.min;
    }
    n.ev_min_vruntime = v;
    n.ev_slice.min = s;
  }

  // From n up, each node's augmented values again, while they change: a
  // node whose values stay has none to pass on. Up to `moved` (a node
  // that took another's place, stale whatever its descendants say) and
  // past it, the walk goes on regardless. Before any rotation: the tree's
  // shape is the attach's or detach's.
  static bool recompute_changed(Entity& n) noexcept {
    const std::uint64_t v = n.ev_min_vruntime;
    const std::uint32_t s = n.ev_slice.min;
    recompute(n);
    return n.ev_min_vruntime != v || n.ev_slice.min != s;
  }
  // `moved`'s values are compared with those of the node whose place it
  // took (`was`): what the nodes above it saw there.
  static void propagate(Entity* n, Entity* moved, const Entity* was = nullptr) noexcept {
    for (; n != nullptr; n = parent(*n)) {
      if (n == moved) {
        recompute(*n);
        moved = nullptr;
        if (n->ev_min_vruntime == was->ev_min_vruntime && n->ev_slice.min == was->ev_slice.min) return;
        continue;
      }
      const bool changed = recompute_changed(*n);
      if (!changed && moved == nullptr) return;
    }
  }

  // Rotations: `x` goes down, its child up; returns the child, the new root
  // of the subtree. Balances are the caller's; the augmented values of the
  // two are recomputed, lower first.
  Entity* rotate_left(Entity* x) noexcept {
    Entity* y = x->ev.right;
    Entity* p = parent(*x);
    x->ev.right = y->ev.left;
    if (y->ev.left) set_parent(*y->ev.left, x, balance_bits(*y->ev.left));
    y->ev.left = x;
    set_parent(*y, p, balance_bits(*y));
    set_parent(*x, y, balance_bits(*x));
    replace_child(p, x, y);
    recompute(*x);
    recompute(*y);
    return y;
  }
  Entity* rotate_right(Entity* x) noexcept {
    Entity* y = x->ev.left;
    Entity* p = parent(*x);
    x->ev.left = y->ev.right;
    if (y->ev.right) set_parent(*y->ev.right, x, balance_bits(*y->ev.right));
    y->ev.right = x;
    set_parent(*y, p, balance_bits(*y));
    set_parent(*x, y, balance_bits(*x));
    replace_child(p, x, y);
    recompute(*x);
    recompute(*y);
    return y;
  }

  // x is right-heavy by two: rotate, and set the balances the AVL way.
  // Returns the subtree's new root.
  Entity* fix_right_heavy(Entity* x) noexcept {
    Entity* z = x->ev.right;
    if (balance(*z) >= 0) {
      Entity* top = rotate_left(x);
      if (balance(*z) == 0) {  // only after an erase
        set_balance(*x, +1);
        set_balance(*z, -1);
      } else {
        set_balance(*x, 0);
        set_balance(*z, 0);
      }
      return top;
    }
    Entity* y = z->ev.left;
    const int by = balance(*y);
    rotate_right(z);
    Entity* top = rotate_left(x);
    set_balance(*x, by > 0 ? -1 : 0);
    set_balance(*z, by < 0 ? +1 : 0);
    set_balance(*y, 0);
    return top;
  }
  Entity* fix_left_heavy(Entity* x) noexcept {
    Entity* z = x->ev.left;
    if (balance(*z) <= 0) {
      Entity* top = rotate_right(x);
      if (balance(*z) == 0) {
        set_balance(*x, -1);
        set_balance(*z, +1);
      } else {
        set_balance(*x, 0);
        set_balance(*z, 0);
      }
      return top;
    }
    Entity* y = z->ev.right;
    const int by = balance(*y);
    rotate_left(z);
    Entity* top = rotate_right(x);
    set_balance(*x, by < 0 ? +1 : 0);
    set_balance(*z, by > 0 ? -1 : 0);
    set_balance(*y, 0);
    return top;
  }

  // After attaching leaf n: walk up while a subtree grew.
  void insert_retrace(Entity* n) noexcept {
    for (Entity* p = parent(*n); p != nullptr; n = p, p = parent(*n)) {
      const int b = balance(*p) + (p->ev.left == n ? -1 : +1);
      if (b == 0) {
        set_balance(*p, 0);
        return;  // p's height did not change
      }
      if (b == 2) {
        fix_right_heavy(p);
        return;  // the rotated subtree has p's old height
      }
      if (b == -2) {
        fix_left_heavy(p);
        return;
      }
      set_balance(*p, b);  // p grew by one: go on
    }
  }

  // After a detach that shortened `side` of p: walk up while a subtree shrank.
  void erase_retrace(Entity* p, int side) noexcept {
    while (p != nullptr) {
      const int b = balance(*p) - side;
      Entity* top = p;
      if (b == 2) {
        const bool same_height = balance(*p->ev.right) == 0;
        top = fix_right_heavy(p);
        if (same_height) return;
      } else if (b == -2) {
        const bool same_height = balance(*p->ev.left) == 0;
        top = fix_left_heavy(p);
        if (same_height) return;
      } else {
        set_balance(*p, b);
        if (b != 0) return;  // p kept its height
      }
      Entity* gp = parent(*top);
      if (gp == nullptr) return;
      side = gp->ev.left == top ? -1 : +1;
      p = gp;
    }
  }

  bool valid_at(const Entity* n, int& height) const noexcept {
    if (n == nullptr) {
      height = 0;
      return true;
    }
    int hl = 0, hr = 0;
    if (!valid_at(n->ev.left, hl) || !valid_at(n->ev.right, hr)) return false;
    if (hr - hl != balance(*n) || hr - hl > 1 || hl - hr > 1) return false;
    for (const Entity* c : {n->ev.left, n->ev.right}) {
      if (c && parent(*c) != n) return false;
    }
    if (n->ev.left && vtime_before(n->ev.deadline, n->ev.left->ev.deadline)) return false;
    if (n->ev.right && vtime_before(n->ev.right->ev.deadline, n->ev.deadline)) return false;
    std::uint64_t v = n->vruntime;
    std::uint32_t s = n->ev_slice.request;
    for (const Entity* c : {n->ev.left, n->ev.right}) {
      if (c == nullptr) continue;
      if (vtime_before(c->ev_min_vruntime, v)) v = c->ev_min_vruntime;
      if (c->ev_slice.min < s) s = c->ev_slice.min;
    }
    if (v != n->ev_min_vruntime || s != n->ev_slice.min) return false;
    height = 1 + (hl > hr ? hl : hr);
    return true;
  }

  Entity* root_ = nullptr;
  Entity* leftmost_ = nullptr;
  Entity* rightmost_ = nullptr;
};

}  // namespace usched::detail
