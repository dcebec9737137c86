// domains.hpp: where each worker sits (worker_place), and the domain
// hierarchy built from those places (build_domains). The places come from
// the topology layer (topology.hpp, hwloc) in the real backend and in the
// simulator, or from a test; nothing here knows how they were found.
#pragma once

#include <vector>

#include "sched_domain.hpp"

namespace usched::detail {

// The place of one worker in the machine. Indices are hwloc *logical* indices
// of the containing objects (dense, 0-based, in topology order), -1 where the
// machine has no such object. `os_pu` is the OS index of the first PU the
// worker is bound to, for log messages.
struct worker_place {
  int worker = -1;   // worker index, 0..n-1
  int pu = -1;       // logical index of the (first) PU
  int os_pu = -1;    // OS index of that PU
  int core = -1;
  int llc = -1;      // logical index of the last-level cache object above the PU
  int package = -1;
  int numa_node = -1;
  unsigned nr_pus = 1;  // PUs in the worker's binding (1 for worker_unit::pu)
};

}  // namespace usched::detail

namespace usched {

// build_domains() derives every worker's chain from the places the topology
// gave them (see topology::place_workers). Candidate levels are SMT (same
// core), LLC (same last-level cache), NODE (same NUMA node), PKG (same
// package) and the whole machine (NUMA if the workers span several nodes,
// else SYS); a candidate is kept only if it is strictly wider than the level
// below it and contains it. NODE is kept only when it is also strictly inside
// the worker's package (sub-NUMA clustering); a node as wide as a package or
// wider is left to the PKG and whole-machine levels. Indices of -1 are
// unknown and shared with nobody. Groups of a domain are the child spans (the
// widest kept level below it) of its workers, each worker's own chain
// deciding, so every worker in a span sees the same groups. Workers whose
// chains hold the same domain share its span and groups (shared_list); time
// and memory grow with workers x levels on any hierarchical topology.
domain_tree build_domains(const std::vector<detail::worker_place>& places);

}  // namespace usched
