// usched_trace: a recorded trace (the ftrace text USCHED_TRACE and
// `usched_sim --trace` write) summed up, drawn, or converted.
//
//   usched_trace summary FILE
//   usched_trace timeline FILE -o OUT.png [--from US] [--to US] [--title T]
//   usched_trace convert IN OUT
//
// Bad input is one line on stderr naming the value and what is accepted,
// and exit status 2, before anything is written; a failure after that
// (gnuplot's, a file that cannot be written) is one line and exit status 1.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "trace_export.hpp"

namespace {

namespace ud = usched::detail;

constexpr const char* program = "usched_trace";

struct usage : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

const char* usage_text =
    "usage: usched_trace summary FILE\n"
    "       usched_trace timeline FILE -o OUT.png [--from US] [--to US] [--title T]\n"
    "       usched_trace convert IN OUT\n"
    "  FILE, IN       a trace as ftrace text (USCHED_TRACE=path, usched_sim --trace FILE)\n"
    "  summary        perf sched latency's table: per fiber or label, run time, switches,\n"
    "                 wake-to-run delay (average, maximum, when), migrations\n"
    "  timeline       a PNG of the workers' runs and wake-ups (gnuplot); --from/--to: the\n"
    "                 window in microseconds of trace time (default: all of it)\n"
    "  convert        OUT ending in .json: Chrome JSON (ui.perfetto.dev, chrome://tracing);\n"
    "                 any other name: ftrace text\n"
    "  -h, --help     this text\n";

// A time in microseconds, whole or with up to three decimals (ns).
std::int64_t parse_us(const std::string& flag, const std::string& v) {
  const std::string accepted = "; expected microseconds, a number 0 or more with up to 3 decimals (e.g. 1500 or 12.345)";
  const std::size_t dot = v.find('.');
  const std::string whole = v.substr(0, dot);
  const std::string frac = dot == std::string::npos ? "" : v.substr(dot + 1);
  const auto digits = [](const std::string& s) { return s.find_first_not_of("0123456789") == std::string::npos; };
  if (whole.empty() || !digits(whole) || !digits(frac) || frac.size() > 3 || (dot != std::string::npos && frac.empty()) ||
      whole.size() > 12) {
    throw usage(flag + " '" + v + "'" + accepted);
  }
  std::string ns = frac;
  ns.resize(3, '0');
  return std::stoll(whole) * 1000 + std::stoll(ns);
}

// check_output() throws a usage error naming `flag` unless `path` can be
// written; it leaves no file behind that was not there.
void check_output(const std::string& flag, const std::string& path) {
  const bool existed = std::filesystem::exists(path);
  {
    std::ofstream probe(path, std::ios::out | std::ios::app);
    if (!probe) throw usage(flag + " '" + path + "': cannot be written; expected a file name in an existing, writable folder");
  }
  if (!existed) std::filesystem::remove(path);
}

int summary(const std::vector<std::string>& a) {
  if (a.size() != 1) throw usage("summary: expected one FILE, got " + std::to_string(a.size()) + " arguments");
  const ud::trace_data d = ud::read_trace_file(a[0]);
  std::cout << ud::latency_summary(d);
  return 0;
}

int timeline(const std::vector<std::string>& a) {
  std::string file;
  ud::timeline_options o;
  bool have_from = false;
  bool have_to = false;
  std::int64_t from = 0;
  std::int64_t to = 0;
  std::string to_text;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::string& f = a[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= a.size()) throw usage("timeline: " + f + ": missing value");
      return a[++i];
    };
    if (f == "-o") {
      o.png_path = value();
    } else if (f == "--from") {
      from = parse_us("--from", value());
      have_from = true;
    } else if (f == "--to") {
      to_text = value();
      to = parse_us("--to", to_text);
      have_to = true;
    } else if (f == "--title") {
      o.title = value();
    } else if (!f.empty() && f[0] == '-') {
      throw usage("timeline: unknown flag '" + f + "'; accepted: -o OUT.png --from US --to US --title T");
    } else if (file.empty()) {
      file = f;
    } else {
      throw usage("timeline: one FILE only; '" + f + "' is a second");
    }
  }
  if (file.empty()) throw usage("timeline: expected a FILE");
  if (o.png_path.empty()) throw usage("timeline: expected -o OUT.png");
  if (have_from && have_to && to <= from) {
    throw usage("--to '" + to_text + "': the window is empty; expected --to after --from");
  }
  check_output("-o", o.png_path);
  const ud::trace_data d = ud::read_trace_file(file);
  o.from_ns = have_from ? from : (d.records.empty() ? 0 : d.records.front().time);
  o.to_ns = have_to ? to : 0;
  ud::write_timeline_png(d, o);
  std::cout << "timeline: wrote " << o.png_path << "\n";
  return 0;
}

int convert(const std::vector<std::string>& a) {
  if (a.size() != 2) throw usage("convert: expected IN OUT, got " + std::to_string(a.size()) + " arguments");
  check_output("convert: OUT", a[1]);
  const ud::trace_data d = ud::read_trace_file(a[0]);
  ud::write_trace_file(a[1], d);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.empty()) throw usage("expected a command: summary, timeline or convert (-h for help)");
    const std::string& cmd = args[0];
    if (cmd == "-h" || cmd == "--help") {
      std::cout << usage_text;
      return 0;
    }
    const std::vector<std::string> rest(args.begin() + 1, args.end());
    for (const std::string& r : rest) {
      if (r == "-h" || r == "--help") {
        std::cout << usage_text;
        return 0;
      }
    }
    if (cmd == "summary") return summary(rest);
    if (cmd == "timeline") return timeline(rest);
    if (cmd == "convert") return convert(rest);
    throw usage("unknown command '" + cmd + "'; accepted: summary, timeline, convert, -h");
  } catch (const usage& e) {
    std::cerr << program << ": " << e.what() << '\n';
    return 2;
  } catch (const std::exception& e) {
    // A trace that cannot be read or parsed is bad input too; what fails
    // after it was read (gnuplot, writing OUT) is a failure of the run.
    const std::string what = e.what();
    std::cerr << program << ": " << what << '\n';
    return what.find("cannot be read") != std::string::npos || what.find(": line ") != std::string::npos ? 2 : 1;
  }
}
