// validate.hpp: the simulator beside the real runtime (usched_sim
// --validate): the same schbench shapes, on this host's topology, run by
// the real runtime and by the simulator, one table of both.
#pragma once

#include <iosfwd>

#include "simulator.hpp"

namespace usched::sim {

struct validate_options {
  bool quick = false;   // one shape, three policies, 2 s runs
  costs cost;           // the simulator's costs (--cost)
  unsigned hz = 1000;   // and its machine's tick and noise (--machine, --noise)
  bool jiffies = false;
  noise jitter;
  std::uint64_t seed = 1;
};

// run_validation() prints the table to `out` (progress to `progress`);
// returns 0. Throws what a run throws.
int run_validation(const validate_options& v, std::ostream& out, std::ostream& progress);

}  // namespace usched::sim
