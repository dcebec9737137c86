// report.cpp: the tables and the plot of usched_netbench (report.hpp).
#include "report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include <sys/wait.h>

#include "common/process.hpp"

namespace bench::netbench {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// grouped() is `x` rounded, with thousands separated: 107,512.
std::string grouped(double x) {
  std::string digits = std::to_string(std::llround(x));
  const bool negative = !digits.empty() && digits[0] == '-';
  if (negative) digits.erase(0, 1);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return negative ? "-" + out : out;
}

std::string fixed(double x, int decimals) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, x);
  return buf;
}

// The index of the first server of `kind`, if any.
std::optional<std::size_t> find_kind(const std::vector<server>& servers, const std::string& kind) {
  for (std::size_t i = 0; i < servers.size(); ++i) {
    if (servers[i].kind == kind) return i;
  }
  return std::nullopt;
}

// ratio_cell() is the median over rounds of row's requests/s over peer's,
// both measured in that round, or "-".
std::string ratio_cell(const std::vector<run_outcome>& row, const std::vector<run_outcome>* peer) {
  if (!peer) return "-";
  std::vector<double> ratios;
  for (std::size_t r = 0; r < row.size() && r < peer->size(); ++r) {
    const auto& a = row[r].result;
    const auto& b = (*peer)[r].result;
    if (a && b && b->requests_per_s() > 0) ratios.push_back(a->requests_per_s() / b->requests_per_s());
  }
  return ratios.empty() ? "-" : fixed(median(ratios), 2);
}

// medians of one row's runs that have a result.
struct row_stats {
  std::size_t measured = 0;
  double rps_median = 0, rps_min = 0, rps_max = 0;
  double p50 = 0, p99 = 0, p999 = 0;
  double bytes_per_response = 0;
};

row_stats stats_of(const std::vector<run_outcome>& row) {
  std::vector<double> rps, p50, p99, p999, bytes;
  for (const run_outcome& o : row) {
    if (!o.result) continue;
    rps.push_back(o.result->requests_per_s());
    p50.push_back(o.result->p50_us);
    p99.push_back(o.result->p99_us);
    p999.push_back(o.result->p999_us);
    bytes.push_back(o.result->bytes_per_response());
  }
  row_stats s;
  s.measured = rps.size();
  if (rps.empty()) return s;
  s.rps_median = median(rps);
  s.rps_min = *std::min_element(rps.begin(), rps.end());
  s.rps_max = *std::max_element(rps.begin(), rps.end());
  s.p50 = median(p50);
  s.p99 = median(p99);
  s.p999 = median(p999);
  s.bytes_per_response = median(bytes);
  return s;
}

std::string gnuplot_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// The last line gnuplot wrote with anything on it: its complaint.
std::string last_said(const std::string& text) {
  std::istringstream in(text);
  std::string last;
  for (std::string l; std::getline(in, l);) {
    if (l.find_first_not_of(" \t\r") != std::string::npos) last = l;
  }
  return last;
}

}  // namespace

bool print_table(std::ostream& out, const std::vector<server>& servers, const count_runs& c) {
  const auto go = find_kind(servers, "go");
  const auto floor = find_kind(servers, "floor");
  const std::vector<run_outcome>* go_runs = go ? &c.runs[*go] : nullptr;
  const std::vector<run_outcome>* floor_runs = floor ? &c.runs[*floor] : nullptr;

  std::vector<std::string> notes;
  bool any_errors = false;
  out << "\n### " << c.connections << (c.connections == 1 ? " connection" : " connections") << "\n\n"
      << "| server | requests/s median [min..max] | vs Go | vs floor | p50 us | p99 us | p99.9 us |\n"
      << "|---|---:|---:|---:|---:|---:|---:|\n";
  for (std::size_t i = 0; i < servers.size(); ++i) {
    const std::vector<run_outcome>& row = c.runs[i];
    bool marked = false;
    for (std::size_t r = 0; r < row.size(); ++r) {
      for (const std::string& e : row[r].errors) {
        notes.push_back(servers[i].label + ", round " + std::to_string(r + 1) + ": " + e);
        marked = true;
      }
      if (row[r].result && row[r].result->connect_errors) {
        notes.push_back(servers[i].label + ", round " + std::to_string(r + 1) + ": " +
                        std::to_string(row[r].result->connect_errors) + " connect errors (not counted as errors)");
      }
    }
    any_errors = any_errors || marked;
    const std::string label = servers[i].label + (marked ? " (!)" : "");
    const row_stats s = stats_of(row);
    if (s.measured == 0) {
      // No run at all: a stop signal came before this row's turn.
      out << "| " << label << " | " << (row.empty() ? "not run" : "failed") << " | - | - | - | - | - |\n";
      continue;
    }
    if (std::abs(s.bytes_per_response - reply_bytes) >= 1) {
      notes.push_back(servers[i].label + ": " + fixed(s.bytes_per_response, 1) + " bytes per response (the floor's reply is " +
                      fixed(reply_bytes, 0) + ")");
    }
    out << "| " << label << " | " << grouped(s.rps_median) << " [" << grouped(s.rps_min) << ".."
        << grouped(s.rps_max) << "] | " << ratio_cell(row, go_runs) << " | " << ratio_cell(row, floor_runs)
        << " | " << grouped(s.p50) << " | " << grouped(s.p99) << " | " << grouped(s.p999) << " |\n";
  }
  if (!notes.empty()) {
    out << "\n";
    for (const std::string& n : notes) out << "- " << n << "\n";
  }
  return any_errors;
}

bool plot(const std::vector<server>& servers, const count_runs& c, const std::string& png,
          const std::string& title, const std::filesystem::path& dir) {
  const std::string data = (dir / "latency.dat").string();
  std::ofstream d(data);
  std::size_t rows = 0;
  double lowest = 0;
  for (std::size_t i = 0; i < servers.size(); ++i) {
    const row_stats s = stats_of(c.runs[i]);
    if (s.measured == 0) continue;
    lowest = rows == 0 ? s.p50 : std::min(lowest, s.p50);
    // Log scale: a percentile of 0 us (never, from wrk) would not draw.
    d << '"' << servers[i].label << "\" " << std::max(1.0, s.p50) << ' ' << std::max(1.0, s.p99) << ' '
      << std::max(1.0, s.p999) << '\n';
    ++rows;
  }
  d.close();
  if (rows == 0) {
    std::cerr << "usched_netbench: no measured row to plot; no " << png << " written\n";
    return true;
  }

  // Debian's gnuplot-nox has both pngcairo and the libgd png terminal;
  // prefer cairo (antialiased) and fall back when a build lacks it.
  std::string terminal = "png size 1200,650";
  {
    child_process probe("gnuplot", {"-e", "set terminal pngcairo"}, (dir / "probe.log").string(), true);
    const int st = probe.wait();
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) terminal = "pngcairo size 1200,650";
  }
  // Bars on a log scale rise from the axis's bottom: put it a decade
  // below the lowest p50's, so the shortest bar is a decade tall rather
  // than a sliver (gnuplot would start at that p50's own decade).
  const double bottom = std::pow(10.0, std::floor(std::log10(std::max(1.0, lowest))) - 1);
  const std::string script = (dir / "latency.gp").string();
  std::ofstream g(script);
  g << "set terminal " << terminal << " noenhanced\n"
    << "set output " << gnuplot_quote(png) << "\n"
    << "set title " << gnuplot_quote(title) << "\n"
    << "set ylabel 'latency (us), log scale'\n"
    << "set logscale y\n"
    << "set yrange [" << bottom << ":*]\n"
    << "set grid ytics\n"
    << "set key outside right top\n"
    << "set style data histogram\n"
    << "set style histogram clustered gap 1\n"
    << "set style fill solid 0.8 border -1\n"
    << "set xtics rotate by -30 scale 0\n"
    << "set bmargin 8\n"
    << "plot " << gnuplot_quote(data) << " using 2:xtic(1) title 'p50', '' using 3 title 'p99', "
    << "'' using 4 title 'p99.9'\n";
  g.close();

  const std::string log = (dir / "gnuplot.log").string();
  child_process gp("gnuplot", {script}, log, true);
  const int st = gp.wait();
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
    std::cout << "plot: wrote " << png << "\n";
    return true;
  }
  const std::string why = last_said(read_text(log));
  std::cerr << "usched_netbench: --plot '" << png << "': gnuplot failed (" << describe_status(st) << ")"
            << (why.empty() ? "" : ": " + why) << "\n";
  return false;
}

}  // namespace bench::netbench
