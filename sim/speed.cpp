// usched_sim_speed: how fast the simulator runs seed 000's workload, by
// virtual CPUs and virtual seconds.
//
//   usched_sim_speed [-r REPEATS] [--quick] [--policy P]
//
// Each row is the thread's command line (-m 2 -t CPUS/2 -c 1000000 -s 1000)
// on "pack:1 core:CPUS/2 pu:2", run REPEATS times in this process: wall
// time median [min..max], simulated events per second of wall time, and
// the wall time per virtual second, so that the growth with CPUs and with
// virtual time reads off the table. Wall times are of this host, shared
// and noisy: compare rows of one run, not runs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <usched/options.hpp>

#include "cli.hpp"
#include "schbench_model.hpp"
#include "simulator.hpp"

namespace {

struct row_result {
  double median_s, min_s, max_s;
  std::uint64_t events;
};

row_result measure(unsigned cpus, std::uint64_t seconds, unsigned repeats, const std::string& policy) {
  std::vector<double> walls;
  std::uint64_t events = 0;
  for (unsigned r = 0; r < repeats; ++r) {
    usched::sim::sim_config cfg;
    cfg.topology = "pack:1 core:" + std::to_string(cpus / 2) + " pu:2";
    cfg.policy = policy;
    cfg.seed = 1;
    const auto opts = usched::schbench::parse_cli(std::vector<std::string>{
        "-m", "2", "-t", std::to_string(cpus / 2), "-r", std::to_string(seconds), "-c", "1000000", "-s",
        "1000", "-w", "0", "-i", "0"});
    const auto t0 = std::chrono::steady_clock::now();
    usched::sim::simulator sim(cfg);
    std::ostringstream out;
    usched::sim::run_schbench_model(sim, opts, out);
    walls.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    events = sim.events();
  }
  std::sort(walls.begin(), walls.end());
  return {walls[walls.size() / 2], walls.front(), walls.back(), events};
}

}  // namespace

int main(int argc, char** argv) {
  unsigned repeats = 3;
  bool quick = false;
  std::string policy = "cfs";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      quick = true;
    } else if (a == "-r" && i + 1 < argc) {
      const std::string v = argv[++i];
      if (v.empty() || v.size() > 3 || v.find_first_not_of("0123456789") != std::string::npos || std::stoul(v) == 0) {
        std::cerr << "usched_sim_speed: -r '" << v << "': expected repeats, 1..999\n";
        return 2;
      }
      repeats = static_cast<unsigned>(std::stoul(v));
    } else if (a == "--policy" && i + 1 < argc) {
      policy = argv[++i];
      const auto names = usched::policy_names();
      if (std::find(names.begin(), names.end(), policy) == names.end()) {
        std::cerr << "usched_sim_speed: --policy '" << policy << "' is not a registered policy; choose one of: "
                  << usched::schbench::policy_list() << "\n";
        return 2;
      }
    } else {
      std::cerr << "usched_sim_speed: unknown flag '" << a << "'; accepted: -r N --quick --policy P\n";
      return 2;
    }
  }
  const std::vector<unsigned> cpus = quick ? std::vector<unsigned>{8, 40} : std::vector<unsigned>{8, 40, 128, 512};
  const std::vector<std::uint64_t> secs = quick ? std::vector<std::uint64_t>{10} : std::vector<std::uint64_t>{10, 30};
  std::printf("seed 000's workload in the simulator, policy %s, %u repeat%s per row\n", policy.c_str(), repeats,
              repeats == 1 ? "" : "s");
  std::printf("%6s %9s %24s %14s %16s\n", "CPUs", "virtual", "wall s, median [min..max]", "events", "wall ms per vs");
  for (const unsigned c : cpus) {
    for (const std::uint64_t s : secs) {
      const row_result r = measure(c, s, repeats, policy);
      std::printf("%6u %8llus %10.3f [%.3f..%.3f] %14llu %16.1f\n", c, static_cast<unsigned long long>(s), r.median_s,
                  r.min_s, r.max_s, static_cast<unsigned long long>(r.events), 1000.0 * r.median_s / static_cast<double>(s));
    }
  }
  return 0;
}
