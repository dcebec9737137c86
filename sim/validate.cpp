// validate.cpp: usched_sim --validate (see validate.hpp and
// docs/simulator.md, "Validation").
#include "validate.hpp"

#include <algorithm>
#include <cstdio>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include <usched/options.hpp>
#include <usched/runtime.hpp>

#include "cli.hpp"
#include "histogram.hpp"
#include "schbench_model.hpp"

namespace usched::sim {
namespace {

struct shape {
  const char* name;
  std::vector<std::string> args;
};

struct counters {
  std::uint64_t pulled = 0, wake_prev = 0, wake_idle = 0, wake_other = 0, parks = 0, switches = 0;
};

counters sum(const runtime_stats& st) {
  counters c;
  for (const auto& w : st.workers) {
    c.pulled += w.fibers_pulled;
    c.wake_prev += w.wake_prev;
    c.wake_idle += w.wake_idle_sibling;
    c.wake_other += w.wake_other;
    c.parks += w.parks;
    c.switches += w.fibers_run;
  }
  return c;
}

std::string ratio(double sim, double real) {
  if (real == 0) return sim == 0 ? "1.00" : "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", sim / real);
  return buf;
}

std::string pair(std::uint64_t real, std::uint64_t sim) {
  return std::to_string(real) + "/" + std::to_string(sim) + " " + ratio(static_cast<double>(sim), static_cast<double>(real));
}

// Counters per second of the run, so that runs of different lengths compare.
std::string per_s(std::uint64_t real, std::uint64_t sim, std::uint64_t secs) {
  return pair(real / secs, sim / secs);
}

}  // namespace

int run_validation(const validate_options& v, std::ostream& out, std::ostream& progress) {
  const std::vector<shape> shapes =
      v.quick ? std::vector<shape>{{"-c 1000 -s 1000", {"-c", "1000", "-s", "1000"}}}
              : std::vector<shape>{{"-c 1000 -s 1000", {"-c", "1000", "-s", "1000"}},
                                   {"-c 10000 -s 5000", {"-c", "10000", "-s", "5000"}},
                                   {"-c 30000 -s 30000", {"-c", "30000", "-s", "30000"}}};
  std::vector<std::string> policies;
  if (v.quick) {
    policies = {"cfs", "cfs-v5.9", "steal"};
  } else {
    policies = usched::policy_names();
  }
  const std::string secs = v.quick ? "2" : "6";
  const std::uint64_t measured_s = v.quick ? 1 : 5;  // after the 1 s warm-up

  usched::options base = usched::options::from_env();
  std::vector<double> p50_ratios, p99_ratios;
  std::ostringstream table;
  unsigned cpus = 0;
  std::string topology;
  for (const auto& sh : shapes) {
    for (const auto& policy : policies) {
      std::vector<std::string> args = {"-m", "2", "-r", secs, "-w", "1", "-i", "0"};
      args.insert(args.end(), sh.args.begin(), sh.args.end());
      schbench::cli_options o = schbench::parse_cli(args, "usched_sim --validate");
      o.policy = policy;
      progress << "usched_sim --validate: " << policy << " " << sh.name << ": runtime, " << std::flush;

      std::ostringstream ignore;
      runtime_stats real_stats;
      const schbench::run_summary real = schbench::run_schbench(o, ignore, &real_stats);

      progress << "simulator\n" << std::flush;
      sim_config cfg;
      cfg.topology = base.topology;  // this host unless USCHED_TOPOLOGY says otherwise
      cfg.policy = policy;
      cfg.seed = v.seed;
      cfg.options = base;
      cfg.cost = v.cost;
      cfg.hz = v.hz;
      cfg.jiffies = v.jiffies;
      cfg.jitter = v.jitter;
      simulator sim(cfg);
      const schbench::run_summary simulated = run_schbench_model(sim, o, ignore);
      cpus = sim.nr_cpus();
      topology = sim.topology_line();

      const counters rc = sum(real_stats);
      const counters sc = sum(sim.stats());
      const double r50 = static_cast<double>(schbench::percentile_value(real, 50.0));
      const double r99 = static_cast<double>(schbench::percentile_value(real, 99.0));
      const double s50 = static_cast<double>(schbench::percentile_value(simulated, 50.0));
      const double s99 = static_cast<double>(schbench::percentile_value(simulated, 99.0));
      if (r50 > 0) p50_ratios.push_back(s50 / r50);
      if (r99 > 0) p99_ratios.push_back(s99 / r99);
      char line[512];
      std::snprintf(line, sizeof line, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", policy.c_str(), sh.name,
                    pair(real.samples, simulated.samples).c_str(),
                    pair(schbench::percentile_value(real, 50.0), schbench::percentile_value(simulated, 50.0)).c_str(),
                    pair(schbench::percentile_value(real, 99.0), schbench::percentile_value(simulated, 99.0)).c_str(),
                    per_s(rc.switches, sc.switches, measured_s + 1).c_str(),
                    per_s(rc.pulled, sc.pulled, measured_s + 1).c_str(),
                    per_s(rc.wake_prev, sc.wake_prev, measured_s + 1).c_str(),
                    per_s(rc.parks, sc.parks, measured_s + 1).c_str());
      table << line;
    }
  }
  const auto median = [](std::vector<double> x) {
    if (x.empty()) return 0.0;
    std::sort(x.begin(), x.end());
    return x[x.size() / 2];
  };
  out << "usched_sim --validate" << (v.quick ? " --quick" : "") << ": the real runtime and the simulator, "
      << cpus << " workers, " << topology << "\n"
      << "schbench -m 2 -r " << secs << " -w 1 (latencies in us; counters per second of the run, over all workers)\n"
      << "each cell: runtime/simulator, then simulator / runtime\n\n"
      << "| policy | shape | samples | p50 | p99 | switches/s | pulled/s | wake_prev/s | parks/s |\n"
      << "|---|---|---|---|---|---|---|---|---|\n"
      << table.str();
  char tail[160];
  std::snprintf(tail, sizeof tail, "\nmedian simulator/runtime ratio over the rows: p50 %.2f, p99 %.2f\n", median(p50_ratios),
                median(p99_ratios));
  out << tail;
  return 0;
}

}  // namespace usched::sim
