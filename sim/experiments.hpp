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

// run_experiments() writes the page (markdown) to `page`, a line per run to
// `progress`, and returns how many shapes do not hold (0: all hold).
// Throws what a run throws.
int run_experiments(const experiments_options& o, std::ostream& page, std::ostream& progress);

}  // namespace usched::sim
