// eevdf.cpp: `eevdf`, the kernel's fair class as of v6.18: the EEVDF
// discipline (queue_discipline::eevdf, the engine's) inside v6.18's load
// balancer and wake-up placement (cfs_v6_features()).
//
// The balancer is v5.10's pass (the `cfs` member) with what changed in it
// between v5.10 and v6.18 for a machine without cgroups, energy model,
// asymmetric packing or asymmetric capacities, each a cfs_features switch
// (cfs_features.hpp; docs/policies/eevdf.md lists them):
// * wake-up: SIS_UTIL's scan depth from the LLC's util (v6.0) instead of
//   SIS_PROP, one merged core/worker scan from target + 1 (v5.12), an idle
//   SMT sibling of prev first (v5.16), prev always recorded as the recent
//   worker (v5.16);
// * balancing: group_smt_balance (v6.6), sibling_imbalance for the prefer-
//   sibling spread (v6.6), imb_numa_nr's NUMA tolerance (v5.18), no pull
//   into a group above the domain's average (v6.0), runnable boosting of
//   find_busiest_queue (v6.5), delayed fibers moved only by load (v6.12);
// * newly idle: rationed by the narrowest level's longest pass (v5.16).
#include "cfs_family.hpp"

namespace usched {

std::unique_ptr<policy> make_eevdf() {
  const cfs_features features = cfs_v6_features();
  policy_traits traits = cfs_traits(features);
  traits.discipline = queue_discipline::eevdf;
  return std::make_unique<cfs_policy>("eevdf", features, traits);
}

}  // namespace usched
