// cli.cpp: parsing the schbench clone's flags.
#include "cli.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>

#include <fcntl.h>
#include <unistd.h>

#include <usched/options.hpp>

namespace usched::schbench {

namespace {

// A flag that takes a whole number in [lo, hi], and where it goes.
struct numeric_flag {
  std::string_view name;  // "-t"
  std::string_view what;  // how the expectation reads in a message
  std::uint64_t lo;
  std::uint64_t hi;
  std::string_view note;  // meaning of a special value, or empty
};

// The table --help and the error messages are written from.
constexpr std::array<numeric_flag, 9> numeric_flags = {{
    {"-m", "message threads", 1, max_message_threads, ""},
    {"-t", "workers per message thread", 1, max_worker_threads, ""},
    {"-r", "seconds to run", 0, max_sec_value, "0 = until SIGINT/SIGTERM"},
    {"-s", "message-thread sleep in microseconds", min_sleep_us, max_usec_value,
     "a random jitter below s/4 is added"},
    {"-c", "worker think time in microseconds", 0, max_usec_value, ""},
    {"-C", "message-thread think time in microseconds", 0, max_usec_value, ""},
    {"-i", "seconds between reports", 0, max_sec_value, "0 = final report only"},
    {"-z", "seconds between zeroing the statistics", 0, max_sec_value, "0 = never"},
    {"-w", "warm-up seconds after which the statistics are zeroed once", 0, max_sec_value,
     "0 = none"},
}};

std::string expectation(const numeric_flag& f) {
  std::string s = "expected " + std::string(f.what) + ", " + std::to_string(f.lo) + ".." +
                  std::to_string(f.hi);
  if (!f.note.empty()) s += " (" + std::string(f.note) + ")";
  return s;
}

const numeric_flag* find_numeric(std::string_view name) {
  for (const numeric_flag& f : numeric_flags) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::string accepted_flags() {
  return "accepted: " + workload_flags_accepted() + " --policy NAME --threads --json FILE -h";
}

// parse_number() reads `text` as the value of numeric flag `f`: digits with
// an optional leading '-' (so that "-5" is reported as out of range rather
// than as not a number), inside [lo, hi].
std::uint64_t parse_number(const numeric_flag& f, const std::string& text) {
  const std::string_view digits =
      !text.empty() && text.front() == '-' ? std::string_view(text).substr(1) : std::string_view(text);
  if (digits.empty() ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    throw usage_error(std::string(f.name) + ": '" + text + "' is not a whole number; " +
                      expectation(f));
  }
  // Accumulate with a saturating guard: anything past hi is out of range
  // however long it is.
  std::uint64_t v = 0;
  bool overflow = false;
  for (char c : digits) {
    const auto d = static_cast<std::uint64_t>(c - '0');
    if (v > (std::numeric_limits<std::uint64_t>::max() - d) / 10) {
      overflow = true;
      break;
    }
    v = v * 10 + d;
  }
  const bool negative = text.front() == '-' && v != 0;
  if (overflow || negative || v < f.lo || v > f.hi) {
    throw usage_error(std::string(f.name) + ": " + text + " is out of range; " + expectation(f));
  }
  return v;
}

void assign(cli_options& o, std::string_view name, std::uint64_t v) {
  if (name == "-m") o.message_threads = static_cast<unsigned>(v);
  else if (name == "-t") o.worker_threads = static_cast<unsigned>(v);
  else if (name == "-r") o.runtime_s = v;
  else if (name == "-s") o.sleep_us = v;
  else if (name == "-c") o.worker_think_us = v;
  else if (name == "-C") o.message_think_us = v;
  else if (name == "-i") o.interval_s = v;
  else if (name == "-z") o.zero_s = v;
  else if (name == "-w") o.warmup_s = v;
}

// usage_line() appends one --help line: the flag padded to a column, what
// it does, and its default when it has one.
void usage_line(std::string& s, std::string_view flag, std::string_view text, std::string_view def) {
  std::string l = "  " + std::string(flag);
  l.resize(std::max<std::size_t>(l.size() + 1, 16), ' ');
  s += l + std::string(text) + (def.empty() ? "" : " (default: " + std::string(def) + ")") + "\n";
}

std::string_view basename_of(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

cli_options parse_cli(std::span<const std::string> args, std::string_view argv0) {
  cli_options o;
  std::vector<std::string> all{std::string(basename_of(argv0))};
  all.insert(all.end(), args.begin(), args.end());
  o.command_line = shell_join(all);

  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    // The value of a flag that takes one: attached ("-t20", "--json=f") or
    // the next argument, taken whatever it looks like (getopt's rule).
    const auto value_of = [&](std::string_view name, std::optional<std::string> attached,
                              const std::string& expected) -> std::string {
      if (attached) return *attached;
      if (i + 1 >= args.size()) throw usage_error(std::string(name) + ": missing value; " + expected);
      return args[++i];
    };

    if (a == "-h" || a == "--help") {
      o.help = true;
      return o;
    }
    if (a == "--threads") {
      o.threads = true;
      continue;
    }
    if (a.rfind("--threads=", 0) == 0) throw usage_error("--threads: takes no value");
    if (a == "--policy" || a.rfind("--policy=", 0) == 0) {
      const std::string expected = "expected a policy name: one of " + policy_list();
      std::optional<std::string> attached;
      if (a.size() > 8) attached = a.substr(9);
      o.policy = value_of("--policy", attached, expected);
      if (o.policy.empty()) throw usage_error("--policy: missing value; " + expected);
      // Checked here, not left to the runtime: its error names
      // USCHED_POLICY, which this user did not set.
      const std::vector<std::string> names = usched::policy_names();
      if (std::find(names.begin(), names.end(), o.policy) == names.end()) {
        throw usage_error("--policy '" + o.policy + "' is not a registered policy; choose one of: " +
                          policy_list());
      }
      continue;
    }
    if (a == "--json" || a.rfind("--json=", 0) == 0) {
      const std::string expected = "expected a file name";
      std::optional<std::string> attached;
      if (a.size() > 6) attached = a.substr(7);
      o.json_file = value_of("--json", attached, expected);
      if (o.json_file.empty()) throw usage_error("--json: missing value; " + expected);
      continue;
    }
    if (a.size() >= 2 && a[0] == '-' && a[1] != '-') {
      const numeric_flag* f = find_numeric(std::string_view(a).substr(0, 2));
      if (f) {
        std::optional<std::string> attached;
        if (a.size() > 2) attached = a.substr(2);
        assign(o, f->name, parse_number(*f, value_of(f->name, attached, expectation(*f))));
        continue;
      }
    }
    if (!a.empty() && a[0] == '-' && a != "-") {
      throw usage_error("unknown flag '" + a + "'; " + accepted_flags());
    }
    throw usage_error("unexpected argument '" + a + "'; every setting is a flag (see --help)");
  }

  if (o.threads && !o.policy.empty()) {
    throw usage_error("--policy: not used with --threads (the kernel schedules the threads); "
                      "give one or the other");
  }
  return o;
}

cli_options parse_cli(int argc, const char* const* argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return parse_cli(args, argc > 0 ? argv[0] : "usched_schbench");
}

report_schedule::actions report_schedule::at(std::uint64_t tick) noexcept {
  actions a;
  if (!warmup_done_ && o_.warmup_s && tick >= o_.warmup_s) {
    warmup_done_ = true;
    a.warmup = true;
    a.zero = true;
    zero_time_ = tick;
  } else if (o_.interval_s && tick - last_calc_ >= o_.interval_s) {
    a.print = true;
    last_calc_ = tick;
  }
  if (o_.zero_s && tick - zero_time_ >= o_.zero_s) {
    a.zero = true;
    zero_time_ = tick;
  }
  return a;
}

std::string policy_list() {
  std::string s;
  for (const std::string& n : usched::policy_names()) {
    if (!s.empty()) s += ", ";
    s += n;
  }
  return s;
}

bool is_workload_flag(std::string_view name) noexcept { return find_numeric(name) != nullptr; }

std::string workload_flags_accepted() {
  std::string s;
  for (const numeric_flag& f : numeric_flags) s += (s.empty() ? "" : " ") + std::string(f.name) + " N";
  return s;
}

std::string workload_usage(const cli_options& d, std::string_view t_default, bool until_signal) {
  std::string s;
  usage_line(s, "-m N", "message threads, 1.." + std::to_string(max_message_threads),
             std::to_string(d.message_threads));
  usage_line(s, "-t N", "workers per message thread, 1.." + std::to_string(max_worker_threads),
             t_default);
  usage_line(s, "-r S",
             until_signal ? "seconds to run; 0 = until SIGINT/SIGTERM, then the final report"
                          : "seconds to run, 1.." + std::to_string(max_sec_value),
             std::to_string(d.runtime_s));
  usage_line(s, "-s US",
             "message-thread sleep per round, microseconds, >= " + std::to_string(min_sleep_us) +
                 "; a random jitter below s/4 is added",
             std::to_string(d.sleep_us));
  usage_line(s, "-c US", "worker think time per round, microseconds (spins on the wall clock)",
             std::to_string(d.worker_think_us));
  usage_line(s, "-C US", "message-thread think time per round, microseconds",
             std::to_string(d.message_think_us));
  usage_line(s, "-i S", "print cumulative percentiles every S seconds; 0 = final report only",
             std::to_string(d.interval_s));
  usage_line(s, "-z S", "zero the statistics every S seconds; 0 = never", std::to_string(d.zero_s));
  usage_line(s, "-w S", "zero the statistics once after S seconds of warm-up; 0 = none",
             std::to_string(d.warmup_s));
  return s;
}

std::string usage_text(std::string_view program) {
  std::string s = "usage: " + std::string(program) +
                  " [-m N] [-t N] [-r S] [-s US] [-c US] [-C US] [-i S] [-z S] [-w S]\n"
                  "       [--policy NAME | --threads] [--json FILE]\n"
                  "Wake-up latency (schbench): message threads wake workers; each worker\n"
                  "times how long after the wake-up it runs again.\n";
  s += workload_usage(cli_options{}, "usched workers (with --threads: CPUs) / -m, at least 1", true);
  usage_line(s, "--policy NAME", "usched policy (overrides USCHED_POLICY): " + policy_list(),
             "USCHED_POLICY or cfs");
  usage_line(s, "--threads",
             "run the same workload on plain pthreads and futexes (the kernel's scheduler)", "off");
  usage_line(s, "--json FILE", "also write the final report as one JSON object", "none");
  usage_line(s, "-h, --help", "print this help", "");
  s += "Reports go to stdout in schbench's format; the runtime reads USCHED_* from the environment.\n";
  return s;
}

void check_output_file(std::string_view flag, const std::string& path) {
  namespace fs = std::filesystem;
  const std::string head = std::string(flag) + " '" + path + "': ";
  const std::string accepted = "; expected a file name in an existing, writable folder";
  const fs::path p(path);
  const fs::path folder = p.has_parent_path() ? p.parent_path() : fs::path(".");
  std::error_code ec;
  const fs::file_status in = fs::status(folder, ec);
  if (in.type() == fs::file_type::not_found) {
    throw usage_error(head + "folder '" + folder.string() + "' does not exist" + accepted);
  }
  if (!ec && !fs::is_directory(in)) {
    throw usage_error(head + "'" + folder.string() + "' is not a folder" + accepted);
  }
  if (fs::is_directory(fs::status(p, ec))) throw usage_error(head + "is a folder" + accepted);
  const bool existed = fs::exists(fs::symlink_status(p, ec));
  // Opening is the only complete test: permissions, read-only mounts, ACLs.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) {
    throw usage_error(head + "cannot be written (" + std::strerror(errno) + ")" + accepted);
  }
  ::close(fd);
  if (!existed) ::unlink(path.c_str());
}

unsigned resolve_worker_threads(const cli_options& o, unsigned cpus) noexcept {
  if (o.worker_threads > 0) return o.worker_threads;
  const unsigned per = o.message_threads > 0 ? cpus / o.message_threads : cpus;
  return std::max(1u, per);
}

}  // namespace usched::schbench
