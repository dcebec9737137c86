// usched_sim: the engine and a policy on a simulated topology.
//
//   usched_sim [--topology T] [--policy P] [--seed N] [--cost NAME=NS]...
//              -- schbench [schbench flags] | -- file PATH
//
// Output is the schbench clone's (the 2020 block, --json, USCHED_STATS), so
// a simulated run reads like a measured one. Same inputs and seed, same
// bytes.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <usched/error.hpp>
#include <usched/options.hpp>

#include "cli.hpp"
#include "trace_export.hpp"
#include "histogram.hpp"
#include "schbench_model.hpp"
#include "simulator.hpp"
#include "experiments.hpp"
#include "calibration.hpp"
#include "validate.hpp"
#include "workload.hpp"

namespace {

namespace sb = usched::schbench;
using usched::sim::simulator;

constexpr const char* program = "usched_sim";

struct usage : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string usage_text() {
  std::string s =
      "usage: usched_sim [--topology T] [--policy P] [--seed N] [--machine M] [--cost NAME=NS]...\n"
      "                  [--noise NAME=VALUE]... [--trace FILE] -- schbench [schbench flags] | -- file PATH\n"
      "       usched_sim --validate [--quick] [--machine M] [--cost NAME=NS]... [--noise NAME=VALUE]...\n"
      "       usched_sim --experiments [--quick] [--figures DIR] [--machine M] [--cost NAME=NS]... [--noise NAME=VALUE]...\n"
      "       usched_sim --calibrate [--quick] [--machine M] [--policy P]\n"
      "  --topology T   the machine: what USCHED_TOPOLOGY takes (synthetic string or XML file); default: this host\n"
      "  --policy P     " + sb::policy_list() + " (default: USCHED_POLICY, else cfs)\n"
      "  --seed N       0..2^64-1: every random draw of the run (default 1)\n"
      "  --trace FILE   record every scheduling event to FILE: Chrome JSON if it ends in .json, else ftrace text\n"
      "  --validate     run schbench shapes on the real runtime and in the simulator, one table (--quick: fewer)\n"
      "  --experiments  run the seeds' experiments and print docs/experiments.md; exit 1 if a shape does not hold\n"
      "  --calibrate    fit the 40-vCPU VM's wake-up noise to seed 000's v5.10-rc1 + fix block, predict v5.9's\n"
      "                 (--quick: fewer seeds, shorter runs; --figures DIR: draw the page's timelines into DIR);\n"
      "                 --machine kvm16: the 16-vCPU guest's to its saturated block, predict its default-think one;\n"
      "                 --policy P: the kernel of the fitted run\n"
      "  --machine M    the simulated machine's costs, noise and HZ: " + joined(usched::sim::machine_names()) + "\n"
      "                 (default: ideal, no noise; --experiments: each experiment's own)\n"
      "  --noise NAME=VALUE  a setting of the machine's noise, one of: " + joined(usched::sim::noise_names()) + "\n"
      "  --cost NAME=NS a cost in ns (the median of its draws), one of:";
  for (const auto& n : usched::sim::cost_names()) {
    s += " " + n + "(" + std::to_string(usched::sim::get_cost(usched::sim::costs{}, n)) + ")";
  }
  s += "\n  schbench       the schbench clone's flags (usched_schbench --help); -r must be > 0\n"
       "  file PATH      a workload file (docs/simulator.md, \"Workload files\")\n"
       "environment: the USCHED_* variables, as the runtime reads them, on top of the kernel's settings\n"
       "  (options::kernel_experiment(): fork balancing on, USCHED_FORK_BALANCE=1; no join hand-off,\n"
       "  USCHED_JOIN_HANDOFF=0); USCHED_STATS=1|json prints the statistics to stderr. --experiments runs\n"
       "  the kernel's settings alone; --validate runs the runtime's defaults with the variables on top.\n";
  return s;
}

std::uint64_t parse_seed(const std::string& v) {
  if (v.empty() || v.size() > 20 || v.find_first_not_of("0123456789") != std::string::npos) {
    throw usage("--seed '" + v + "': expected a whole number 0..18446744073709551615");
  }
  try {
    std::size_t used = 0;
    const unsigned long long n = std::stoull(v, &used);
    return n;
  } catch (const std::exception&) {
    throw usage("--seed '" + v + "': expected a whole number 0..18446744073709551615");
  }
}

struct command {
  usched::sim::sim_config cfg;
  std::string kind;  // "schbench" or "file"
  std::vector<std::string> rest;
  bool help = false;
  std::string trace_file;
  bool validate = false;
  bool experiments = false;
  bool calibrate = false;
  bool policy_given = false;  // --policy named (--calibrate: the fitted run's kernel)
  bool quick = false;
  std::string figures;
  // --machine (empty: the mode's own; a run's is "ideal", each experiment
  // names its thread's), then --cost and --noise on top, in order.
  std::string machine;
  std::vector<std::pair<std::string, std::int64_t>> cost_overrides;
  std::vector<std::pair<std::string, std::string>> noise_overrides;
};

command parse(int argc, char** argv) {
  command c;
  // The kernel's settings, then the USCHED_* variables as a runtime reads
  // them (so USCHED_FORK_BALANCE=0 or USCHED_JOIN_HANDOFF=1 still choose).
  c.cfg.options = usched::options::from_env(usched::options::kernel_experiment());
  c.cfg.policy = c.cfg.options.policy;
  c.cfg.topology = c.cfg.options.topology;
  int i = 1;
  const auto value = [&](const std::string& flag) -> std::string {
    if (i + 1 >= argc) throw usage(flag + ": missing value");
    return argv[++i];
  };
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a == "-h" || a == "--help") {
      c.help = true;
      return c;
    } else if (a == "--topology") {
      c.cfg.topology = value(a);
    } else if (a == "--policy") {
      c.cfg.policy = value(a);
      c.policy_given = true;
      const auto names = usched::policy_names();
      if (std::find(names.begin(), names.end(), c.cfg.policy) == names.end()) {
        throw usage("--policy '" + c.cfg.policy + "' is not a registered policy; choose one of: " + sb::policy_list());
      }
    } else if (a == "--validate") {
      c.validate = true;
    } else if (a == "--experiments") {
      c.experiments = true;
    } else if (a == "--calibrate") {
      c.calibrate = true;
    } else if (a == "--quick") {
      c.quick = true;
    } else if (a == "--figures") {
      c.figures = value(a);
    } else if (a == "--trace") {
      c.trace_file = value(a);
      sb::check_output_file("--trace", c.trace_file);
    } else if (a == "--seed") {
      c.cfg.seed = parse_seed(value(a));
    } else if (a == "--cost") {
      const std::string v = value(a);
      const auto eq = v.find('=');
      const std::string name = v.substr(0, eq);
      const std::string ns = eq == std::string::npos ? "" : v.substr(eq + 1);
      const bool digits = !ns.empty() && ns.size() <= 15 && ns.find_first_not_of("0123456789", ns[0] == '-' ? 1 : 0) == std::string::npos && ns != "-";
      if (eq == std::string::npos || !digits) {
        usched::sim::set_cost(c.cfg.cost, name, 0);  // an unknown name is the first thing wrong
        throw usage("--cost " + v + ": expected NAME=NS with NS a whole number of ns, 0 or more");
      }
      usched::sim::set_cost(c.cfg.cost, name, std::stoll(ns));
      c.cost_overrides.emplace_back(name, std::stoll(ns));
    } else if (a == "--machine") {
      c.machine = value(a);
      usched::sim::machine_named(c.machine);  // an unknown name is one line here
    } else if (a == "--noise") {
      const std::string v = value(a);
      const auto eq = v.find('=');
      if (eq == std::string::npos) {
        throw usage("--noise " + v + ": expected NAME=VALUE, NAME one of: " + joined(usched::sim::noise_names()));
      }
      usched::sim::machine scratch;
      usched::sim::set_noise(scratch, v.substr(0, eq), v.substr(eq + 1));  // checks it
      c.noise_overrides.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    } else {
      throw usage("unknown flag '" + a + "'; accepted: --topology T --policy P --seed N --machine M --cost NAME=NS --noise NAME=VALUE --trace FILE --validate --experiments --quick --figures DIR -h, then -- schbench ... or -- file PATH");
    }
  }
  // The machine, then the costs and the noise set on top of it.
  usched::sim::machine m = usched::sim::machine_named(c.machine.empty() ? "ideal" : c.machine);
  for (const auto& [name, ns] : c.cost_overrides) usched::sim::set_cost(m.cost, name, ns);
  for (const auto& [name, v] : c.noise_overrides) usched::sim::set_noise(m, name, v);
  usched::sim::use_machine(c.cfg, m);
  if (int{c.validate} + int{c.experiments} + int{c.calibrate} > 1) {
    throw usage("--validate, --experiments and --calibrate: one at a time");
  }
  if (c.quick && !c.validate && !c.experiments && !c.calibrate) {
    throw usage("--quick: only with --validate, --experiments or --calibrate");
  }
  if (!c.figures.empty() && !c.experiments) throw usage("--figures: only with --experiments");
  if (!c.figures.empty() && !std::filesystem::is_directory(c.figures)) {
    throw usage("--figures '" + c.figures + "': not a directory; expected an existing folder for the page's timelines");
  }
  if (c.calibrate && (!c.cost_overrides.empty() || !c.noise_overrides.empty())) {
    throw usage("--calibrate fits the machine of the thread's run itself; leave out --cost and --noise");
  }
  if (c.calibrate && !c.machine.empty()) usched::sim::calibration_for(c.machine);  // one that has a block, or one line
  if (c.validate || c.experiments || c.calibrate) {
    const std::string mode = c.validate ? "--validate" : c.experiments ? "--experiments" : "--calibrate";
    if (i < argc) throw usage(mode + " runs its own workloads; leave out the -- " + std::string(argv[i]) + " part");
    return c;
  }
  if (i >= argc) throw usage("no workload: end the flags with -- schbench [flags] or -- file PATH, or use --validate");
  c.kind = argv[i++];
  if (c.kind != "schbench" && c.kind != "file") {
    throw usage("unknown workload '" + c.kind + "'; accepted: schbench, file");
  }
  for (; i < argc; ++i) c.rest.emplace_back(argv[i]);
  return c;
}

// run_mode() runs --validate or --experiments: a bad USCHED_* value is
// exit status 2, a run that fails 1, else what the mode returns.
template <class Mode>
int run_mode(Mode&& mode) {
  try {
    return mode();
  } catch (const std::invalid_argument& e) {
    std::cerr << program << ": " << e.what() << '\n';
    return 2;
  } catch (const std::exception& e) {
    std::cerr << program << ": " << e.what() << '\n';
    return 1;
  }
}

int validate(const command& c) {
  usched::sim::validate_options v;
  v.quick = c.quick;
  v.cost = c.cfg.cost;
  v.hz = c.cfg.hz;
  v.jiffies = c.cfg.jiffies;
  v.jitter = c.cfg.jitter;
  v.seed = c.cfg.seed;
  return run_mode([&] { return usched::sim::run_validation(v, std::cout, std::cerr); });
}

// experiments(): the page on stdout, exit 1 when a shape does not hold (the
// page says which).
int experiments(const command& c) {
  usched::sim::experiments_options o;
  o.quick = c.quick;
  o.machine = c.machine;
  o.cost_overrides = c.cost_overrides;
  o.noise_overrides = c.noise_overrides;
  o.figures_dir = c.figures;
  return run_mode([&] {
    std::ostringstream page;
    const int failed = usched::sim::run_experiments(o, page, std::cerr);
    std::cout << page.str() << std::flush;
    if (failed == 0) return 0;
    std::cerr << program << ": " << failed << " experiment shape(s) do not hold; see the page\n";
    return 1;
  });
}

}  // namespace

int main(int argc, char** argv) {
  command c;
  sb::cli_options so;
  usched::sim::workload wl;
  try {
    c = parse(argc, argv);
    if (c.help) {
      std::cout << usage_text();
      return 0;
    }
    if (c.validate) return validate(c);
    if (c.experiments) return experiments(c);
    if (c.calibrate) {
      usched::sim::calibration_options o;
      o.quick = c.quick;
      if (!c.machine.empty()) o.machine = c.machine;
      if (c.policy_given) o.policy = c.cfg.policy;
      return run_mode([&] { return usched::sim::run_calibration(o, std::cout, std::cerr); });
    }
    if (c.kind == "schbench") {
      so = sb::parse_cli(c.rest, "usched_sim -- schbench");
      if (so.help) {
        std::cout << sb::usage_text("usched_sim -- schbench");
        return 0;
      }
      if (!so.policy.empty()) c.cfg.policy = so.policy;
      if (!so.json_file.empty()) sb::check_output_file("--json", so.json_file);
    } else {
      if (c.rest.size() != 1) throw usage("file: expected one PATH, got " + std::to_string(c.rest.size()) + " arguments");
      std::ifstream in(c.rest[0]);
      if (!in) throw usage("file '" + c.rest[0] + "': cannot be read");
      wl = usched::sim::parse_workload(in, c.rest[0]);
    }
  } catch (const std::invalid_argument& e) {  // usage, usage_error, workload_error, config_error, bad --cost
    std::cerr << program << ": " << e.what() << '\n';
    return 2;
  } catch (const std::exception& e) {
    std::cerr << program << ": " << e.what() << '\n';
    return 2;
  }
  // Everything the run needs is checked before anything is written: the
  // topology (building the simulator), the schbench flags only a run
  // checks, the output files.
  std::unique_ptr<usched::detail::tracer> trace;
  std::unique_ptr<simulator> sim;
  try {
    if (c.kind == "schbench") usched::sim::check_model_options(so);
    if (!c.trace_file.empty()) {
      // One thread writes every record, in virtual time order: the
      // outside buffer holds them all.
      trace = std::make_unique<usched::detail::tracer>(usched::detail::tracer::config{});
      c.cfg.trace = trace.get();
    }
    sim = std::make_unique<simulator>(c.cfg);
  } catch (const std::exception& e) {
    std::cerr << program << ": " << e.what() << '\n';
    return 2;
  }
  const auto remove_outputs = [&] {
    if (trace) std::remove(c.trace_file.c_str());
  };
  try {
    // The whole report is kept until the run has finished, so that a run
    // that fails leaves no half-written output.
    std::ostringstream out;
    sb::run_summary s =
        c.kind == "schbench" ? usched::sim::run_schbench_model(*sim, so, out) : usched::sim::run_workload(*sim, wl, out);
    if (trace) {
      usched::detail::trace_data d = trace->collect();
      d.policy = c.cfg.policy;
      d.nr_cpus = sim->nr_cpus();
      d.virtual_time = true;
      try {
        usched::detail::write_trace_file(c.trace_file, d);
      } catch (const std::exception& e) {
        throw std::runtime_error(std::string("--trace: ") + e.what());
      }
    }
    if (c.kind == "schbench" && !so.json_file.empty()) {
      std::ofstream json(so.json_file, std::ios::out | std::ios::trunc);
      json << sb::to_json(s);
      if (!json.flush()) throw std::runtime_error("--json: writing '" + so.json_file + "' failed");
    }
    std::cout << out.str() << std::flush;
    if (c.cfg.options.stats != usched::options::stats_output::none) {
      const usched::runtime_stats st = sim->stats();
      std::cerr << (c.cfg.options.stats == usched::options::stats_output::json ? st.to_json() : st.to_table());
    }
  } catch (const std::invalid_argument& e) {
    remove_outputs();
    std::cerr << program << ": " << e.what() << '\n';
    return 2;
  } catch (const std::exception& e) {
    remove_outputs();
    std::cerr << program << ": " << e.what() << '\n';
    return 1;
  }
  return 0;
}
