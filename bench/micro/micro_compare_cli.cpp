// micro_compare_cli.cpp: parsing usched_micro_compare's flags.
#include "micro_compare_cli.hpp"

#include <algorithm>
#include <charconv>
#include <optional>

#include <usched/options.hpp>

namespace bench::micro_compare {

namespace {

std::string policy_list() {
  std::string s;
  for (const std::string& n : usched::policy_names()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// parse_uint() reads `v` as flag's value in [lo, hi]. `above` words a value
// past hi when that limit has a reason the user should hear; empty for the
// plain message.
unsigned parse_uint(const std::string& flag, const std::string& v, unsigned lo, unsigned hi,
                    const std::string& above = "") {
  const std::string range = "expected an integer " + std::to_string(lo) + ".." + std::to_string(hi);
  unsigned n = 0;
  const char* end = v.data() + v.size();
  const auto [ptr, ec] = std::from_chars(v.data(), end, n);
  const bool number = !v.empty() && ptr == end && (ec == std::errc{} || ec == std::errc::result_out_of_range);
  if (number && !above.empty() && (ec == std::errc::result_out_of_range || n > hi)) {
    throw usage_error(flag + " " + v + " is " + above + "; " + range);
  }
  if (!number || ec != std::errc{} || n < lo || n > hi) {
    throw usage_error(flag + " '" + v + "' is not valid; " + range);
  }
  return n;
}

}  // namespace

unsigned default_workers(unsigned cpus) noexcept { return cpus >= 2 ? 2 : 1; }

unsigned max_workers_for(unsigned cpus) noexcept { return std::clamp(cpus, 1u, max_workers); }

namespace {

// A policy flag's value, which must be a registered policy. Checked here:
// usched_micro would name USCHED_POLICY, which this user did not set, and
// only after starting.
const std::string& registered_policy(const std::string& flag, const std::string& name) {
  const std::vector<std::string> names = usched::policy_names();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    throw usage_error(flag + " '" + name + "' is not a registered policy; choose one of: " + policy_list());
  }
  return name;
}

}  // namespace

options parse_options(std::span<const std::string> args, unsigned cpus) {
  options o;
  const unsigned top = max_workers_for(cpus);
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    // "--flag=value" or "--flag value"; `expected` completes the error line.
    const auto value = [&](const std::string& flag, const std::string& expected) -> std::optional<std::string> {
      if (a.size() > flag.size() && a.compare(0, flag.size() + 1, flag + "=") == 0) {
        return a.substr(flag.size() + 1);
      }
      if (a != flag) return std::nullopt;
      if (i + 1 >= args.size()) throw usage_error(flag + " needs a value; expected " + expected);
      return args[++i];
    };
    const std::string rounds_range = "an integer 1.." + std::to_string(max_rounds);
    const std::string workers_range = "an integer 1.." + std::to_string(top);
    if (a == "-h" || a == "--help") {
      o.help = true;
      return o;
    }
    if (a == "--quick") {
      o.quick = true;
    } else if (a == "--scaling") {
      o.scaling = true;
    } else if (a.rfind("--quick=", 0) == 0 || a.rfind("--scaling=", 0) == 0) {
      throw usage_error(a.substr(0, a.find('=')) + " takes no value; '" + a + "' is not valid");
    } else if (auto r = value("-r", rounds_range)) {
      o.rounds = parse_uint("-r", *r, 1, max_rounds);
    } else if (auto w = value("-w", workers_range)) {
      const std::string cpu_word = cpus == 1 ? " CPU" : " CPUs";
      o.workers = parse_uint("-w", *w, 1, top,
                             cpus <= max_workers
                                 ? "more workers than the " + std::to_string(cpus) + cpu_word +
                                       " this process may run on"
                                 : "more workers than usched_micro takes");
    } else if (auto p = value("--policy", "a usched policy: one of " + policy_list())) {
      o.policy = registered_policy("--policy", *p);
    } else if (auto v = value("--against", "a usched policy: one of " + policy_list())) {
      o.against = registered_policy("--against", *v);
    } else if (auto m = value("--markdown", "a file name")) {
      if (m->empty()) throw usage_error("--markdown '' is not valid; expected a file name");
      o.markdown = *m;
    } else if (auto x = value("--micro", "the path of usched_micro")) {
      if (x->empty()) throw usage_error("--micro '' is not valid; expected the path of usched_micro");
      o.micro = *x;
    } else {
      throw usage_error("'" + a +
                        "' is not a flag; expected -r N, -w N, --policy NAME, --against NAME, --quick, "
                        "--scaling, --markdown FILE, --micro PATH or -h");
    }
  }
  if (o.workers == 0) o.workers = o.scaling ? top : default_workers(cpus);
  return o;
}

std::string usage_text(unsigned cpus) {
  const unsigned top = max_workers_for(cpus);
  return std::string("usage: usched_micro_compare") +
         " [-r N] [-w N] [--policy NAME] [--against NAME] [--quick] [--scaling] [--markdown FILE]\n"
         "       [--micro PATH]\n"
         "Runs usched_micro once per peer configuration (usched, Boost.Fiber work_stealing\n"
         "and shared_work, std::thread, raw Boost.Context, oneTBB on the fork-join rows),\n"
         "N rounds interleaved, and prints\n"
         "each benchmark side by side: median [min..max] over rounds, and peer/usched\n"
         "ratios computed per round (> 1: usched is that many times better).\n"
         "  -r N             rounds, 1.." + std::to_string(max_rounds) + " (default 3)\n"
         "  -w N             workers (threads) of the multi-worker rows, 1.." + std::to_string(top) +
         ", at most one per CPU\n"
         "                   this process may run on (default " + std::to_string(default_workers(cpus)) +
         " here)\n"
         "  --policy NAME    usched policy of the usched rows (default cfs): " + policy_list() + "\n"
         "  --against NAME   another usched policy, run beside it as a peer of the usched\n"
         "                   rows (yield, chan_same, future_same, spawn_join, skynet)\n"
         "  --quick          smaller workloads for smoke runs: --samples=" +
         std::to_string(quick_samples) + " --fibers=" + std::to_string(quick_fibers) +
         " --ops=" + std::to_string(quick_ops) + "\n"
         "                   (default --samples=" + std::to_string(full_samples) +
         " --fibers=" + std::to_string(full_fibers) + " --ops=" + std::to_string(full_ops) + ")\n"
         "  --scaling        skynet and a fan-out of " + std::to_string(full_fanout_tasks) +
         " tasks of 10 us (quick: " + std::to_string(quick_fanout_tasks) + ")\n"
         "                   at 1, 2, 4, ... workers up to -w (default: every CPU here, " +
         std::to_string(top) + "),\n"
         "                   usched against Boost.Fiber work_stealing, with speedups\n"
         "  --markdown FILE  also write the tables as Markdown to FILE\n"
         "  --micro PATH     the usched_micro to run (default: next to this program)\n"
         "  -h, --help       this text\n";
}

}  // namespace bench::micro_compare
