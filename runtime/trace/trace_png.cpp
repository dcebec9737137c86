// trace_png.cpp: a trace's timeline as a PNG, drawn by gnuplot.
//
// As the benchmark drivers plot (bench/schbench/compare.cpp): the data and
// the script go to a temporary folder, gnuplot runs on the script with its
// output in a log there, a failure is one line with gnuplot's complaint,
// and pngcairo is used where the build has it (the libgd png terminal
// otherwise). gnuplot is started with posix_spawnp; no shell.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "trace_export.hpp"
#include "trace_names.hpp"

extern char** environ;

namespace usched::detail {
namespace {

namespace fs = std::filesystem;
namespace tn = trace_names;

// Fibers the key names: the busiest, by run time in the window.
constexpr std::size_t key_fibers = 8;
// Half a row's height taken by a run's box; the wake-up lines run below it.
constexpr double box_half = 0.3;
constexpr double wake_offset = 0.38;

bool on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::istringstream dirs(path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const fs::path p = fs::path(dir.empty() ? "." : dir) / name;
    if (::access(p.c_str(), X_OK) == 0 && !fs::is_directory(p)) return true;
  }
  return false;
}

// run() runs gnuplot with `args`, stdout and stderr into `log`; its wait
// status, or -1 when it could not be started.
int run(const std::vector<std::string>& args, const std::string& log) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<char*> argv;
  std::vector<std::string> own = args;
  for (std::string& a : own) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int err = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (err != 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return status;
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (const char c : s) {
    if (c == '\'') out += "''";
    else out += c;
  }
  return out + "'";
}

// The last line of gnuplot's log with anything on it: its complaint.
std::string complaint(const std::string& log) {
  std::ifstream in(log);
  std::string last;
  for (std::string l; std::getline(in, l);) {
    if (l.find_first_not_of(" \t\r^") != std::string::npos) last = l;
  }
  return last;
}

// A fiber's colour: a hue from its id by the golden ratio (so that the
// fibers spawned together, with neighbouring ids, are far apart on the
// wheel), a saturation and value from its mixed bits.
unsigned colour_of(std::uint64_t id) {
  std::uint64_t z = id + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  const double golden = 0.6180339887498949;
  const double h = std::fmod(static_cast<double>(id % 1000003) * golden, 1.0) * 6.0;  // 0..6
  const double s = 0.55 + static_cast<double>((z >> 12) % 30) / 100.0;
  const double v = 0.75 + static_cast<double>((z >> 20) % 20) / 100.0;
  const double c = v * s;
  const double x = c * (1 - std::fabs(std::fmod(h, 2.0) - 1));
  double r = 0, g = 0, b = 0;
  switch (static_cast<int>(h)) {
    case 0: r = c; g = x; break;
    case 1: r = x; g = c; break;
    case 2: g = c; b = x; break;
    case 3: g = x; b = c; break;
    case 4: r = x; b = c; break;
    default: r = c; b = x; break;
  }
  const double m = v - c;
  const auto byte = [&](double f) { return static_cast<unsigned>(std::lround((f + m) * 255)); };
  return byte(r) << 16 | byte(g) << 8 | byte(b);
}

// temp_folder is a fresh folder under $TMPDIR (else /tmp), removed with
// what is in it when the object goes.
class temp_folder {
 public:
  temp_folder() {
    const char* t = std::getenv("TMPDIR");
    std::string pattern = std::string(t != nullptr && *t != '\0' ? t : "/tmp") + "/usched-timeline-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("cannot make a temporary folder (" + std::string(std::strerror(errno)) + ")");
    }
    path_ = pattern;
  }
  ~temp_folder() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  temp_folder(const temp_folder&) = delete;
  temp_folder& operator=(const temp_folder&) = delete;
  const fs::path& path() const noexcept { return path_; }

 private:
  fs::path path_;
};

}  // namespace

void write_timeline_png(const trace_data& d, const timeline_options& o) {
  const std::string head = "timeline '" + o.png_path + "': ";
  const std::int64_t from = o.from_ns;
  const std::int64_t to = o.to_ns != 0 ? o.to_ns : (d.records.empty() ? 0 : d.records.back().time);
  if (to <= from) {
    throw std::runtime_error(head + "the window " + std::to_string(from) + ".." + std::to_string(to) +
                             " ns is empty; expected from < to, within the trace's times");
  }
  if (!on_path("gnuplot")) throw std::runtime_error(head + "gnuplot is not on PATH; install gnuplot");
  // gnuplot says little when it cannot write its output: find out first,
  // and leave no empty file behind when it fails.
  const bool existed = fs::exists(o.png_path);
  {
    std::ofstream probe(o.png_path, std::ios::out | std::ios::app);
    if (!probe) throw std::runtime_error(head + "cannot be written");
  }
  struct remove_unless_done {
    const std::string& path;
    bool keep;
    ~remove_unless_done() {
      std::error_code ec;
      if (!keep) fs::remove(path, ec);
    }
  } created{o.png_path, existed};

  const auto labels = tn::labels(d);
  std::vector<tn::run_span> runs;
  std::vector<tn::wake_span> wakes;
  tn::spans(d, runs, wakes);
  const std::size_t nr = std::max<std::size_t>(tn::cpus_of(d), 1);

  // The axis unit: microseconds for a window under 2 ms, else milliseconds.
  const bool us = to - from < 2000000;
  const double unit = us ? 1e3 : 1e6;
  // A runtime's clock counts from some moment long before the trace (the
  // steady clock's epoch): its axis counts from the trace's first event,
  // named in the label. The simulator's virtual time starts at 0 as it is.
  const std::int64_t origin = d.virtual_time || d.records.empty() ? 0 : d.records.front().time;
  const auto x = [&](std::int64_t t) { return static_cast<double>(t - origin) / unit; };
  std::string xlabel = us ? "time (us)" : "time (ms)";
  if (origin != 0) {
    char since[96];
    std::snprintf(since, sizeof since, "time since the trace's first event, at %.6f s (%s)",
                  static_cast<double>(origin) / 1e9, us ? "us" : "ms");
    xlabel = since;
  }

  temp_folder dir;
  const std::string runs_dat = (dir.path() / "runs.dat").string();
  const std::string wakes_dat = (dir.path() / "wakes.dat").string();
  std::map<std::uint64_t, std::int64_t> busy;
  {
    std::ofstream f(runs_dat);
    f.precision(12);
    for (const tn::run_span& s : runs) {
      const std::int64_t a = std::max(s.start, from);
      const std::int64_t b = std::min(s.end, to);
      if (b < a || (b == a && s.start != s.end)) continue;
      busy[s.fiber] += b - a;
      // x center, row, x half-width, y half-height, colour
      f << (x(a) + x(b)) / 2 << ' ' << s.cpu << ' ' << (x(b) - x(a)) / 2 << ' ' << box_half << ' '
        << colour_of(s.fiber) << '\n';
    }
    if (busy.empty()) f << "NaN NaN NaN NaN 0\n";  // gnuplot refuses an empty file
  }
  // A wait that is long for the window (a twentieth of it or more) is
  // named on the picture with its length: the stranded wake-up a reader
  // came to see.
  std::vector<std::string> long_waits;
  {
    std::ofstream f(wakes_dat);
    f.precision(12);
    std::size_t n = 0;
    for (const tn::wake_span& w : wakes) {
      if (w.run < from || w.wake > to) continue;
      const std::int64_t a = std::max(w.wake, from);
      const std::int64_t b = std::min(w.run, to);
      if ((w.run - w.wake) * 20 >= to - from) {
        char waited[32];
        std::snprintf(waited, sizeof waited, "%.3f ms", static_cast<double>(w.run - w.wake) / 1e6);
        char text[200];
        std::snprintf(text, sizeof text, "set label %s at %.12g,%.12g center front tc rgb '#b00000'\n",
                      quote(tn::fiber_name(w.fiber, labels) + " waits " + waited + " to run").c_str(),
                      (x(a) + x(b)) / 2, w.cpu + wake_offset + 0.13);
        long_waits.emplace_back(text);
      }
      // start x, row, length, colour; and whether the wake-up is in the window
      f << x(a) << ' ' << w.cpu + wake_offset << ' ' << x(b) - x(a) << ' ' << colour_of(w.fiber) << ' '
        << (w.wake >= from ? 1 : 0) << '\n';
      ++n;
    }
    if (n == 0) f << "NaN NaN NaN 0 0\n";
  }

  std::vector<std::pair<std::int64_t, std::uint64_t>> top;
  for (const auto& [fiber, t] : busy) top.emplace_back(t, fiber);
  std::sort(top.begin(), top.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  if (top.size() > key_fibers) top.resize(key_fibers);

  std::string terminal = "png";
  if (run({"gnuplot", "-e", "set terminal pngcairo"}, (dir.path() / "probe.log").string()) == 0) terminal = "pngcairo";
  const int height = static_cast<int>(std::min<std::size_t>(160 + 56 * nr, 2000));
  const std::string title = !o.title.empty() ? o.title : "usched trace (policy " + (d.policy.empty() ? "?" : d.policy) + ")";

  const std::string script = (dir.path() / "timeline.gp").string();
  {
    std::ofstream g(script);
    g.precision(12);
    g << "set terminal " << terminal << " size 1400," << height << " noenhanced font ',10'\n"
      << "set output " << quote(o.png_path) << "\n"
      << "set title " << quote(title) << "\n"
      << "set xlabel " << quote(xlabel) << "\n"
      << "set xrange [" << x(from) << ":" << x(to) << "]\n"
      << "set yrange [" << static_cast<double>(nr) - 0.25 << ":-0.6]\n"
      << "set ytics (";
    for (std::size_t c = 0; c < nr; ++c) g << (c ? ", " : "") << quote("worker " + std::to_string(c)) << ' ' << c;
    g << ")\n"
      << "set grid xtics\n"
      << "set key outside right top title 'busiest fibers'\n"
      << "set style fill solid 0.9 border rgb '#404040'\n"
      << "set lmargin 12\n";
    for (const std::string& l : long_waits) g << l;
    g
      << "plot " << quote(runs_dat) << " using 1:2:3:4:5 with boxxyerror fc rgb variable notitle, \\\n"
      << "     " << quote(wakes_dat) << " using 1:2:3:(0):4 with vectors nohead lw 2 lc rgb variable notitle, \\\n"
      << "     " << quote(wakes_dat) << " using ($5 > 0 ? $1 : NaN):2:4 with points pt 9 ps 0.8 lc rgb variable "
      << "title 'wake-up (line: waiting to run)'";
    for (const auto& [t, fiber] : top) {
      char rgb[16];
      std::snprintf(rgb, sizeof rgb, "#%06x", colour_of(fiber));
      g << ", \\\n     NaN with boxes fc rgb '" << rgb << "' title " << quote(tn::fiber_name(fiber, labels));
    }
    g << "\n";
  }
  const std::string glog = (dir.path() / "gnuplot.log").string();
  const int st = run({"gnuplot", script}, glog);
  if (st == -1) throw std::runtime_error(head + "gnuplot could not be started");
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    std::string said = complaint(glog);
    const std::string at = "\"" + script + "\" ";
    if (said.rfind(at, 0) == 0) said = said.substr(at.size());
    const std::string how = WIFEXITED(st) ? "exit status " + std::to_string(WEXITSTATUS(st))
                                          : "killed by signal " + std::to_string(WTERMSIG(st));
    throw std::runtime_error(head + "gnuplot failed (" + how + ")" + (said.empty() ? "" : ": " + said));
  }
  created.keep = true;
}

void write_timeline_png(const trace_data& d, std::int64_t from_ns, std::int64_t to_ns, const std::string& png_path,
                        const std::string& title) {
  write_timeline_png(d, timeline_options{from_ns, to_ns, png_path, title});
}

}  // namespace usched::detail
