// policy_snapshots.hpp: the inputs of a policy's decisions, built by hand
// for tests that ask a policy directly (no runtime, no threads, no clock).
#pragma once

#include <initializer_list>
#include <vector>

#include "domains.hpp"
#include "policy.hpp"
#include "topology.hpp"

namespace usched::test {

// tree_of() is the domain tree of `workers` workers, one per PU, on the
// hwloc synthetic machine `synthetic` (e.g. "pack:2 l3:1 core:2 pu:1").
inline domain_tree tree_of(const char* synthetic, unsigned workers) {
  const auto topo = detail::topology::load(synthetic);
  return build_domains(topo.place_workers(workers, usched::worker_unit::pu));
}

// cpus() is one snapshot per worker from its number of queued fibers: a
// worker with queued fibers also runs one, a worker with none is idle.
inline std::vector<cpu_snapshot> cpus(std::initializer_list<unsigned> queued) {
  std::vector<cpu_snapshot> out;
  for (unsigned q : queued) {
    cpu_snapshot s;
    s.nr_queued = q;
    s.idle = q == 0;
    s.nr_running = q + (q ? 1 : 0);
    out.push_back(s);
  }
  return out;
}

}  // namespace usched::test
