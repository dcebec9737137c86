// micro_compare.cpp: usched_micro_compare, the micro benchmarks of
// usched_micro (main.cpp, workloads/) run for usched and every peer, side by
// side, with ratios.
//
//   usched_micro_compare [-r N] [-w N] [--policy NAME] [--quick] [--scaling]
//                        [--markdown FILE] [--micro PATH]
//
// usched_micro runs one peer configuration per process (Boost.Fiber's
// work_stealing can be installed once per process), so this driver starts it
// once per configuration (the table in make_configs()), reads back its
// Google Benchmark JSON, and repeats the whole set -r times. The rounds are
// interleaved: every round runs every configuration once, in the same order,
// so a noisy neighbour or a frequency change hits all of them alike.
//
// How to read the output. Every value is "median [min..max]" over the
// rounds. Every metric here is lower-is-better (ns, ms, bytes), and every
// ratio is peer/usched, computed within each round (peer_r / usched_r) and
// then summarised the same way: a ratio of 2.00 means usched took half the
// time (or memory) of that peer; below 1 the peer is better. The one
// exception is the raw Boost.Context switch (the floor no runtime can beat):
// its ratio is usched/floor, labelled "x floor". The load-tracking block
// shows per-round differences instead (ns a yield pays for load tracking).
// --scaling runs skynet and the fan-out instead, usched against Boost.Fiber's
// work_stealing, at 1, 2, 4, ... workers up to -w (by default every CPU
// this process may run on), and prints per worker count the times, the
// peer/usched ratio, each runtime's speedup over its own 1-worker time
// (per round), and the fan-out's efficiency.
//
// A configuration that fails (non-zero exit, unreadable JSON, a benchmark
// error) is listed with its command at the end and the driver exits 1; its
// missing values show as n/a, or as "(k/N rounds)" where only some rounds
// have them.
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

// json_parser includes the deprecated <boost/bind.hpp>; this keeps its
// placeholders where it expects them, without the deprecation note.
#define BOOST_BIND_GLOBAL_PLACEHOLDERS
#include <boost/property_tree/json_parser.hpp>
#include <boost/property_tree/ptree.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include "common/cli_main.hpp"
#include "common/cpus.hpp"
#include "common/process.hpp"
#include "common/stop_signals.hpp"
#include "micro_compare_cli.hpp"
#include "task_api.hpp"

namespace {

namespace fs = std::filesystem;
using namespace bench::micro_compare;
using steady = std::chrono::steady_clock;

constexpr const char* program = "usched_micro_compare";

// How much of a failed run's output is shown.
constexpr std::size_t log_tail_chars = 1500;

// ---- statistics ----------------------------------------------------------------------

struct summary {
  double median = 0, min = 0, max = 0;
  std::size_t n = 0;
};

std::optional<summary> summarise(std::vector<double> v) {
  if (v.empty()) return std::nullopt;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  summary s;
  s.n = n;
  s.min = v.front();
  s.max = v.back();
  s.median = n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
  return s;
}

// ---- configurations ------------------------------------------------------------------

// One usched_micro process per round. `key` names it in the result store and
// the report; `label` is what the progress line and failures show.
struct config {
  std::string key;
  std::string label;
  std::vector<std::string> args;  // usched_micro's own flags, then a filter
  unsigned min_workers = 1;       // skipped below this -w (wake-only runs)
};

// Filters (matched against "name/iterations:1"): the 1-worker runs measure
// the same-worker benchmarks, the W-worker runs everything else.
constexpr const char* same_worker = "^(yield|yield_apart|chan_same|future_same)/";
constexpr const char* yield_only = "^yield/";
constexpr const char* multi_worker =
    "^(spawn_join|spawn_all|live_rss|skynet|mutex|wake_|chan_cross|future_cross|semaphore|shared_mutex|barrier|select)";
constexpr const char* wake_only = "^wake_";
// The fork-join benchmarks, all that the oneTBB peer runs.
constexpr const char* fork_join = "^(spawn_join|spawn_all|skynet)/";
constexpr const char* timer_only = "^timer_late/";
constexpr const char* io_only = "^io_late/";
// The reactor backends the io_late table compares.
constexpr const char* io_backends[] = {"io_uring", "epoll"};

// The policies of the timer_late table: the one asked for, one that pulls
// a woken fiber to an idle worker, and one that never moves it.
std::vector<std::string> timer_policies(const options& o) {
  std::vector<std::string> out = {o.policy};
  for (const char* p : {"steal", "none"}) {
    if (o.policy != p) out.push_back(p);
  }
  return out;
}

std::vector<config> make_configs(const options& o) {
  const std::string w1 = "--workers=1";
  const std::string ww = "--workers=" + std::to_string(o.workers);
  const std::string wl = " w=" + std::to_string(o.workers);
  const std::string pol = "--policy=" + o.policy;
  const auto filter = [](const char* re) { return std::string("--benchmark_filter=") + re; };
  // Order of the list = order within each round.
  std::vector<config> c = {
      {"context", "context", {"--peer=context", w1}},
      {"us1", "usched " + o.policy + " w=1", {"--peer=usched", w1, pol, filter(same_worker)}},
      {"us1-none", "usched none w=1", {"--peer=usched", w1, "--policy=none", filter(yield_only)}},
      {"us1-steal", "usched steal w=1", {"--peer=usched", w1, "--policy=steal", filter(yield_only)}},
      {"us1-nolt", "usched " + o.policy + " w=1 load-tracking=0",
       {"--peer=usched", w1, pol, "--load-tracking=0", filter(yield_only)}},
      {"usW", "usched " + o.policy + wl, {"--peer=usched", ww, pol, filter(multi_worker)}},
      {"usW-park", "usched " + o.policy + wl + " spin-us=0",
       {"--peer=usched", ww, pol, "--spin-us=0", filter(wake_only)}, 2},
      {"bws1", "boost-ws w=1", {"--peer=boost-ws", w1, filter(same_worker)}},
      {"bsh1", "boost-shared w=1", {"--peer=boost-shared", w1, filter(same_worker)}},
      {"bwsW", "boost-ws" + wl, {"--peer=boost-ws", ww, filter(multi_worker)}},
      {"bshW", "boost-shared" + wl, {"--peer=boost-shared", ww, filter(multi_worker)}},
      {"bwssW", "boost-ws-sleep" + wl, {"--peer=boost-ws-sleep", ww, filter(wake_only)}, 2},
      {"tbbW", "oneTBB" + wl, {"--peer=tbb", ww, filter(fork_join)}},
      {"thread", "thread" + wl, {"--peer=thread", ww}},
  };
  for (const std::string& tp : timer_policies(o)) {
    c.push_back({"usT-" + tp, "usched " + tp + wl, {"--peer=usched", ww, "--policy=" + tp, filter(timer_only)}, 2});
  }
  for (const std::string& tp : timer_policies(o)) {
    for (const char* io : io_backends) {
      c.push_back({"usI-" + tp + "-" + io, "usched " + tp + wl + " " + io,
                   {"--peer=usched", ww, "--policy=" + tp, std::string("--io=") + io, filter(io_only)}, 2});
    }
  }
  if (!o.against.empty()) {
    const std::string ag = "--policy=" + o.against;
    c.push_back({"vs1", "usched " + o.against + " w=1", {"--peer=usched", w1, ag, filter(same_worker)}});
    c.push_back({"vsW", "usched " + o.against + wl, {"--peer=usched", ww, ag, filter(multi_worker)}});
  }
  c.push_back({"usT-park", "usched " + o.policy + wl + " spin-us=0",
               {"--peer=usched", ww, pol, "--spin-us=0", filter(timer_only)}, 2});
  const std::vector<std::string> sizes = {"--samples=" + std::to_string(o.samples()),
                                          "--fibers=" + std::to_string(o.fibers()),
                                          "--ops=" + std::to_string(o.ops())};
  std::vector<config> out;
  for (config& x : c) {
    if (o.workers < x.min_workers) continue;
    x.args.insert(x.args.begin() + 1, sizes.begin(), sizes.end());
    out.push_back(std::move(x));
  }
  return out;
}

// The worker counts of a scaling run: powers of two below `top`, then top.
std::vector<unsigned> worker_ladder(unsigned top) {
  std::vector<unsigned> out;
  for (unsigned w = 1; w < top; w *= 2) out.push_back(w);
  out.push_back(top);
  return out;
}

std::vector<config> make_scaling_configs(const options& o) {
  std::vector<config> out;
  const std::vector<std::string> sizes = {"--fibers=" + std::to_string(o.fibers()),
                                          "--fanout-tasks=" + std::to_string(o.fanout_tasks())};
  const std::string filter = "--benchmark_filter=^(skynet|fanout)/";
  for (unsigned w : worker_ladder(o.workers)) {
    const std::string n = std::to_string(w);
    config us{"us-w" + n, "usched " + o.policy + " w=" + n,
              {"--peer=usched", "--workers=" + n, "--policy=" + o.policy, filter}};
    config bws{"bws-w" + n, "boost-ws w=" + n, {"--peer=boost-ws", "--workers=" + n, filter}};
    for (config* c : {&us, &bws}) {
      c->args.insert(c->args.begin() + 1, sizes.begin(), sizes.end());
      out.push_back(std::move(*c));
    }
  }
  return out;
}

// ---- results ---------------------------------------------------------------------------

// Every counter of every benchmark of every configuration, per round.
class result_store {
 public:
  explicit result_store(unsigned rounds) : rounds_(rounds) {}

  void put(const std::string& cfg, const std::string& bench, const std::string& counter,
           unsigned round, double v) {
    auto& slots = values_[{cfg, bench, counter}];
    slots.resize(rounds_);
    slots[round] = v;
  }
  std::optional<double> get(const std::string& cfg, const std::string& bench,
                            const std::string& counter, unsigned round) const {
    const auto it = values_.find({cfg, bench, counter});
    if (it == values_.end()) return std::nullopt;
    return it->second[round];
  }
  unsigned rounds() const { return rounds_; }

 private:
  using key = std::tuple<std::string, std::string, std::string>;
  unsigned rounds_;
  std::map<key, std::vector<std::optional<double>>> values_;
};

// "mutex/16/iterations:1" -> "mutex/16".
std::string benchmark_name(const std::string& full) {
  const std::size_t at = full.find("/iterations:");
  return at == std::string::npos ? full : full.substr(0, at);
}

std::optional<double> as_number(const std::string& s) {
  double v = 0;
  const char* end = s.data() + s.size();
  const auto [ptr, ec] = std::from_chars(s.data(), end, v);
  if (s.empty() || ec != std::errc{} || ptr != end) return std::nullopt;
  return v;
}

// read_results() stores every numeric field of every benchmark in one
// usched_micro JSON file; an empty return means it all went well, otherwise
// it says what was wrong (the values read are stored all the same).
std::string read_results(const std::string& json, const std::string& cfg, unsigned round,
                         result_store& store) {
  namespace pt = boost::property_tree;
  pt::ptree root;
  try {
    pt::read_json(json, root);
  } catch (const pt::json_parser_error& e) {
    return std::string("unreadable JSON: ") + e.what();
  }
  const auto benchmarks = root.get_child_optional("benchmarks");
  if (!benchmarks || benchmarks->empty()) return "no benchmark in its JSON output";
  std::string problems;
  for (const auto& entry : *benchmarks) {
    const pt::ptree& b = entry.second;
    if (b.get<std::string>("run_type", "iteration") != "iteration") continue;
    const std::string name = benchmark_name(b.get<std::string>("name", "?"));
    if (b.get<bool>("error_occurred", false)) {
      if (!problems.empty()) problems += "; ";
      problems += name + ": " + b.get<std::string>("error_message", "error");
      continue;
    }
    for (const auto& [field, value] : b) {
      if (!value.empty()) continue;  // an object or array, not a counter
      if (const auto v = as_number(value.data())) store.put(cfg, name, field, round, *v);
    }
  }
  return problems;
}

// ---- processes ----------------------------------------------------------------------------

// run_child() runs exe with args to its end, stdout and stderr to `log`,
// and returns its wait status. SIGINT/SIGTERM end the comparison after the
// running child: a stop signal that comes meanwhile is sent on to it as
// SIGTERM, and `stopped` set; then the tables so far are printed. The
// driver sleeps until the child exits (no polling), so it takes no CPU from
// the measurements.
int run_child(const std::string& exe, const std::vector<std::string>& args, const std::string& log,
              const bench::stop_signals& sig, bool& stopped) {
  bench::child_process c(exe, args, log);
  return bench::wait_for_child(c, sig, SIGTERM, stopped);
}

// The wait statuses of usched_micro runs, as the report words them.
std::string describe_status(int st) { return bench::describe_status(st, "exit code"); }

std::string tail_of(const std::string& s, std::size_t chars) {
  return s.size() <= chars ? s : "..." + s.substr(s.size() - chars);
}

struct failure {
  unsigned round = 0;
  std::string label;
  std::string command;
  std::string why;
  std::string output;  // the tail of what it printed
};

// ---- the report ------------------------------------------------------------------------------

// A block is one table: lines (a configuration's benchmark) by metrics (a
// counter, optionally of another benchmark of the same configuration).
enum class line_kind {
  base,   // usched: the denominator of the block's ratios
  peer,   // ratio peer/base
  floor,  // ratio base/floor: "x floor"
  plain,  // value only
  diff,   // value = (cfg, bench) minus (minus_cfg, bench), per round
};

struct line {
  std::string label;
  line_kind kind;
  std::string cfg;
  std::string bench;
  std::string minus_cfg = {};
};

struct metric {
  std::string header;
  std::string counter;
  bool ratio = true;
  std::string bench = {};  // empty: the line's benchmark
};

struct block {
  std::string title;
  std::vector<metric> metrics;
  std::vector<line> lines;
};

// 1000000 -> "1,000,000".
std::string thousands(long n) {
  const std::string digits = std::to_string(n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// Every line of every table reads a benchmark from one configuration's run.
// A configuration whose filter does not select that benchmark would leave the
// line n/a in every round, silently; say which line before running anything.
// Configurations that are not in the list (a -w too small for them, no
// --against) are skipped: their lines print n/a by design.
void check_blocks(const std::vector<block>& blocks, const std::vector<config>& configs) {
  const std::string flag = "--benchmark_filter=";
  for (const block& b : blocks) {
    for (const line& l : b.lines) {
      for (const std::string* cfg : {&l.cfg, &l.minus_cfg}) {
        if (cfg->empty()) continue;
        const auto c = std::find_if(configs.begin(), configs.end(), [&](const config& x) { return x.key == *cfg; });
        if (c == configs.end()) continue;
        const auto f = std::find_if(c->args.begin(), c->args.end(),
                                    [&](const std::string& a) { return a.rfind(flag, 0) == 0; });
        if (f == c->args.end()) continue;
        const std::regex selects(f->substr(flag.size()));
        for (const metric& m : b.metrics) {
          const std::string& bench = m.bench.empty() ? l.bench : m.bench;
          if (!std::regex_search(bench + "/iterations:1", selects)) {
            throw std::logic_error("table '" + b.title.substr(0, b.title.find(':')) + "', line '" + l.label +
                                   "': configuration " + c->label + " does not run benchmark " + bench);
          }
        }
      }
    }
  }
}

std::vector<block> make_blocks(const options& o) {
  const std::string p = "usched " + o.policy;
  const std::string ws = std::to_string(o.workers) + (o.workers == 1 ? " worker" : " workers");
  const std::string fibers = thousands(o.fibers());
  const std::string samples = thousands(o.samples());
  const auto base = [](std::string label, std::string cfg, std::string bench) {
    return line{std::move(label), line_kind::base, std::move(cfg), std::move(bench)};
  };
  const auto peer = [](std::string label, std::string cfg, std::string bench) {
    return line{std::move(label), line_kind::peer, std::move(cfg), std::move(bench)};
  };
  const auto plain = [](std::string label, std::string cfg, std::string bench) {
    return line{std::move(label), line_kind::plain, std::move(cfg), std::move(bench)};
  };
  // The --against policy's line, right after the usched rows.
  const auto with_against = [&](std::vector<line> lines, const char* cfg, const char* bench) {
    if (!o.against.empty()) {
      lines.insert(lines.begin() + 1, line{"usched " + o.against, line_kind::peer, cfg, bench});
    }
    return lines;
  };

  std::vector<block> b;
  b.push_back({"yield: ns per switch, two fibers (threads: two threads on one CPU) yielding to each other, 1 worker",
               {{"ns/switch", "ns"}},
               with_against({base(p, "us1", "yield"),
                line{"context (floor)", line_kind::floor, "context", "yield"},
                peer("boost-ws", "bws1", "yield"), peer("boost-shared", "bsh1", "yield"),
                peer("thread", "thread", "yield")}, "vs1", "yield")});
  b.push_back({"yield_apart: ns per switch, the same with the two fibers yielding from different loops, 1 worker",
               {{"ns/switch", "ns"}},
               {base(p, "us1", "yield_apart"),
                line{"context (floor)", line_kind::floor, "context", "yield"},
                peer("boost-ws", "bws1", "yield_apart"), peer("boost-shared", "bsh1", "yield_apart")}});
  b.push_back({"chan_same: ns per one-way hand-off, unbuffered channel ping-pong, 1 worker",
               {{"ns/hand-off", "ns"}},
               with_against({base(p, "us1", "chan_same"), peer("boost-ws", "bws1", "chan_same"),
                peer("boost-shared", "bsh1", "chan_same")}, "vs1", "chan_same")});
  b.push_back({"spawn_join: ns per fiber, " + fibers + " spawned and joined in batches of 1,000 from a fiber, " +
                   ws + " (oneTBB: tasks of a task_group, one wait per batch; thread: 20,000 threads)",
               {{"warm ns/fiber", "ns"}, {"first-run ns/fiber", "ns_first"},
                {"peak RSS MiB", "peak_rss_mib", false}},
               with_against({base(p, "usW", "spawn_join"), plain(p + ", from a thread", "usW", "spawn_join_thread"),
                peer("boost-ws", "bwsW", "spawn_join"), peer("boost-shared", "bshW", "spawn_join"),
                peer("oneTBB", "tbbW", "spawn_join"), peer("thread", "thread", "spawn_join")}, "vsW", "spawn_join")});
  b.push_back({"spawn_all: ns per fiber, " + thousands(o.fibers() / 2) +
                   " spawned from a fiber with their handles kept, then joined, " + ws +
                   " (oneTBB: one task_group, each result stored in a slot made beforehand, one wait)",
               {{"warm ns/fiber", "ns"}, {"first-run ns/fiber", "ns_first"},
                {"peak RSS MiB", "peak_rss_mib", false}},
               with_against({base(p, "usW", "spawn_all"), peer("oneTBB", "tbbW", "spawn_all")}, "vsW", "spawn_all")});
  b.push_back({"live_rss: resident bytes per blocked fiber, 100,000 alive at once, " + ws,
               {{"bytes/fiber", "bytes_per_fiber"}, {"stack bytes", "stack_bytes", false}},
               {base(p, "usW", "live_rss"), peer("boost-ws", "bwsW", "live_rss")}});
  b.push_back({"skynet: ms for a 10-ary tree of fibers with " + fibers + " leaves, " + ws +
                   " (oneTBB: a task_group per node)",
               {{"ms", "ms"}, {"peak RSS MiB", "peak_rss_mib", false}},
               with_against({base(p, "usW", "skynet"), peer("boost-ws", "bwsW", "skynet"),
                peer("boost-shared", "bshW", "skynet"), peer("oneTBB", "tbbW", "skynet")}, "vsW", "skynet")});
  if (o.workers >= 2) {
    b.push_back({"cacheline: ns one way for a cache line bounced between two CPUs (threads): the floor of "
                 "any cross-worker wake-up or hand-off",
                 {{"ns one way", "ns", false}},
                 {plain("two threads", "thread", "cacheline")}});
    const std::vector<metric> pct = {{"p50 ns", "p50_ns"}, {"p99 ns", "p99_ns"}, {"p99.9 ns", "p999_ns"}};
    for (const char* bench : {"wake_cv", "wake_chan"}) {
      const std::string what = std::string(bench) +
                               (std::string(bench) == "wake_cv" ? ": condition variable" : ": channel receive") +
                               " wake-to-run ns, " + samples + " samples, " + ws;
      std::vector<line> spinning = {base(p, "usW", bench), peer("boost-ws (busy-polling)", "bwsW", bench)};
      std::vector<line> parked = {base(p + ", spin-us=0", "usW-park", bench),
                                  peer("boost-ws-sleep", "bwssW", bench)};
      if (std::string(bench) == "wake_cv") {
        spinning.push_back(peer("thread", "thread", bench));
        parked.push_back(peer("thread", "thread", bench));
      }
      b.push_back({what + "; target worker spinning", pct, spinning});
      b.push_back({what + "; target worker parked", pct, parked});
    }
  }
  b.push_back({"mutex/N: ns per lock+unlock, N fibers (threads) contending, " + ws,
               {{"N=2", "ns", true, "mutex/2"}, {"N=16", "ns", true, "mutex/16"},
                {"N=1000", "ns", true, "mutex/1000"}},
               {base(p, "usW", ""), peer("boost-ws", "bwsW", ""), peer("boost-shared", "bshW", ""),
                peer("thread", "thread", "")}});
  if (o.workers >= 2) {
    b.push_back({"chan_cross: ns per one-way hand-off, unbuffered channel ping-pong across two workers, " + ws,
                 {{"ns/hand-off", "ns"}},
                 {base(p, "usW", "chan_cross"),
                  line{"cache line one way (floor)", line_kind::floor, "thread", "cacheline"},
                  peer("boost-ws", "bwsW", "chan_cross"),
                  peer("boost-shared", "bshW", "chan_cross")}});
  }
  // The task API's primitives.
  const std::string ops = thousands(o.ops());
  const std::string thread_ops = thousands(o.ops() / micro::thread_ops_divisor);
  b.push_back({"future_same: ns per one-way hand-off, ping-pong through a fresh promise/future pair per hand-off, " +
                   ops + " hand-offs, 1 worker (thread: std::promise/std::future, " + thread_ops +
                   ", two threads on one CPU)",
               {{"ns/hand-off", "ns"}},
               with_against({base(p, "us1", "future_same"), peer("boost-ws", "bws1", "future_same"),
                             peer("boost-shared", "bsh1", "future_same"), peer("thread", "thread", "future_same")},
                            "vs1", "future_same")});
  if (o.workers >= 2) {
    b.push_back({"future_cross: ns per one-way hand-off, the same across two workers, " + ws +
                     " (thread: two threads on two CPUs)",
                 {{"ns/hand-off", "ns"}},
                 {base(p, "usW", "future_cross"),
                  line{"cache line one way (floor)", line_kind::floor, "thread", "cacheline"},
                  peer("boost-ws", "bwsW", "future_cross"), peer("boost-shared", "bshW", "future_cross"),
                  peer("thread", "thread", "future_cross")}});
  }
  const std::string sem_what = std::to_string(micro::semaphore_fibers) + " fibers (threads) holding one of " +
                               std::to_string(micro::semaphore_permits) + " permits across a yield, " + ops +
                               " pairs";
  b.push_back({"semaphore: ns per acquire/release pair, " + sem_what + " (thread: " + thread_ops + "), " + ws,
               {{"ns/pair", "ns"}},
               {base(p + ", counting_semaphore", "usW", "semaphore"),
                peer(p + ", mutex + condition_variable", "usW", "semaphore_cv"),
                peer("thread, mutex + condition_variable", "thread", "semaphore")}});
  b.push_back({"semaphore_cv: ns per acquire/release pair, the same with a count under a mutex and a "
                   "condition_variable on each runtime (Boost.Fiber has no semaphore), " + ws,
               {{"ns/pair", "ns"}},
               {base(p, "usW", "semaphore_cv"), peer("boost-ws", "bwsW", "semaphore_cv"),
                peer("boost-shared", "bshW", "semaphore_cv")}});
  b.push_back({"shared_mutex: ns per operation, " + std::to_string(micro::shared_mutex_fibers) +
                   " fibers (threads), 95% lock_shared / 5% lock, " + ops +
                   " operations, " + ws + "; Boost.Fiber has no shared_mutex",
               {{"ns/op", "ns"}},
               {base(p, "usW", "shared_mutex"), peer("thread, std::shared_mutex", "thread", "shared_mutex")}});
  b.push_back({"barrier: ns per phase, " + std::to_string(micro::barrier_parties) +
                   " fibers (threads) at arrive_and_wait, " + thousands(o.ops() / micro::barrier_ops_per_phase) +
                   " phases, " + ws,
               {{"ns/phase", "ns"}},
               {base(p, "usW", "barrier"), peer("boost-ws, boost::fibers::barrier", "bwsW", "barrier"),
                peer("boost-shared, boost::fibers::barrier", "bshW", "barrier"),
                peer("thread, std::barrier", "thread", "barrier")}});
  b.push_back({"select: ns per item, 4 producers on 4 channels and a consumer selecting over them, " + ops +
                   " items, " + ws + "; against the same producers on one channel and a plain recv (neither "
                   "Boost.Fiber nor std has a select)",
               {{"ns/item", "ns"}},
               {base(p + ", select over 4", "usW", "select"), peer(p + ", recv on 1", "usW", "select_one")}});
  if (o.workers >= 2) {
    std::vector<line> lines;
    for (const std::string& tp : timer_policies(o)) lines.push_back(plain("usched " + tp, "usT-" + tp, "timer_late"));
    lines.push_back(plain(p + ", spin-us=0", "usT-park", "timer_late"));
    b.push_back({"timer_late: us a 1 ms sleep ends late when a fiber that never yields holds the sleeper's worker "
                 "(up to 20 ms), 200 sleeps, " + ws,
                 {{"p50 us", "p50_us", false}, {"max us", "max_us", false}},
                 lines});
  }
  if (o.workers >= 2) {
    std::vector<line> lines;
    for (const std::string& tp : timer_policies(o)) {
      for (const char* io : io_backends) {
        lines.push_back(plain("usched " + tp + ", " + io, "usI-" + tp + "-" + io, "io_late"));
      }
    }
    b.push_back({"io_late: us from a write to the reader running, when a fiber that runs long (preempt points "
                 "only) holds the reader's worker (up to 20 ms), 200 reads, " + ws,
                 {{"p50 us", "p50_us", false}, {"max us", "max_us", false}},
                 lines});
  }
  b.push_back({"load tracking: yield ns per yield, 1 worker; the cost is " + o.policy +
                   " minus " + o.policy + " without load tracking, per round",
               {{"ns/yield", "ns", false}},
               {plain(p, "us1", "yield"), plain(p + ", load-tracking=0", "us1-nolt", "yield"),
                line{"cost of load tracking", line_kind::diff, "us1", "yield", "us1-nolt"},
                plain("usched none", "us1-none", "yield"), plain("usched steal", "us1-steal", "yield")}});
  return b;
}

// Three significant digits, none of them after the point from 100 up.
std::string fmt_num(double v) {
  const double a = std::fabs(v);
  const int decimals = a >= 100 ? 0 : a >= 10 ? 1 : a >= 1 || a == 0 ? 2 : std::min(6, 2 - static_cast<int>(std::floor(std::log10(a))));
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// "median [min..max]", "x" after the median of a ratio, and how many rounds
// it covers when some are missing.
std::string fmt_summary(const std::optional<summary>& s, unsigned rounds, const char* unit) {
  if (!s) return "n/a";
  std::string out = fmt_num(s->median) + unit + " [" + fmt_num(s->min) + ".." + fmt_num(s->max) + "]";
  if (s->n < rounds) out += " (" + std::to_string(s->n) + "/" + std::to_string(rounds) + " rounds)";
  return out;
}

// A block with its numbers in: rows of cells under the metric headers.
struct table_row {
  bool ratio = false;              // the ratios of the row above
  std::vector<std::string> cells;  // label, then one cell per metric
};

struct table {
  std::string title;
  std::vector<std::string> headers;
  std::vector<table_row> rows;
};

table evaluate(const block& blk, const result_store& store) {
  const unsigned rounds = store.rounds();
  const line* base = nullptr;
  for (const line& l : blk.lines) {
    if (l.kind == line_kind::base) base = &l;
  }
  // A line's value for one metric in one round.
  const auto value = [&store](const line& l, const metric& m, unsigned r) -> std::optional<double> {
    const std::string& bench = m.bench.empty() ? l.bench : m.bench;
    const auto v = store.get(l.cfg, bench, m.counter, r);
    if (l.kind != line_kind::diff || !v) return v;
    const auto minus = store.get(l.minus_cfg, bench, m.counter, r);
    if (!minus) return std::nullopt;
    return *v - *minus;
  };

  table t;
  t.title = blk.title;
  for (const metric& m : blk.metrics) t.headers.push_back(m.header);
  for (const line& l : blk.lines) {
    const bool has_ratio = base && (l.kind == line_kind::peer || l.kind == line_kind::floor);
    table_row values{false, {l.label}};
    table_row ratios{true, {}};
    if (has_ratio) ratios.cells.push_back(l.kind == line_kind::floor ? "usched / floor: x floor" : l.label + " / usched");
    for (const metric& m : blk.metrics) {
      std::vector<double> vs, rs;
      for (unsigned r = 0; r < rounds; ++r) {
        const auto v = value(l, m, r);
        if (!v) continue;
        vs.push_back(*v);
        if (!has_ratio || !m.ratio) continue;
        const auto b = value(*base, m, r);
        if (!b) continue;
        const double num = l.kind == line_kind::floor ? *b : *v;
        const double den = l.kind == line_kind::floor ? *v : *b;
        if (den > 0) rs.push_back(num / den);
      }
      values.cells.push_back(fmt_summary(summarise(vs), rounds, ""));
      if (has_ratio) ratios.cells.push_back(m.ratio ? fmt_summary(summarise(rs), rounds, "x") : "");
    }
    t.rows.push_back(std::move(values));
    if (has_ratio) t.rows.push_back(std::move(ratios));
  }
  return t;
}

// Text: the label column indented by two, a ratio row's label by four.
void print_text(const table& t, std::ostream& out) {
  table_row header{false, {""}};
  header.cells.insert(header.cells.end(), t.headers.begin(), t.headers.end());
  std::vector<table_row> rows{header};
  rows.insert(rows.end(), t.rows.begin(), t.rows.end());
  for (table_row& row : rows) row.cells[0].insert(0, row.ratio ? "    " : "  ");

  std::vector<std::size_t> width(header.cells.size(), 0);
  for (const table_row& row : rows) {
    for (std::size_t c = 0; c < row.cells.size(); ++c) width[c] = std::max(width[c], row.cells[c].size());
  }
  out << t.title << '\n';
  for (const table_row& row : rows) {
    std::string s;
    for (std::size_t c = 0; c < row.cells.size(); ++c) {
      s += (c ? "   " : "") + row.cells[c] + std::string(width[c] - row.cells[c].size(), ' ');
    }
    s.erase(s.find_last_not_of(' ') + 1);
    out << s << '\n';
  }
  out << '\n';
}

// Markdown: ratio rows in italics.
void print_markdown(const table& t, std::ostream& out) {
  out << "### " << t.title << "\n\n|   |";
  for (const std::string& h : t.headers) out << ' ' << h << " |";
  out << "\n|---|";
  for (std::size_t c = 0; c < t.headers.size(); ++c) out << "---|";
  out << '\n';
  for (const table_row& row : t.rows) {
    out << '|';
    for (const std::string& s : row.cells) out << ' ' << (row.ratio && !s.empty() ? "*" + s + "*" : s) << " |";
    out << '\n';
  }
  out << '\n';
}

// The scaling tables: one per benchmark, one row per worker count.
std::vector<table> scaling_tables(const options& o, const result_store& store) {
  const unsigned rounds = store.rounds();
  const std::vector<unsigned> ladder = worker_ladder(o.workers);
  // Per round: a value, or a ratio of two values (num / den).
  const auto per_round = [&](const std::string& cfg, const std::string& bench, const std::string& counter) {
    std::vector<double> v;
    for (unsigned r = 0; r < rounds; ++r) {
      if (const auto x = store.get(cfg, bench, counter, r)) v.push_back(*x);
    }
    return v;
  };
  const auto ratio_per_round = [&](const std::string& num_cfg, const std::string& den_cfg,
                                   const std::string& bench) {
    std::vector<double> v;
    for (unsigned r = 0; r < rounds; ++r) {
      const auto a = store.get(num_cfg, bench, "ms", r);
      const auto b = store.get(den_cfg, bench, "ms", r);
      if (a && b && *b > 0) v.push_back(*a / *b);
    }
    return v;
  };
  const auto cell = [&](std::vector<double> v, const char* unit) {
    return fmt_summary(summarise(std::move(v)), rounds, unit);
  };

  std::vector<table> out;
  for (const std::string bench : {"skynet", "fanout"}) {
    const bool fanout = bench == "fanout";
    table t;
    t.title = fanout ? "fanout: ms for " + thousands(o.fanout_tasks()) +
                           " tasks of 10 us spawned by one fiber and joined; speedup: the runtime's "
                           "1-worker ms over its ms, per round; efficiency: tasks x 10 us / workers "
                           "over ms"
                     : "skynet: ms for a 10-ary tree of fibers with " + thousands(o.fibers()) +
                           " leaves; speedup: the runtime's 1-worker ms over its ms, per round";
    t.headers = {"usched " + o.policy + " ms", "boost-ws ms", "boost-ws / usched", "usched speedup",
                 "boost-ws speedup"};
    if (fanout) t.headers.insert(t.headers.end(), {"usched efficiency", "boost-ws efficiency"});
    for (unsigned w : ladder) {
      const std::string n = std::to_string(w);
      const std::string us = "us-w" + n, bws = "bws-w" + n;
      table_row row{false, {"w=" + n}};
      row.cells.push_back(cell(per_round(us, bench, "ms"), ""));
      row.cells.push_back(cell(per_round(bws, bench, "ms"), ""));
      row.cells.push_back(cell(ratio_per_round(bws, us, bench), "x"));
      row.cells.push_back(cell(ratio_per_round("us-w1", us, bench), "x"));
      row.cells.push_back(cell(ratio_per_round("bws-w1", bws, bench), "x"));
      if (fanout) {
        row.cells.push_back(cell(per_round(us, bench, "efficiency"), ""));
        row.cells.push_back(cell(per_round(bws, bench, "efficiency"), ""));
      }
      t.rows.push_back(std::move(row));
    }
    out.push_back(std::move(t));
  }
  return out;
}

// ---- the machine ----------------------------------------------------------------------------

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string l; std::getline(in, l);) {
    if (l.rfind("model name", 0) != 0) continue;
    const std::size_t colon = l.find(':');
    if (colon == std::string::npos) continue;
    const std::size_t start = l.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "unknown CPU" : l.substr(start);
  }
  return "unknown CPU";
}

std::string today() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M %Z", &tm);
  return buf;
}

// ---- main --------------------------------------------------------------------------------------

std::string micro_path(const options& o) {
  if (!o.micro.empty()) {
    if (access(o.micro.c_str(), X_OK) != 0) {
      throw usage_error("--micro '" + o.micro + "' is not valid; expected an executable usched_micro (" +
                        std::strerror(errno) + ")");
    }
    return o.micro;
  }
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("cannot read /proc/self/exe: " + ec.message());
  const std::string exe = (self.parent_path() / "usched_micro").string();
  if (access(exe.c_str(), X_OK) != 0) {
    throw std::runtime_error("cannot run " + exe + " (" + std::strerror(errno) +
                             "); build the usched_micro target, or pass --micro PATH");
  }
  return exe;
}

// first_line() is the first line of `text` with anything on it, or "".
std::string first_line(const std::string& text) {
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    if (l.find_first_not_of(" \t\r") != std::string::npos) return l;
  }
  return "";
}

// check_micro() has usched_micro list its usched benchmarks once, before the
// rounds (parse_options() has checked the policy): a binary that cannot, not
// being usched_micro or refusing a USCHED_* setting, would fail every run.
// What happened is said as it happened; it is a usage_error when the binary
// came from --micro, a runtime_error otherwise.
void check_micro(const std::string& exe, const options& o, const fs::path& dir,
                 const bench::stop_signals& sig, bool& stopped) {
  const std::string log = (dir / "micro-check.log").string();
  const int st = run_child(exe, {"--peer=usched", "--workers=1", "--policy=" + o.policy,
                                 "--benchmark_list_tests=true"}, log, sig, stopped);
  const std::string said = bench::read_text(log);
  std::string why;
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
    // Google Benchmark lists one name a line; the first usched benchmark
    // is the yield.
    if (said.rfind("yield/", 0) == 0 || said.find("\nyield/") != std::string::npos) return;
    why = "listed no usched benchmark";
  } else {
    why = (WIFEXITED(st) ? "exited with status " + std::to_string(WEXITSTATUS(st))
                         : "was " + describe_status(st)) +
          " before listing any benchmark";
    const std::string line = first_line(said);
    if (!line.empty()) why += ": " + line;
  }
  if (!o.micro.empty()) {
    throw usage_error("--micro '" + o.micro + "' " + why + "; expected a usched_micro binary");
  }
  throw std::runtime_error(exe + " " + why);
}

int run(const options& o) {
  const std::string exe = micro_path(o);
  std::ofstream md;
  if (!o.markdown.empty()) {
    md.open(o.markdown);
    if (!md) throw usage_error("--markdown '" + o.markdown + "' is not valid; cannot write it");
  }
  const bench::stop_signals sig;
  bool stopped = false;  // a stop signal came while a child ran
  const bench::temp_dir tmp("usched-micro-compare");
  check_micro(exe, o, tmp.path(), sig, stopped);

  const std::vector<config> configs = o.scaling ? make_scaling_configs(o) : make_configs(o);
  if (!o.scaling) check_blocks(make_blocks(o), configs);
  result_store store(o.rounds);
  std::vector<failure> failures;
  unsigned runs = 0;
  bool interrupted = false;
  for (unsigned r = 0; r < o.rounds && !interrupted; ++r) {
    for (const config& c : configs) {
      const std::string stem = "r" + std::to_string(r) + "-" + c.key;
      const std::string json = (tmp.path() / (stem + ".json")).string();
      const std::string log = (tmp.path() / (stem + ".log")).string();
      std::vector<std::string> args = c.args;
      args.insert(args.end(), {"--benchmark_out=" + json, "--benchmark_out_format=json"});

      std::fprintf(stderr, "[round %u/%u] %s ... ", r + 1, o.rounds, c.label.c_str());
      std::fflush(stderr);
      const auto t0 = steady::now();
      const int st = run_child(exe, args, log, sig, stopped);
      const double secs = std::chrono::duration<double>(steady::now() - t0).count();
      ++runs;

      std::string why;
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) why = describe_status(st);
      // Read what there is even after a failure: earlier benchmarks count.
      const std::string problems = fs::exists(json) ? read_results(json, c.key, r, store) : "no JSON output";
      if (why.empty()) why = problems;
      else if (!problems.empty() && fs::exists(json)) why += "; " + problems;

      std::fprintf(stderr, "%.1f s%s%s\n", secs, why.empty() ? "" : "  FAILED: ", why.c_str());
      if (!why.empty()) {
        failures.push_back(
            {r + 1, c.label, bench::shell_join(exe, args), why, tail_of(bench::read_text(log), log_tail_chars)});
      }
      // A stop signal during the run, or since its end.
      if (stopped || sig.take() != 0) {
        interrupted = true;
        break;
      }
    }
  }

  std::ostringstream head;
  const unsigned cpus = bench::affinity_cpus();
  head << "machine: " << cpu_model() << ", " << cpus << (cpus == 1 ? " CPU" : " CPUs") << ", " << today()
       << '\n'
       << "configuration: " << o.rounds << (o.rounds == 1 ? " round" : " rounds") << ", ";
  if (o.scaling) {
    head << "scaling to " << o.workers << (o.workers == 1 ? " worker" : " workers") << ", policy " << o.policy
         << ", " << (o.quick ? "quick" : "full") << " (--fibers=" << o.fibers()
         << " --fanout-tasks=" << o.fanout_tasks() << ")\n";
  } else {
    head << o.workers << (o.workers == 1 ? " worker" : " workers") << ", policy " << o.policy << ", "
         << (o.quick ? "quick" : "full") << " (--samples=" << o.samples() << " --fibers=" << o.fibers()
         << " --ops=" << o.ops() << ")\n";
  }
  head << "values: median [min..max] over rounds; ratios: peer/usched per round, median [min..max];\n"
       << "every metric is lower-is-better, so a ratio above 1 means usched is that many times better\n";
  std::cout << head.str();
  if (o.workers < 2 && !o.scaling) {
    std::cout << "(wake_cv, wake_chan and chan_cross need -w 2 or more: not run)\n";
  }
  std::cout << '\n';
  if (md) {
    md << "## usched micro benchmarks\n\n";
    std::istringstream lines(head.str());
    for (std::string l; std::getline(lines, l);) md << l << "  \n";
    md << '\n';
  }
  std::vector<table> tables;
  if (o.scaling) {
    tables = scaling_tables(o, store);
  } else {
    for (const block& b : make_blocks(o)) tables.push_back(evaluate(b, store));
  }
  for (const table& t : tables) {
    print_text(t, std::cout);
    if (md) print_markdown(t, md);
  }

  if (!failures.empty()) {
    std::ostringstream f;
    f << "FAILED: " << failures.size() << " of " << runs << " usched_micro runs\n";
    for (const failure& x : failures) {
      f << "[round " << x.round << "/" << o.rounds << "] " << x.label << ": " << x.why << "\n"
        << "  command: " << x.command << "\n";
      std::istringstream out(x.output);
      for (std::string l; std::getline(out, l);) f << "  | " << l << '\n';
    }
    std::cout << f.str();
    if (md) md << "### Failures\n\n```\n" << f.str() << "```\n";
  }
  if (interrupted) std::cout << "interrupted after " << runs << " usched_micro runs\n";
  std::cout << std::flush;
  if (md) {
    md.close();
    if (!md) {
      std::cerr << program << ": cannot write " << o.markdown << '\n';
      return 1;
    }
  }
  if (interrupted) return 130;
  return failures.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return bench::guarded_main(program, [&] {
    const unsigned cpus = bench::affinity_cpus();
    const options o =
        parse_options(std::vector<std::string>(argv + std::min(argc, 1), argv + argc), cpus);
    if (o.help) {
      std::cout << usage_text(cpus);
      return bench::exit_ok;
    }
    return run(o);
  });
}
