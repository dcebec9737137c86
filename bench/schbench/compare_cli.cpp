// compare_cli.cpp: parsing usched_schbench_compare's flags.
#include "compare_cli.hpp"

#include <algorithm>
#include <optional>

#include <usched/options.hpp>

namespace usched::schbench {

namespace {

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!s.empty()) out.push_back(cur);
  return out;
}

std::string accepted_flags() {
  return "accepted: --policies a,b,c --plot FILE " + workload_flags_accepted() + " -h";
}

}  // namespace

cli_options compare_defaults() {
  cli_options d;
  d.message_threads = compare_message_threads;
  d.worker_threads = 0;
  d.worker_think_us = compare_worker_think_us;
  d.message_think_us = compare_message_think_us;
  d.sleep_us = compare_sleep_us;
  d.warmup_s = compare_warmup_s;
  d.runtime_s = compare_runtime_s;
  return d;
}

compare_options parse_compare(std::span<const std::string> args) {
  compare_options d;
  const std::vector<std::string> registered = usched::policy_names();
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    // "--flag=value" or "--flag value", the value taken whatever it looks
    // like (getopt's rule, as parse_cli).
    const auto value = [&](const std::string& flag, const std::string& expected) -> std::string {
      if (a.size() > flag.size()) return a.substr(flag.size() + 1);
      if (i + 1 >= args.size()) throw usage_error(flag + ": missing value; " + expected);
      return args[++i];
    };
    const auto is = [&a](const std::string& flag) {
      return a == flag || a.rfind(flag + "=", 0) == 0;
    };
    if (a == "-h" || a == "--help") {
      d.help = true;
      return d;
    }
    if (is("--policies")) {
      const std::string expected = "expected a,b,c from: " + policy_list();
      d.policies = split_commas(value("--policies", expected));
      if (d.policies.empty()) throw usage_error("--policies: missing value; " + expected);
      for (const std::string& p : d.policies) {
        if (std::find(registered.begin(), registered.end(), p) == registered.end()) {
          throw usage_error("--policies: '" + p + "' is not a registered policy; choose from: " +
                            policy_list());
        }
      }
      continue;
    }
    if (is("--plot")) {
      const std::string expected = "expected a PNG file name";
      d.plot = value("--plot", expected);
      if (d.plot.empty()) throw usage_error("--plot: missing value; " + expected);
      d.plot_given = true;
      continue;
    }
    // The flags compare sets on each run itself: named, so the user learns
    // what to use instead rather than that the flag does not exist.
    if (is("--policy")) {
      throw usage_error("--policy: compare sets it per run; choose the policies with --policies "
                        "a,b,c from: " + policy_list());
    }
    if (is("--threads")) {
      throw usage_error("--threads: compare always adds the run on plain threads; " +
                        accepted_flags());
    }
    if (is("--json")) {
      throw usage_error("--json: compare sets it per run to read the report back; " +
                        accepted_flags());
    }
    if (a.size() >= 2 && a[0] == '-' && a[1] != '-' && is_workload_flag(std::string_view(a).substr(0, 2))) {
      // Kept as given, the value with it; parse_cli checks them below.
      d.extra.push_back(a);
      if (a.size() == 2 && i + 1 < args.size()) d.extra.push_back(args[++i]);
      continue;
    }
    if (!a.empty() && a[0] == '-' && a != "-") {
      throw usage_error("unknown flag '" + a + "'; " + accepted_flags());
    }
    throw usage_error("unexpected argument '" + a + "'; every setting is a flag (see --help)");
  }
  // Every run gets the same extra flags: check them once, now, rather than
  // in each child after the runs before it.
  const cli_options parsed = parse_cli(d.extra);
  if (parsed.runtime_s == 0) {
    throw usage_error("-r: 0 is out of range here; expected seconds to run, 1.." +
                      std::to_string(max_sec_value) + " (compare needs every run to end by itself)");
  }
  if (d.policies.empty()) d.policies = registered;
  return d;
}

std::string compare_usage_text(std::string_view program) {
  const cli_options d = compare_defaults();
  std::string s =
      "usage: " + std::string(program) +
      " [--policies a,b,c] [--plot FILE]\n"
      "       [-m N] [-t N] [-r S] [-s US] [-c US] [-C US] [-i S] [-z S] [-w S]\n"
      "Runs usched_schbench once per policy (default: every registered one) and once on\n"
      "plain threads (the kernel's scheduler), all with the same workload flags:\n"
      "the defaults below, then the flags given, later ones winning. Prints one table\n"
      "(p50, p90, p99, p99.9, max, samples, p99 / the kernel's p99) and plots the\n"
      "percentile curves to FILE with gnuplot.\n"
      "  --policies a,b,c the policies to run, from: " + policy_list() + "\n"
      "  --plot FILE   where to write the PNG; its folder must exist and be writable\n"
      "                (default: " + std::string(compare_default_plot) +
      ", skipped when gnuplot is not on PATH)\n";
  // -r 0 would never end a run, so it is not offered.
  s += workload_usage(d, "usched workers / 2, at least 1", false);
  s += "  -h, --help    print this help\n";
  return s;
}

}  // namespace usched::schbench
