// calibration.cpp: blocks, distances and the noise fit (see calibration.hpp).
#include "calibration.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <sstream>

#include <usched/options.hpp>

#include "cli.hpp"
#include "schbench_model.hpp"
#include "simulator.hpp"

namespace usched::sim {

namespace sb = usched::schbench;

percentile_block block_of(const sb::run_summary& s) {
  percentile_block b;
  for (std::size_t i = 0; i < block_percentiles.size(); ++i) {
    b.p[i] = static_cast<double>(sb::percentile_value(s, block_percentiles[i]));
  }
  b.min = static_cast<double>(s.min_us);
  b.max = static_cast<double>(s.max_us);
  return b;
}

block_spread spread_of(const std::vector<percentile_block>& runs) {
  block_spread out;
  if (runs.empty()) return out;
  const auto each = [&](auto get) {
    std::vector<double> v;
    for (const percentile_block& b : runs) v.push_back(get(b));
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    const double med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    return std::array<double, 3>{med, v.front(), v.back()};
  };
  for (std::size_t i = 0; i < block_percentiles.size(); ++i) {
    const auto r = each([i](const percentile_block& b) { return b.p[i]; });
    out.median.p[i] = r[0];
    out.lo.p[i] = r[1];
    out.hi.p[i] = r[2];
  }
  const auto mn = each([](const percentile_block& b) { return b.min; });
  const auto mx = each([](const percentile_block& b) { return b.max; });
  out.median.min = mn[0];
  out.lo.min = mn[1];
  out.hi.min = mn[2];
  out.median.max = mx[0];
  out.lo.max = mx[1];
  out.hi.max = mx[2];
  return out;
}

namespace {

double ratio_of(double a, double b) { return std::max(a, 1.0) / std::max(b, 1.0); }

}  // namespace

double log_distance(const percentile_block& a, const percentile_block& b) {
  double sum = 0;
  for (std::size_t i = 0; i < block_percentiles.size(); ++i) sum += std::fabs(std::log2(ratio_of(a.p[i], b.p[i])));
  return sum / static_cast<double>(block_percentiles.size());
}

double worst_ratio(const percentile_block& a, const percentile_block& b) {
  double worst = 1;
  for (std::size_t i = 0; i < block_percentiles.size(); ++i) {
    const double r = ratio_of(a.p[i], b.p[i]);
    worst = std::max(worst, std::max(r, 1 / r));
  }
  return worst;
}

// Chris Mason's runs, seeds/000_26cf78064701bb6b.txt: `schbench -t 20`
// (-m 2 by default, -c 1000000 -s 1000 as his report's command line says)
// on the 40-vCPU VM.
thread_run seed000_fixed() {
  thread_run r;
  r.what = "v5.10-rc1 (3650b228f83a) + Vincent Guittot's LLC patch, Chris Mason's 90 s run (3320 samples)";
  r.policy = "cfs";
  r.machine = "vm40";
  r.topology = "pack:1 core:20 pu:2";
  r.schbench = "-m 2 -t 20 -r {r} -c 1000000 -s 1000";
  r.block = {{161, 200, 228, 254, 314, 330, 356}, 29, 358};
  return r;
}

thread_run seed000_v5_9() {
  thread_run r = seed000_fixed();
  r.what = "0b0695f2b34a (the v5.9 rework), Chris Mason's 1440 s run (4480 samples)";
  r.policy = "cfs-v5.9";
  r.block = {{147, 182, 205, 224, 12240, 12752, 13104}, 21, 13172};
  return r;
}

sim_config experiment_config(const std::string& topology, const std::string& policy, std::uint64_t seed,
                             const machine& m) {
  sim_config cfg;
  cfg.topology = topology;
  cfg.policy = policy;
  cfg.seed = seed;
  cfg.options = usched::options::kernel_experiment();
  use_machine(cfg, m);
  return cfg;
}

std::string with_runtime(std::string s, std::uint64_t runtime_s) {
  const std::string key = "{r}";
  for (auto at = s.find(key); at != std::string::npos; at = s.find(key)) s.replace(at, key.size(), std::to_string(runtime_s));
  return s;
}

sb::run_summary run_schbench_args(simulator& sim, const std::string& args) {
  std::vector<std::string> argv;
  std::istringstream in(args);
  for (std::string a; in >> a;) argv.push_back(a);
  argv.insert(argv.end(), {"-i", "0"});
  std::ostringstream ignore;
  return run_schbench_model(sim, sb::parse_cli(argv, "usched_sim -- schbench"), ignore);
}

block_spread simulate(const thread_run& run, const machine& m, const std::vector<std::uint64_t>& seeds,
                      std::uint64_t runtime_s) {
  std::vector<percentile_block> blocks;
  for (const std::uint64_t seed : seeds) {
    simulator sim(experiment_config(run.topology, run.policy, seed, m));
    blocks.push_back(block_of(run_schbench_args(sim, with_runtime(run.schbench, runtime_s))));
  }
  return spread_of(blocks);
}

namespace {

std::string us_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

std::string fixed(double v, int decimals) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

struct grid_point {
  machine m;
  block_spread sim;
  double distance = 0;
};

std::string settings(const machine& m) {
  return "waker=" + us_text(static_cast<double>(m.cost.waker_ns) / 1000) +
         " waker_futex=" + us_text(static_cast<double>(m.cost.waker_futex_ns) / 1000) +
         " wake_parked=" + us_text(static_cast<double>(m.cost.wake_parked_ns) / 1000) + " us, sigma " +
         fixed(m.jitter.sigma, 2);
}

void block_row(std::ostream& out, const std::string& name, const percentile_block& b) {
  out << "| " << name << " |";
  for (const double v : b.p) out << " " << us_text(v) << " |";
  out << " " << us_text(b.min) << " | " << us_text(b.max) << " |\n";
}

void block_header(std::ostream& out) {
  out << "| block |";
  for (const double p : block_percentiles) out << " p" << fixed(p, p == std::floor(p) ? 0 : 1) << " |";
  out << " min | max |\n|---|";
  for (std::size_t i = 0; i < block_percentiles.size() + 2; ++i) out << "---|";
  out << "\n";
}

}  // namespace

int run_calibration(const calibration_options& o, std::ostream& out, std::ostream& progress) {
  const thread_run fit = seed000_fixed();
  const thread_run predict = seed000_v5_9();
  const std::vector<std::uint64_t> seeds =
      o.quick ? std::vector<std::uint64_t>{1, 2, 3} : std::vector<std::uint64_t>{1, 2, 3, 4, 5};
  const std::uint64_t runtime_s = o.quick ? 10 : 30;
  const machine base = machine_named(fit.machine);
  constexpr std::int64_t us = 1000;
  // The wake-up's three medians and the spread: what a VM changes most.
  const std::vector<std::int64_t> wakers = o.quick ? std::vector<std::int64_t>{2 * us}
                                                   : std::vector<std::int64_t>{1 * us, 2 * us, 3 * us};
  const std::vector<std::int64_t> futexes{7 * us, 9 * us, 11 * us, 13 * us};
  const std::vector<std::int64_t> parked = o.quick ? std::vector<std::int64_t>{6 * us, 12 * us}
                                                   : std::vector<std::int64_t>{3 * us, 6 * us, 12 * us, 20 * us};
  const std::vector<double> sigmas = o.quick ? std::vector<double>{0.35} : std::vector<double>{0.2, 0.35, 0.5};
  std::vector<grid_point> points;
  for (const std::int64_t w : wakers) {
    for (const std::int64_t f : futexes) {
      for (const std::int64_t p : parked) {
        for (const double s : sigmas) {
          grid_point g;
          g.m = base;
          g.m.cost.waker_ns = w;
          g.m.cost.waker_futex_ns = f;
          g.m.cost.wake_parked_ns = p;
          g.m.jitter.sigma = s;
          g.sim = simulate(fit, g.m, seeds, runtime_s);
          g.distance = log_distance(g.sim.median, fit.block);
          progress << settings(g.m) << ": distance " << fixed(g.distance, 3) << '\n' << std::flush;
          points.push_back(std::move(g));
        }
      }
    }
  }
  std::stable_sort(points.begin(), points.end(),
                   [](const grid_point& a, const grid_point& b) { return a.distance < b.distance; });
  const grid_point& best = points.front();
  out << "Fitted: " << fit.what << ", `" << fit.policy << "` on `" << fit.machine << "` (`--topology '" << fit.topology
      << "'`), " << points.size() << " grid points, each over " << seeds.size() << " seeds of " << runtime_s
      << " s; the distance is the mean |log2(simulated / thread)| over the seven percentiles of the seeds' median "
         "block.\n\n| rank | settings | distance | worst ratio |\n|---|---|---|---|\n";
  for (std::size_t i = 0; i < std::min<std::size_t>(8, points.size()); ++i) {
    out << "| " << i + 1 << " | " << settings(points[i].m) << " | " << fixed(points[i].distance, 3) << " | "
        << fixed(worst_ratio(points[i].sim.median, fit.block), 2) << " |\n";
  }
  out << "\nThe profile `" << base.name << "` holds " << settings(base) << ".\n\n";
  const block_spread fitted = simulate(fit, best.m, seeds, runtime_s);
  const block_spread predicted = simulate(predict, best.m, seeds, runtime_s);
  block_header(out);
  block_row(out, "thread: " + fit.policy, fit.block);
  block_row(out, "simulated, best fit", fitted.median);
  block_row(out, "thread: " + predict.policy, predict.block);
  block_row(out, "simulated, predicted", predicted.median);
  const double good = fitted.median.p[4];
  const double bad = predicted.median.p[4];
  out << "\nFit distance " << fixed(log_distance(fitted.median, fit.block), 3) << " (worst ratio "
      << fixed(worst_ratio(fitted.median, fit.block), 2) << "); prediction distance "
      << fixed(log_distance(predicted.median, predict.block), 3) << " (worst ratio "
      << fixed(worst_ratio(predicted.median, predict.block), 2) << "); p99 " << predict.policy << "/" << fit.policy
      << " " << fixed(bad / std::max(good, 1.0), 1) << "x against the thread's "
      << fixed(predict.block.p[4] / fit.block.p[4], 1) << "x.\n";
  return 0;
}

}  // namespace usched::sim
