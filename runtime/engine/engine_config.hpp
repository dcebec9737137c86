// engine_config.hpp: the engine's tunables, and how a runtime's options
// fill them. Times are kept in nanoseconds; the domains give their balance
// intervals in milliseconds (ns_per_ms).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include <usched/options.hpp>

namespace usched::detail {

// Balance intervals are kept in ns; the domains give them in ms.
inline constexpr std::int64_t ns_per_ms = 1'000'000;

// How the CFS granularities grow with the number of CPUs is the options'
// tunable_scaling (the kernel's sysctl_sched_tunable_scaling,
// SCHED_TUNABLESCALING_*).
using tunable_scaling = usched::options::tunable_scaling;

// tunable_factor() is the kernel's get_update_sysctl_factor(): CPUs beyond
// 8 do not stretch the granularities further.
constexpr unsigned tunable_factor(tunable_scaling s, std::size_t nr_cpus) noexcept {
  const unsigned cpus = nr_cpus < 8 ? static_cast<unsigned>(nr_cpus < 1 ? 1 : nr_cpus) : 8u;
  switch (s) {
    case tunable_scaling::none:
      return 1;
    case tunable_scaling::linear:
      return cpus;
    case tunable_scaling::log:
    default: {
      unsigned log2 = 0;
      while ((2u << log2) <= cpus) ++log2;
      return 1 + log2;
    }
  }
}

// The EEVDF discipline's switches (the kernel's SCHED_FEAT of the same
// names, kernel/sched/features.h of v6.18), bits of
// engine_config::eevdf_features. All on by default, as in the kernel.
enum eevdf_feature : unsigned {
  // A woken or moved fiber keeps its lag: it is placed that far from the
  // queue's average vruntime, the lag inflated by (W + w) / W so that it
  // is the same after it joins (v6.6, "sched/fair: Commit to lag based
  // placement"). Off: every placement is at the average.
  feat_place_lag = 1u << 0,
  // A new fiber's first deadline is half a slice away (v6.6).
  feat_place_deadline_initial = 1u << 1,
  // A fiber moved by balancing keeps its deadline relative to its
  // vruntime (v6.12, "sched/fair: Avoid re-setting virtual deadline on
  // 'migrations'"). Off: it gets a fresh one.
  feat_place_rel_deadline = 1u << 2,
  // The running fiber is not preempted by a wake-up before its protected
  // vruntime: its deadline, or the smallest slice queued if that is
  // shorter (v6.6, "sched/eevdf: Curb wakeup-preemption"; the smallest
  // slice since v6.17). Off: it is protected for the normalized base
  // slice at most.
  feat_run_to_parity = 1u << 3,
  // A woken fiber that asked for a shorter slice than the running one
  // preempts it through the protection (v6.12, "sched/eevdf: Allow
  // shorter slices to wakeup-preempt").
  feat_preempt_short = 1u << 4,
  // A fiber that blocks with negative lag stays queued, not runnable,
  // until it is eligible again (v6.12, "sched/fair: Implement delayed
  // dequeue"): it cannot shed its debt by sleeping.
  feat_delay_dequeue = 1u << 5,
  // A delayed fiber that is dequeued or woken with positive lag has it
  // set to 0 (v6.12).
  feat_delay_zero = 1u << 6,
};
inline constexpr unsigned eevdf_features_all = (1u << 7) - 1;
static_assert(eevdf_features_all == usched::options{}.eevdf_features, "every switch on by default");

// Tunables of the engine, filled from usched::options by engine_config_of()
// (the real backend, and the simulator from its options). Its own defaults
// are those of engine_config_of(usched::options{}), the embedder's, so an
// engine made without options behaves as a runtime made with the defaults;
// a caller that wants the kernel's settings asks for them
// (engine_config_of(usched::options::kernel_experiment())) or sets the
// field.
struct engine_config {
  // CFS discipline: the kernel's normalized granularities (normalized_
  // sysctl_sched_latency and friends), which the engine multiplies by
  // tunable_factor(scaling, its CPUs) when it is made; config() returns
  // the scaled values. With the default log scaling 8 or more CPUs get the
  // kernel's 24 ms, 3 ms and 4 ms (docs/policies/cfs.md).
  std::int64_t sched_latency_ns = 6'000'000;
  std::int64_t min_granularity_ns = 750'000;
  std::int64_t wakeup_granularity_ns = 1'000'000;
  tunable_scaling scaling = tunable_scaling::log;
  // EEVDF discipline: the base slice, the kernel's normalized
  // sysctl_sched_base_slice (0.7 ms), scaled like the granularities above
  // (2.8 ms at 8 or more CPUs), and the switches (eevdf_feature).
  std::int64_t base_slice_ns = 700'000;
  unsigned eevdf_features = eevdf_features_all;
  // A fiber that ran less than this ago is cache-hot: balancing leaves it
  // while nr_balance_failed <= cache_nice_tries (sysctl_sched_migration_cost).
  std::int64_t migration_cost_ns = 500'000;
  // Fixed slice of the FIFO discipline (options::slice).
  std::int64_t fifo_slice_ns = 3'000'000;
  // PELT load tracking for the fair discipline (options::load_tracking).
  bool load_tracking = true;
  // What a newly-idle balance pass at a level costs, for the rationing of
  // the policies that ration it (policy_traits::rations_newidle): measured with
  // the event's clock when it has one (the real backend), else this many
  // nanoseconds per worker in the level's span (the simulator's
  // `balance_pass` cost).
  std::int64_t balance_pass_per_cpu_ns = 0;
  // What select_idle_cpu() counts a worker of its scan as costing, for
  // SIS_PROP's scan-cost average (the kernel times the scan; a scan here
  // reads snapshots, and this is what a balance pass spends per worker).
  std::int64_t wake_scan_per_cpu_ns = 30;
  // The scheduler tick: how often a running worker does its periodic work
  // (load tracking of the running fiber, periodic balance), like HZ=1000.
  std::int64_t tick_ns = 1'000'000;
  // The nohz idle-balance kick: a busy worker with fibers queued behind it
  // wakes a parked worker to balance at most this often (the kernel kicks
  // its nohz balancer at most once per jiffy; 4 ms is a jiffy at HZ=250).
  std::int64_t idle_kick_interval_ns = 4'000'000;
  // The join hand-off (options::join_handoff): a fiber that joins one
  // queued on its own worker hands the worker to it, and a fiber that exits
  // hands its worker back to a joiner that last ran there, so fork-join
  // code runs depth-first under every discipline. The kernel has no join;
  // off, a joiner blocks and is woken like any other waiter.
  bool join_handoff = true;
  // Fork balancing (options::fork_balance): a spawn asks the policy where
  // the new fiber goes (the kernel's SD_BALANCE_FORK, find_idlest_cpu()).
  // Off, a spawn from a worker stays on it.
  bool fork_balance = false;

  bool operator==(const engine_config&) const = default;
};

// engine_config_of() is the engine's configuration for a runtime's options
// (the real backend and the simulator both start from it); the constants
// that are no option keep their defaults.
inline engine_config engine_config_of(const usched::options& o) {
  using std::chrono::duration_cast;
  using std::chrono::nanoseconds;
  engine_config c;
  c.fifo_slice_ns = duration_cast<nanoseconds>(o.slice).count();
  c.load_tracking = o.load_tracking;
  c.sched_latency_ns = duration_cast<nanoseconds>(o.cfs_latency).count();
  c.min_granularity_ns = duration_cast<nanoseconds>(o.cfs_min_granularity).count();
  c.wakeup_granularity_ns = duration_cast<nanoseconds>(o.cfs_wakeup_granularity).count();
  c.join_handoff = o.join_handoff;
  c.fork_balance = o.fork_balance;
  c.scaling = o.cfs_tunable_scaling;
  c.base_slice_ns = duration_cast<nanoseconds>(o.eevdf_base_slice).count();
  c.eevdf_features = o.eevdf_features;
  return c;
}

}  // namespace usched::detail
