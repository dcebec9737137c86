// compare.cpp: usched_schbench_compare, the schbench clone run once per
// registered policy and once on plain threads, side by side in one
// invocation, with one table and one PNG of the percentile curves.
//
//   usched_schbench_compare [--policies a,b,c] [--plot FILE] [workload flags...]
//
// Every run gets the same command line: compare_defaults(), scaled to this
// machine, then the extra flags (later flags win, so any default can be
// overridden), then --policy P or --threads. The kernel run is the baseline:
// the table gives each policy's p99 as a ratio of it.
#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include <usched/usched.hpp>

#include "cli.hpp"
#include "common/cli_main.hpp"
#include "common/process.hpp"
#include "common/stop_signals.hpp"
#include "compare_cli.hpp"
#include "histogram.hpp"
#include "schbench_model.hpp"
#include "simulator.hpp"

namespace {

namespace fs = std::filesystem;
namespace sb = usched::schbench;
using steady = std::chrono::steady_clock;

constexpr const char* program = "usched_schbench_compare";

// How often the progress line is redrawn.
constexpr std::chrono::milliseconds poll_period{250};
// How much of a failed run's log is shown.
constexpr std::size_t log_tail_chars = 2000;

// ---- processes ----------------------------------------------------------------

// ---- one run ---------------------------------------------------------------------

struct run_result {
  std::string label;  // policy name, or "threads"
  std::optional<sb::run_summary> summary;
  std::string failure;  // why there is no summary
  double seconds = 0;
};

std::string format_duration(double s) {
  const auto total = static_cast<long long>(s);
  char buf[32];
  if (total >= 60) std::snprintf(buf, sizeof buf, "%lldm%02llds", total / 60, total % 60);
  else std::snprintf(buf, sizeof buf, "%llds", total);
  return buf;
}

// progress draws "[3/10] cfs-v5.9  12s of ~21s  (total 1m05s)": redrawn in
// place on a terminal, one line per finished run otherwise (logs, CI).
class progress {
 public:
  progress() : tty_(isatty(STDERR_FILENO) == 1), begin_(steady::now()) {}

  void update(std::size_t index, std::size_t count, const std::string& label, double run_s,
              double expected_s) const {
    if (!tty_) return;
    std::fprintf(stderr, "\r\033[K[%zu/%zu] %-20s %s of ~%s  (total %s)", index + 1, count,
                 label.c_str(), format_duration(run_s).c_str(), format_duration(expected_s).c_str(),
                 format_duration(total()).c_str());
    std::fflush(stderr);
  }

  void finished(std::size_t index, std::size_t count, const run_result& r) const {
    const std::string what = r.summary ? std::to_string(r.summary->samples) + " samples"
                                       : "FAILED: " + r.failure;
    if (tty_) std::fprintf(stderr, "\r\033[K");
    std::fprintf(stderr, "[%zu/%zu] %-20s %s in %.1fs  (total %s)\n", index + 1, count,
                 r.label.c_str(), what.c_str(), r.seconds, format_duration(total()).c_str());
    std::fflush(stderr);
  }

 private:
  double total() const { return std::chrono::duration<double>(steady::now() - begin_).count(); }
  bool tty_;
  steady::time_point begin_;
};

// run_one() runs the clone once and reads its JSON back. `interrupted` is
// set when a stop signal came; the run then ends early but still reports.
run_result run_one(const std::string& exe, const std::vector<std::string>& args,
                   const std::string& label, const fs::path& dir, std::size_t index,
                   std::size_t count, double expected_s, const progress& prog,
                   const bench::stop_signals& sig, bool& interrupted) {
  run_result r;
  r.label = label;
  const std::string json = (dir / ("run" + std::to_string(index) + ".json")).string();
  const std::string log = (dir / ("run" + std::to_string(index) + ".log")).string();
  std::vector<std::string> full = args;
  full.insert(full.end(), {"--json", json});

  const auto start = steady::now();
  int status = 0;
  {
    bench::child_process c(exe, full, log);
    // A stop signal goes on to the clone as SIGINT: it stops and prints its
    // final report.
    status = bench::wait_for_child(c, sig, SIGINT, interrupted, poll_period, [&] {
      const double run_s = std::chrono::duration<double>(steady::now() - start).count();
      prog.update(index, count, label, run_s, expected_s);
    });
  }
  r.seconds = std::chrono::duration<double>(steady::now() - start).count();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string tail = bench::read_text(log);
    if (tail.size() > log_tail_chars) tail = "..." + tail.substr(tail.size() - log_tail_chars);
    r.failure = bench::describe_status(status) + "; its output:\n" + tail;
    return r;
  }
  try {
    r.summary = sb::parse_run_json(bench::read_text(json));
  } catch (const std::exception& e) {
    r.failure = std::string("unreadable JSON: ") + e.what();
  }
  return r;
}

// ---- output --------------------------------------------------------------------------

using sb::percentile_value;

void print_table(const std::vector<run_result>& results, std::ostream& out) {
  const run_result* base = nullptr;
  for (const run_result& r : results) {
    if (r.label == "threads" && r.summary) base = &r;
  }
  const std::uint64_t base_p99 = base ? percentile_value(*base->summary, 99.0) : 0;
  char line[256];
  std::snprintf(line, sizeof line, "%-20s %9s %9s %9s %9s %9s %8s %12s\n", "policy", "p50",
                "p90", "p99", "p99.9", "max", "samples", "p99/threads");
  out << line;
  for (const run_result& r : results) {
    const std::string label = r.label == "threads" ? "threads (kernel)" : r.label;
    if (!r.summary) {
      std::snprintf(line, sizeof line, "%-20s %s\n", label.c_str(), "failed (see below)");
      out << line;
      continue;
    }
    const sb::run_summary& s = *r.summary;
    std::string ratio = "-";
    if (base_p99 > 0) {
      char buf[32];
      // Ratios run from thousandths to hundreds: one more decimal below 1.
      const double ratio_value =
          static_cast<double>(percentile_value(s, 99.0)) / static_cast<double>(base_p99);
      std::snprintf(buf, sizeof buf, ratio_value < 1.0 ? "%.3f" : "%.2f", ratio_value);
      ratio = buf;
    }
    std::snprintf(line, sizeof line, "%-20s %9llu %9llu %9llu %9llu %9llu %8llu %12s\n",
                  label.c_str(), static_cast<unsigned long long>(percentile_value(s, 50.0)),
                  static_cast<unsigned long long>(percentile_value(s, 90.0)),
                  static_cast<unsigned long long>(percentile_value(s, 99.0)),
                  static_cast<unsigned long long>(percentile_value(s, 99.9)),
                  static_cast<unsigned long long>(s.max_us),
                  static_cast<unsigned long long>(s.samples), ratio.c_str());
    out << line;
  }
  out << "(latencies in usec, schbench's bucket midpoints; p99/threads: p99 over the kernel's p99)\n";
}

// A percentile on the "nines" axis: 90 -> 1, 99 -> 2, 99.9 -> 3.
double nines(double p) { return -std::log10(1.0 - p / 100.0); }

std::string gnuplot_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "''";
    else out += c;
  }
  return out + "'";
}

// gnuplot_error() is gnuplot's complaint in `log` as one line. gnuplot
// echoes the failing command with a caret under it, then
// `"<script>" line N: <what>`, sometimes followed by `system error: <why>`;
// the location line, less the temporary script's name, says it best. Output
// in any other shape (or from another program on PATH) gives its last line.
std::string gnuplot_error(const std::string& log, const std::string& script) {
  std::vector<std::string> lines;
  std::istringstream in(log);
  for (std::string l; std::getline(in, l);) {
    if (l.find_first_not_of(" \t\r") != std::string::npos) lines.push_back(l);
  }
  const std::string at = "\"" + script + "\" ";
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind(at, 0) != 0) continue;
    std::string said = lines[i].substr(at.size());
    if (i + 1 < lines.size() && lines[i + 1].rfind("system error: ", 0) == 0) {
      said += " (" + lines[i + 1] + ")";
    }
    return said;
  }
  return lines.empty() ? "" : lines.back();
}

// curve_style() is the gnuplot style of one curve, so that fourteen of
// them read at a glance: the kernel's threads black and thicker, the CFS
// family (every policy named cfs...) in blues and purples, the baselines
// (none, steal, steal-lifo, ...) in oranges and greens. `nth` counts the
// curves of the same family before this one; each gets its own colour,
// marker and dash pattern, so no two curves look alike even in grey.
std::string curve_style(const std::string& label, std::size_t nth) {
  // Dark to light, blue then purple; and orange, green, alternating.
  static constexpr std::array<const char*, 10> cfs_colours = {
      "#08306b", "#2171b5", "#4292c6", "#6baed6", "#084594",
      "#3f007d", "#6a51a3", "#807dba", "#9e9ac8", "#54278f"};
  static constexpr std::array<const char*, 6> base_colours = {"#e66101", "#1b7837", "#fdb863",
                                                              "#5aae61", "#b35806", "#a6dba0"};
  // gnuplot's point types without the kernel's filled circle (7), and its
  // dash types 1 (solid), 2 (dashes), 4 (dash-dot), 5 (dash-dot-dot).
  static constexpr std::array<int, 12> points = {4, 5, 6, 8, 9, 10, 11, 12, 13, 1, 2, 3};
  static constexpr std::array<int, 4> dashes = {1, 2, 4, 5};
  if (label == "threads") return "lc rgb 'black' lw 3.5 dt 1 pt 7 ps 1.3";
  const bool cfs = label.rfind("cfs", 0) == 0;
  const char* colour = cfs ? cfs_colours[nth % cfs_colours.size()] : base_colours[nth % base_colours.size()];
  // The baselines take the point types from the other end, so a CFS curve
  // and a baseline curve never share one either.
  const int pt = cfs ? points[nth % points.size()] : points[points.size() - 1 - nth % points.size()];
  return std::string("lc rgb '") + colour + "' lw 2 dt " + std::to_string(dashes[nth % dashes.size()]) +
         " pt " + std::to_string(pt) + " ps 1.1";
}

// plot() writes the PNG with gnuplot, which main() has found on PATH. On
// success it says so on stdout; a failure is one line on stderr and a false
// return. No successful run means nothing to plot, which is not a failure of
// its own (the failed runs are reported already).
bool plot(const std::vector<run_result>& results, const std::string& png,
          const std::string& title, const fs::path& dir) {
  const std::string data = (dir / "curves.dat").string();
  std::ofstream d(data);
  std::vector<std::string> titles;
  std::vector<std::string> styles;
  std::size_t nr_cfs = 0, nr_base = 0;
  for (const run_result& r : results) {
    if (!r.summary) continue;
    d << "# " << r.label << "\n";
    for (const sb::percentile_row& row : r.summary->curve) {
      if (row.value == 0) continue;  // log scale
      d << nines(row.percentile) << ' ' << row.value << '\n';
    }
    d << "\n\n";
    titles.push_back(r.label == "threads" ? "threads (kernel)" : r.label);
    const bool cfs = r.label.rfind("cfs", 0) == 0;
    styles.push_back(curve_style(r.label, r.label == "threads" ? 0 : cfs ? nr_cfs++ : nr_base++));
  }
  d.close();
  if (titles.empty()) {
    std::cerr << program << ": no successful run to plot; no " << png << " written\n";
    return true;
  }

  // Debian's gnuplot-nox has both pngcairo and the libgd png terminal;
  // prefer cairo (antialiased) and fall back when a build lacks it.
  const std::string probe_log = (dir / "probe.log").string();
  std::string terminal = "png size 1200,650";
  {
    bench::child_process probe("gnuplot", {"-e", "set terminal pngcairo"}, probe_log, true);
    const int st = probe.wait();
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) terminal = "pngcairo size 1200,650";
  }

  const std::string script = (dir / "curves.gp").string();
  std::ofstream g(script);
  g << "set terminal " << terminal << " noenhanced\n"
    << "set output " << gnuplot_quote(png) << "\n"
    << "set title " << gnuplot_quote(title) << "\n"
    << "set xlabel 'percentile'\n"
    << "set ylabel 'wake-up latency (usec)'\n"
    << "set logscale y\n"
    << "set grid\n"
    << "set key outside right top\n"
    << "set xrange [0:4.2]\n"
    << "set xtics ('1' " << nines(1) << ", '50' " << nines(50) << ", '90' 1, '99' 2, '99.9' 3, "
    << "'99.99' 4)\n"
    << "plot ";
  for (std::size_t i = 0; i < titles.size(); ++i) {
    if (i) g << ", \\\n     ";
    g << gnuplot_quote(data) << " index " << i << " using 1:2 with linespoints " << styles[i] << " title "
      << gnuplot_quote(titles[i]);
  }
  g << "\n";
  g.close();

  const std::string glog = (dir / "gnuplot.log").string();
  bench::child_process gp("gnuplot", {script}, glog, true);
  const int st = gp.wait();
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
    std::cout << "plot: wrote " << png << "\n";
    return true;
  }
  const std::string said = gnuplot_error(bench::read_text(glog), script);
  std::cerr << program << ": --plot '" << png << "': gnuplot failed (" << bench::describe_status(st)
            << ")" << (said.empty() ? "" : ": " + said) << "\n";
  return false;
}

// ---- the seed-000 experiment in the simulator --------------------------------

// The thread's numbers (seeds/000, Chris Mason's first mail).
struct thread_row {
  const char* kernel;
  std::uint64_t p50, p99, p999, max;
};
constexpr thread_row thread_rows[] = {{"v5.2", 155, 256, 3132, 3286},
                                      {"v5.9", 147, 12240, 13104, 13172},
                                      {"v5.10-rc1 + fix", 161, 314, 356, 358}};

// sim_experiment() runs seeds/000's command line in the simulator on the
// thread's topology and the thread's machine (`vm40`, its wake-up noise
// fitted to the v5.10-rc1 + fix run: docs/simulator.md, "Calibration"),
// once per policy, and prints one table with the thread's rows under it.
// Deterministic (seed 1): the same numbers on every machine.
void sim_experiment(const std::vector<std::string>& policies, std::ostream& out) {
  std::vector<std::string> args;
  std::istringstream in(sb::compare_sim_args);
  for (std::string a; in >> a;) args.push_back(a);
  args.insert(args.end(), {"-i", "0"});
  const sb::cli_options o = sb::parse_cli(args, "usched_sim -- schbench");
  out << "\nseeds/000 in the simulator: usched_sim --topology '" << sb::compare_sim_topology
      << "' --machine vm40 --policy P --seed 1 -- schbench " << sb::compare_sim_args << "\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-20s %9s %9s %9s %9s %8s\n", "policy", "p50", "p99", "p99.9", "max", "samples");
  out << line;
  for (const std::string& policy : policies) {
    usched::sim::sim_config cfg;
    cfg.topology = sb::compare_sim_topology;
    cfg.policy = policy;
    cfg.seed = 1;
    cfg.options = usched::options::from_env(usched::options::kernel_experiment());
    usched::sim::use_machine(cfg, usched::sim::machine_named("vm40"));
    usched::sim::simulator sim(cfg);
    std::ostringstream ignore;
    const sb::run_summary s = usched::sim::run_schbench_model(sim, o, ignore);
    std::snprintf(line, sizeof line, "%-20s %9llu %9llu %9llu %9llu %8llu\n", policy.c_str(),
                  static_cast<unsigned long long>(percentile_value(s, 50.0)),
                  static_cast<unsigned long long>(percentile_value(s, 99.0)),
                  static_cast<unsigned long long>(percentile_value(s, 99.9)),
                  static_cast<unsigned long long>(s.max_us), static_cast<unsigned long long>(s.samples));
    out << line;
  }
  for (const thread_row& r : thread_rows) {
    const std::string label = std::string("thread: ") + r.kernel;
    std::snprintf(line, sizeof line, "%-20s %9llu %9llu %9llu %9llu %8s\n", label.c_str(),
                  static_cast<unsigned long long>(r.p50), static_cast<unsigned long long>(r.p99),
                  static_cast<unsigned long long>(r.p999), static_cast<unsigned long long>(r.max), "");
    out << line;
  }
  out << "(simulated latencies in usec; the thread's rows are its 40-CPU VM, docs/simulator.md)\n";
}

// run() runs every policy and the kernel, prints the table and plots to
// `png` unless it is empty. `d` has passed parse_compare().
int run(const sb::compare_options& d, const std::string& png) {
  const bench::stop_signals sig;
  const std::string exe = (bench::self_dir() / "usched_schbench").string();
  if (access(exe.c_str(), X_OK) != 0) {
    std::cerr << program << ": cannot run " << exe << " (" << std::strerror(errno)
              << "); it is built next to this program\n";
    return 1;
  }

  // The machine, as usched sees it: the worker count scales -t.
  unsigned workers = 0;
  std::string topology;
  {
    usched::options ro = usched::options::from_env();
    ro.policy = d.policies.front();
    usched::runtime rt{ro};
    workers = rt.workers();
    const std::string desc = rt.describe();
    const std::size_t at = desc.find("topology: ");
    topology = at == std::string::npos ? "" : desc.substr(at, desc.find('\n', at) - at);
  }

  const sb::cli_options def = sb::compare_defaults();
  const std::vector<std::pair<std::string, std::string>> defaults = {
      {"-m", std::to_string(def.message_threads)},
      {"-t", std::to_string(std::max(1u, workers / 2))},
      {"-c", std::to_string(def.worker_think_us)},
      {"-C", std::to_string(def.message_think_us)},
      {"-s", std::to_string(def.sleep_us)},
      {"-w", std::to_string(def.warmup_s)},
      {"-r", std::to_string(def.runtime_s)}};
  // A default the extra flags set again is left out, so the command line
  // shown (and run) says each flag once; the extras follow as given.
  const auto overridden = [&d](const std::string& flag) {
    return std::any_of(d.extra.begin(), d.extra.end(),
                       [&flag](const std::string& a) { return a.rfind(flag, 0) == 0; });
  };
  std::vector<std::string> common;
  for (const auto& [flag, value] : defaults) {
    if (!overridden(flag)) common.insert(common.end(), {flag, value});
  }
  common.insert(common.end(), d.extra.begin(), d.extra.end());
  // parse_compare() has checked the extras; the defaults are valid.
  const sb::cli_options parsed = sb::parse_cli(common);

  const bench::temp_dir tmp("usched-schbench-compare");
  const fs::path& dir = tmp.path();

  const std::string shown = sb::shell_join(common);
  std::cout << "schbench per policy: usched_schbench " << shown << " [--policy P | --threads]\n";
  if (!topology.empty()) std::cout << topology << ", " << workers << " usched workers\n";
  std::cout << std::flush;

  std::vector<std::string> labels = d.policies;
  labels.emplace_back("threads");
  // A run lasts -r seconds plus start-up and the last think to wind down.
  const double expected_s = static_cast<double>(parsed.runtime_s) + 1.0;
  const progress prog;
  bool interrupted = false;
  std::vector<run_result> results;
  for (std::size_t i = 0; i < labels.size() && !interrupted; ++i) {
    std::vector<std::string> args = common;
    if (labels[i] == "threads") args.emplace_back("--threads");
    else args.insert(args.end(), {"--policy", labels[i]});
    results.push_back(run_one(exe, args, labels[i], dir, i, labels.size(), expected_s, prog, sig,
                              interrupted));
    prog.finished(i, labels.size(), results.back());
  }

  std::cout << "\n";
  print_table(results, std::cout);
  bool failed = false;
  for (const run_result& r : results) {
    if (!r.summary) {
      failed = true;
      std::cout << "\n" << r.label << " failed: " << r.failure << "\n";
    }
  }
  if (interrupted) std::cout << "interrupted: " << results.size() << " of " << labels.size() << " runs done\n";
  if (!interrupted) sim_experiment(d.policies, std::cout);
  const bool plotted = png.empty() || plot(results, png, "schbench wake-up latency: " + shown, dir);
  if (interrupted) return 130;
  return failed || !plotted ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  return bench::guarded_main(program, [&] {
    const sb::compare_options d =
        sb::parse_compare(std::vector<std::string>(argv + std::min(argc, 1), argv + argc));
    if (d.help) {
      std::cout << sb::compare_usage_text(program);
      return bench::exit_ok;
    }
    // The plot is written after every run: find out now whether it can be.
    std::string png = d.plot;
    if (!bench::on_path("gnuplot")) {
      if (d.plot_given) {
        throw sb::usage_error("--plot '" + d.plot +
                              "': gnuplot is not on PATH; install gnuplot, or leave out --plot");
      }
      std::cerr << program << ": gnuplot is not on PATH; the table only, no " << d.plot << "\n";
      png.clear();
    } else {
      sb::check_output_file(d.plot_given ? "--plot" : "--plot (default)", png);
    }
    return run(d, png);
  });
}
