// experiments.hpp: the seeds' experiments in the simulator, one page
// (usched_sim --experiments, docs/experiments.md).
//
// Each experiment is a kernel thread's measurement (../shared/seeds/): its
// machine as a topology, its workload (the schbench clone's command line or
// a workload file), the policies that stand for the kernels it compared,
// the thread's numbers, and the shape its conclusion rests on (which policy
// has the millisecond tail, which rule moves the count and by how much).
// Every row runs over several seeds; the page gives the median and the
// spread, the thread's number beside it, and whether the shape holds.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "simulator.hpp"

namespace usched::sim {

struct experiments_options {
  // Shorter runs (the ctest version): the same seeds and shapes.
  bool quick = false;
  // The machine every experiment runs on (--machine; empty: each its
  // thread's), and costs and noise settings on top (--cost, --noise).
  std::string machine;
  std::vector<std::pair<std::string, std::int64_t>> cost_overrides;
  std::vector<std::pair<std::string, std::string>> noise_overrides;
  // Where the page's timelines go (--figures DIR): an experiment that has
  // one traces its first seed under the policies it compares and draws the
  // same moment of each (gnuplot; docs/tracing.md). The page links them as
  // DIR's last component / the file, for a page written beside DIR. Empty:
  // no timelines.
  std::string figures_dir;
};

// What an experiment is, for a listing: its title, the simulated machine,
// the topology, the schbench command line ({r} for the run's seconds;
// empty for a workload file), its rows' policies, and whether it holds
// simulated blocks against measured ones (a fidelity check).
struct experiment_info {
  std::string title;
  std::string machine_name;
  std::string topology;
  std::string schbench_args;
  std::vector<std::string> policies;
  bool compares_blocks = false;
};

// experiment_list() lists the page's experiments, in its order; it runs
// nothing.
std::vector<experiment_info> experiment_list();

// run_experiments() writes the page (markdown) to `page`, a line per run to
// `progress`, and returns how many shapes do not hold (0: all hold).
// Throws what a run throws.
int run_experiments(const experiments_options& o, std::ostream& page, std::ostream& progress);

}  // namespace usched::sim
