// steal_lifo.cpp: `steal-lifo`, randomized work stealing (steal.cpp) over a
// LIFO local queue, the work-stealing deque of Cilk, TBB and Rayon: a worker
// runs the fiber it spawned or woke most recently, and thieves take the
// oldest. Fork-join code then runs depth first on each worker (the
// "work-first" principle) with a live-fiber count bounded by depth x
// fan-out, while steals move the big, old subtrees.
#include "steal.hpp"

namespace usched {

std::unique_ptr<policy> make_steal_lifo() {
  return std::make_unique<steal_policy>("steal-lifo", queue_discipline::lifo);
}

}  // namespace usched
