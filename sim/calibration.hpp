// calibration.hpp: simulated percentile blocks against a thread's, and the
// fit of a machine's noise to one of them (usched_sim --calibrate).
//
// A kernel thread's schbench run survives as its percentile block: the
// 50th to the 99.9th, the min and the max. The simulator's run of the same
// command line on the same machine is compared block against block, by a
// distance between the two histograms that only these seven points allow:
// the mean over them of |log2(simulated / thread)|, the L1 distance of the
// two log-latency quantile functions sampled at the block's percentiles
// (0 for equal blocks, 1 when every percentile is 2x off), and the worst
// ratio of any one of them.
//
// The fit: one good kernel's block on the thread's machine (seed 000: the
// 5.10-rc1 + fix run on the 40-vCPU VM) is matched by a grid search over
// the machine's wake-up medians and spread, every other setting held; the
// machine (machine.cpp, `vm40`) carries what the search chose. The other
// kernel's block (v5.9 on the same VM) is then a prediction: nothing in the
// machine was chosen for it. The 16-vCPU guest of ../shared/hardware/ is
// fitted the same way (`kvm16`, to its saturated block), and its other
// command line is the prediction.
#pragma once

#include <array>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "histogram.hpp"
#include "machine.hpp"
#include "simulator.hpp"

namespace usched::sim {

inline constexpr std::array<double, 7> block_percentiles{50, 75, 90, 95, 99, 99.5, 99.9};

// A percentile block: the values at block_percentiles, in us.
struct percentile_block {
  std::array<double, 7> p{};
  double min = 0;
  double max = 0;
};

percentile_block block_of(const schbench::run_summary& s);

// The blocks of several runs: each number's median, least and greatest.
struct block_spread {
  percentile_block median;
  percentile_block lo;
  percentile_block hi;
};
block_spread spread_of(const std::vector<percentile_block>& runs);

// The mean of |log2(a/b)| over the seven percentiles (values under 1 us
// count as 1 us); worst_ratio() the largest of max(a/b, b/a).
double log_distance(const percentile_block& a, const percentile_block& b);
double worst_ratio(const percentile_block& a, const percentile_block& b);

// One run of a thread: its command line and machine, and its block.
struct thread_run {
  std::string what;       // the kernel and who ran it, in words
  std::string policy;     // the policy that stands for the kernel
  std::string machine;    // machine_named()
  std::string topology;   // --topology
  std::string schbench;   // the clone's flags, {r} for the run's seconds
  percentile_block block;
};

// Seed 000's runs on Chris Mason's 40-vCPU VM (v5.10-rc1 + the fix, the
// fitted run; v5.9 at 0b0695f2b34a, predicted).
thread_run seed000_fixed();
thread_run seed000_v5_9();

// The policy that stands for the 16-vCPU guest's kernel (Linux 6.18, whose
// fair class is EEVDF) wherever its blocks are measured against: the
// experiments' compared row and the default of `--calibrate --machine
// kvm16`: `eevdf`, the v6.18 discipline and balancer.
inline constexpr const char* hw16_policy = "eevdf";

// The 16-vCPU guest's runs (../shared/hardware/), schbench 93483e4 under
// `policy`: the saturated one (`-c 1000000 -s 1000`, the seed-000 shape at
// 16 CPUs), which `kvm16` is fitted to, and the default-think one (its 20 s
// report), a prediction. The 2020 schbench has no message-thread think, so
// the clone's lines carry `-C 0`.
thread_run hw16_sat(const std::string& policy = hw16_policy);
thread_run hw16_def(const std::string& policy = hw16_policy);

// What every kernel experiment runs: the kernel's settings
// (options::kernel_experiment(), whatever the environment says), then the
// machine on top (its idle spin included).
sim_config experiment_config(const std::string& topology, const std::string& policy, std::uint64_t seed,
                             const machine& m);
// with_runtime(): `s` with each {r} replaced by `runtime_s`.
std::string with_runtime(std::string s, std::uint64_t runtime_s);
// run_schbench_args(): the clone's flags `args` (whitespace-separated, the
// run's length already in) on `sim`, without interval blocks (-i 0).
schbench::run_summary run_schbench_args(simulator& sim, const std::string& args);

// simulate(): `run` under `m` for `seeds` seeds of `runtime_s` seconds each.
block_spread simulate(const thread_run& run, const machine& m, const std::vector<std::uint64_t>& seeds,
                      std::uint64_t runtime_s);

// What a fit searches: the wake-up's three medians and the spread, each
// over its values (the full grid, and the quick one), and a VM host's
// noise where the machine has one (an empty list holds the machine's own
// value): the deep C-state's chance and exit, the host's preemptions of a
// descheduled vCPU's CPU, and the steal on a running one.
struct calibration_grid {
  std::vector<std::int64_t> wakers;
  std::vector<std::int64_t> futexes;
  std::vector<std::int64_t> parked;
  std::vector<double> sigmas;
  std::vector<double> host_deep_ps;
  std::vector<std::int64_t> host_deep_exits;
  std::vector<double> host_preempts;
  std::vector<double> steals;
  // The number of grid points: the product of the lists' sizes, an empty
  // list counting once.
  std::size_t points() const noexcept;
};

// A machine's fit: the run it is fitted to and the run it then predicts
// (same machine, nothing chosen for it), and the grids. A joint fit
// (`kvm16`) is fitted to both runs at once, by the mean of their
// distances: one machine that explains two command lines.
struct calibration_target {
  thread_run fit;
  thread_run predict;
  calibration_grid grid;
  calibration_grid quick_grid;
  bool joint = false;
};

// calibration_machines() lists the machines --calibrate can fit, in order
// (the first is the default); calibration_for() returns one's target, its
// fitted run under `policy` (empty: the target's own), and for `kvm16`
// the predicted run too (the same kernel on another command line; `vm40`
// predicts another kernel, which stays its own). Throws
// std::invalid_argument (one line, naming the accepted machines) for a
// machine without a target.
std::vector<std::string> calibration_machines();
calibration_target calibration_for(const std::string& machine, const std::string& policy = {});

struct calibration_options {
  bool quick = false;  // 3 seeds of 10 s and a coarser grid; else 5 seeds of 30 s
  std::string machine = "vm40";  // the machine to fit (calibration_machines())
  std::string policy;            // the fitted run's policy (empty: the target's own)
};

// run_calibration(): the grid search on the target's fitted run, then the
// prediction of its other run with the chosen machine; the tables go to
// `out` (markdown), a line per grid point to `progress`. Returns 0. Throws
// what calibration_for() throws.
int run_calibration(const calibration_options& o, std::ostream& out, std::ostream& progress);

}  // namespace usched::sim
