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

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <usched/usched.hpp>

#include "cli.hpp"
#include "schbench_model.hpp"
#include "simulator.hpp"
#include "compare_cli.hpp"
#include "histogram.hpp"
#include "stop_signals.hpp"

extern char** environ;

namespace {

namespace fs = std::filesystem;
namespace sb = usched::schbench;
using steady = std::chrono::steady_clock;

constexpr const char* program = "usched_schbench_compare";

// How often the progress line is redrawn and the child polled.
constexpr std::chrono::milliseconds poll_period{250};
// How much of a failed run's log is shown.
constexpr std::size_t log_tail_chars = 2000;

// ---- processes ----------------------------------------------------------------

std::string self_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("cannot read /proc/self/exe: " + ec.message());
  return exe.parent_path().string();
}

bool on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (!path) return false;
  std::istringstream in(path);
  for (std::string dir; std::getline(in, dir, ':');) {
    if (dir.empty()) dir = ".";
    if (access((dir + "/" + name).c_str(), X_OK) == 0) return true;
  }
  return false;
}

// child is one spawned process with stdout and stderr sent to a log file and
// SIGINT/SIGTERM unblocked (the driver blocks them for itself).
class child {
 public:
  child(const std::string& exe, const std::vector<std::string>& args, const std::string& log,
        bool search_path) {
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(exe.c_str()));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    const int rc = search_path ? posix_spawnp(&pid_, exe.c_str(), &fa, &attr, argv.data(), environ)
                               : posix_spawn(&pid_, exe.c_str(), &fa, &attr, argv.data(), environ);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) throw std::runtime_error("cannot start " + exe + ": " + std::strerror(rc));
  }
  child(const child&) = delete;
  child& operator=(const child&) = delete;
  ~child() {
    if (!status_) {
      kill(pid_, SIGKILL);
      int st = 0;
      waitpid(pid_, &st, 0);
    }
  }

  // poll() reaps the child if it has exited; its wait status, or nothing.
  std::optional<int> poll() {
    if (status_) return status_;
    int st = 0;
    const pid_t r = waitpid(pid_, &st, WNOHANG);
    if (r == pid_) status_ = st;
    return status_;
  }

  void signal(int sig) const { kill(pid_, sig); }

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
};

std::string describe_status(int st) {
  if (WIFEXITED(st)) return "exit status " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return std::string("killed by ") + strsignal(WTERMSIG(st));
  return "ended oddly";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

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
                   const sb::stop_signals& sig, bool& interrupted) {
  run_result r;
  r.label = label;
  const std::string json = (dir / ("run" + std::to_string(index) + ".json")).string();
  const std::string log = (dir / ("run" + std::to_string(index) + ".log")).string();
  std::vector<std::string> full = args;
  full.insert(full.end(), {"--json", json});

  const auto start = steady::now();
  std::optional<int> status;
  {
    child c(exe, full, log, false);
    while (!(status = c.poll())) {
      const double run_s = std::chrono::duration<double>(steady::now() - start).count();
      prog.update(index, count, label, run_s, expected_s);
      if (sig.wait_for(poll_period) != 0 && !interrupted) {
        interrupted = true;
        c.signal(SIGINT);  // the clone stops and prints its final report
      }
    }
  }
  r.seconds = std::chrono::duration<double>(steady::now() - start).count();
  if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    std::string tail = read_file(log);
    if (tail.size() > log_tail_chars) tail = "..." + tail.substr(tail.size() - log_tail_chars);
    r.failure = describe_status(*status) + "; its output:\n" + tail;
    return r;
  }
  try {
    r.summary = sb::parse_run_json(read_file(json));
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

// plot() writes the PNG with gnuplot, which main() has found on PATH. On
// success it says so on stdout; a failure is one line on stderr and a false
// return. No successful run means nothing to plot, which is not a failure of
// its own (the failed runs are reported already).
bool plot(const std::vector<run_result>& results, const std::string& png,
          const std::string& title, const fs::path& dir) {
  const std::string data = (dir / "curves.dat").string();
  std::ofstream d(data);
  std::vector<std::string> titles;
  for (const run_result& r : results) {
    if (!r.summary) continue;
    d << "# " << r.label << "\n";
    for (const sb::percentile_row& row : r.summary->curve) {
      if (row.value == 0) continue;  // log scale
      d << nines(row.percentile) << ' ' << row.value << '\n';
    }
    d << "\n\n";
    titles.push_back(r.label == "threads" ? "threads (kernel)" : r.label);
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
    child probe("gnuplot", {"-e", "set terminal pngcairo"}, probe_log, true);
    std::optional<int> st;
    while (!(st = probe.poll())) usleep(10000);
    if (WIFEXITED(*st) && WEXITSTATUS(*st) == 0) terminal = "pngcairo size 1200,650";
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
    g << gnuplot_quote(data) << " index " << i << " using 1:2 with linespoints title "
      << gnuplot_quote(titles[i]);
  }
  g << "\n";
  g.close();

  const std::string glog = (dir / "gnuplot.log").string();
  child gp("gnuplot", {script}, glog, true);
  std::optional<int> st;
  while (!(st = gp.poll())) usleep(10000);
  if (WIFEXITED(*st) && WEXITSTATUS(*st) == 0) {
    std::cout << "plot: wrote " << png << "\n";
    return true;
  }
  const std::string said = gnuplot_error(read_file(glog), script);
  std::cerr << program << ": --plot '" << png << "': gnuplot failed (" << describe_status(*st)
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
                                      {"v5.9", 147, 12240, 13104, 13172}};

// sim_experiment() runs seeds/000's command line in the simulator on the
// thread's topology, once per policy, and prints one table with the
// thread's rows under it. Deterministic (seed 1): the same numbers on every
// machine.
void sim_experiment(const std::vector<std::string>& policies, std::ostream& out) {
  std::vector<std::string> args;
  std::istringstream in(sb::compare_sim_args);
  for (std::string a; in >> a;) args.push_back(a);
  args.insert(args.end(), {"-i", "0"});
  const sb::cli_options o = sb::parse_cli(args, "usched_sim -- schbench");
  out << "\nseeds/000 in the simulator: usched_sim --topology '" << sb::compare_sim_topology
      << "' --policy P --seed 1 -- schbench " << sb::compare_sim_args << "\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-20s %9s %9s %9s %9s %8s\n", "policy", "p50", "p99", "p99.9", "max", "samples");
  out << line;
  for (const std::string& policy : policies) {
    usched::sim::sim_config cfg;
    cfg.topology = sb::compare_sim_topology;
    cfg.policy = policy;
    cfg.seed = 1;
    cfg.options = usched::sim::options_from_env();
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
  const sb::stop_signals sig;
  const std::string exe = self_dir() + "/usched_schbench";
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

  std::error_code ec;
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/usched-schbench-compare-XXXXXX";
  if (!mkdtemp(templ.data())) {
    throw std::runtime_error("cannot create a temporary folder " + templ + ": " + std::strerror(errno));
  }
  const fs::path dir = templ;
  struct remove_dir {
    fs::path p;
    ~remove_dir() {
      std::error_code e;
      fs::remove_all(p, e);
    }
  } cleanup{dir};

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
  try {
    const sb::compare_options d =
        sb::parse_compare(std::vector<std::string>(argv + std::min(argc, 1), argv + argc));
    if (d.help) {
      std::cout << sb::compare_usage_text(program);
      return 0;
    }
    // The plot is written after every run: find out now whether it can be.
    std::string png = d.plot;
    if (!on_path("gnuplot")) {
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
  } catch (const sb::usage_error& e) {
    std::cerr << program << ": " << e.what() << '\n';
    return 2;
  } catch (const usched::config_error& e) {
    std::cerr << program << ": " << e.what() << '\n';
    return 2;
  } catch (const std::exception& e) {
    std::cerr << program << ": " << e.what() << '\n';
    return 1;
  }
}
