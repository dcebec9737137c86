// engine.cpp: the engine's construction (its runqueues, the granularities
// scaled to the machine, the LLC and SMT maps of the wake-up placement,
// each level's balancing state) and its statistics.
#include "engine.hpp"

#include <algorithm>

namespace usched::detail {

engine::engine(domain_tree domains, std::unique_ptr<usched::policy> pol, engine_config cfg)
    : domains_(std::move(domains)),
      policy_(std::move(pol)),
      cfg_(cfg),
      traits_(policy_->traits()),
      fair_(traits_.discipline == queue_discipline::fair || traits_.discipline == queue_discipline::eevdf),
      eevdf_(traits_.discipline == queue_discipline::eevdf),
      lifo_(traits_.discipline == queue_discipline::lifo),
      tracks_load_(fair_ && cfg_.load_tracking),
      util_est_(tracks_load_ && traits_.util_est),
      keeps_cpu_load_(tracks_load_ && traits_.cpu_load_signal != weighted_load::none),
      rqs_(std::make_unique<runqueue[]>(domains_.nr_cpus())),
      counters_(std::make_unique<cpu_counters[]>(domains_.nr_cpus())) {
  // The granularities grow with the machine (update_sysctl()); sched_nr_
  // latency, their ratio, does not.
  const auto factor = static_cast<std::int64_t>(tunable_factor(cfg_.scaling, nr_cpus()));
  cfg_.sched_latency_ns *= factor;
  cfg_.min_granularity_ns *= factor;
  cfg_.wakeup_granularity_ns *= factor;
  nr_latency_ = static_cast<unsigned>(
      std::max<std::int64_t>(1, (cfg_.sched_latency_ns + cfg_.min_granularity_ns - 1) / std::max<std::int64_t>(1, cfg_.min_granularity_ns)));
  if (!fair_) {
    for (std::size_t c = 0; c < nr_cpus(); ++c) rqs_[c].slice_ns = cfg_.fifo_slice_ns;
  }
  // sched_slice() of n fibers of one weight, n up to sched_nr_latency: the
  // latency period shared n ways.
  equal_slice_.resize(std::min<std::size_t>(nr_latency_, max_equal_slice) + 1);
  for (std::size_t n = 1; n < equal_slice_.size(); ++n) {
    equal_slice_[n] = cfg_.sched_latency_ns / static_cast<std::int64_t>(n);
  }
  // The LLC and SMT maps of the wake-up placement's has_idle_cores hint.
  llc_level_.assign(nr_cpus(), -1);
  smt_siblings_.resize(nr_cpus());
  idle_cores_ = std::make_unique<std::atomic<bool>[]>(nr_cpus());
  for (std::size_t c = 0; c < nr_cpus(); ++c) {
    const auto& chain = domains_.per_cpu[c];
    for (std::size_t l = 0; l < chain.size(); ++l) {
      const sched_domain& sd = chain[l];
      if (sd.has_flag(SD_SHARE_PKG_RESOURCES)) llc_level_[c] = static_cast<int>(l);
      if (sd.has_flag(SD_SHARE_CPUCAPACITY) && smt_siblings_[c].empty()) smt_siblings_[c] = sd.span.get();
    }
    if (!smt_siblings_[c].empty()) smt_present_ = true;
    idle_cores_[c].store(true, std::memory_order_relaxed);
  }
  // As the kernel boots its runqueues (sched_init()).
  for (std::size_t c = 0; c < nr_cpus(); ++c) {
    rqs_[c].avg_idle.store(2 * cfg_.migration_cost_ns, std::memory_order_relaxed);
    rqs_[c].max_idle_balance_cost.store(cfg_.migration_cost_ns, std::memory_order_relaxed);
  }
  sd_state_.resize(nr_cpus());
  last_idle_kick_.assign(nr_cpus(), 0);
  level_counters_.resize(nr_cpus());
  for (std::size_t c = 0; c < nr_cpus(); ++c) {
    const auto& chain = domains_.per_cpu[c];
    sd_state_[c].resize(chain.size());
    for (std::size_t l = 0; l < chain.size(); ++l) {
      sd_state_[c][l].balance_interval_ns = static_cast<std::int64_t>(chain[l].min_interval_ms) * ns_per_ms;
    }
    level_counters_[c] = std::make_unique<level_counters[]>(chain.size());
  }
}

void engine::add_counters(int cpu, worker_stats& out) const {
  const cpu_counters& c = counters(cpu);
  out.newidle_attempts = c.newidle_attempts;
  out.newidle_skipped = c.newidle_skipped;
  out.newidle_pulls = c.newidle_pulls;
  out.fibers_pulled = c.fibers_pulled;
  out.wake_prev = c.wake_prev;
  out.wake_idle_sibling = c.wake_idle_sibling;
  out.wake_other = c.wake_other;
  out.wakeup_preemptions = c.wakeup_preemptions;
  out.tick_preemptions = c.tick_preemptions;
  out.active_pushes = c.active_pushes;
  out.active_abandoned = c.active_abandoned;
  out.handoffs = c.handoffs;
  for (std::size_t r = 0; r < wake_reason_count; ++r) {
    out.wakeups.n[r] = c.wakeups[r];
    const latency_counters& lc = c.wake_latency[r];
    latency_histogram& h = out.wake_latencies[r];
    for (std::size_t b = 0; b < latency_histogram::bucket_count; ++b) {
      h.buckets[b] = lc.buckets[b];
      h.count += h.buckets[b];
    }
    h.sum_ns = lc.sum_ns;
    h.max_ns = lc.max_ns;
  }
  const auto& chain = domains_.per_cpu[static_cast<std::size_t>(cpu)];
  for (std::size_t l = 0; l < chain.size(); ++l) {
    const level_counters& lc = counters(cpu, l);
    domain_level_stats d;
    d.level = to_string(chain[l].level);
    d.attempts = lc.attempts;
    d.balanced = lc.balanced;
    d.successes = lc.successes;
    d.failures = lc.failures;
    d.moved_load = lc.moved[static_cast<std::size_t>(migration_type::migrate_load)];
    d.moved_util = lc.moved[static_cast<std::size_t>(migration_type::migrate_util)];
    d.moved_task = lc.moved[static_cast<std::size_t>(migration_type::migrate_task)];
    d.moved_misfit = lc.moved[static_cast<std::size_t>(migration_type::migrate_misfit)];
    d.odd_picks = lc.odd_picks;
    out.levels.push_back(std::move(d));
  }
}

}  // namespace usched::detail
