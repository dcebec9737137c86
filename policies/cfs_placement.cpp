// cfs_placement.cpp: CFS wake and spawn placement (see cfs_placement.hpp).
// Each function mirrors the kernel function of the same name in
// kernel/sched/fair.c (v5.10); where usched lacks the kernel's input, the
// header says what stands in for it.
#include "cfs_placement.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <vector>

namespace usched::cfs {

namespace {

using wide = std::int64_t;  // the kernel's s64 for the effective-load products

bool valid_cpu(const placement_request& req, int cpu) noexcept {
  return cpu >= 0 && static_cast<std::size_t>(cpu) < req.cpus.size();
}

const cpu_snapshot& snap(const placement_request& req, int cpu) noexcept {
  return req.cpus[static_cast<std::size_t>(cpu)];
}

// available_idle_cpu(): running nothing and nothing queued.
bool idle_cpu(const placement_request& req, int cpu) noexcept {
  const cpu_snapshot& s = snap(req, cpu);
  return s.idle && s.nr_running == 0;
}

bool idle_cpu_of(const placement_request& req, int cpu) noexcept { return idle_cpu(req, cpu); }

// True when the request carries a domain tree that matches its snapshots.
bool has_tree(const placement_request& req) noexcept {
  return req.domains != nullptr && req.domains->nr_cpus() == req.cpus.size() && !req.cpus.empty();
}

const std::vector<sched_domain>& chain_of(const placement_request& req, int cpu) {
  return req.domains->per_cpu[static_cast<std::size_t>(cpu)];
}

bool in_span(const std::vector<int>& span, int cpu) {
  return std::binary_search(span.begin(), span.end(), cpu);
}

// The kernel's sd_llc: the widest domain of cpu's chain whose groups share a
// cache, or nullptr when cpu's last-level cache is its own.
const sched_domain* llc_domain(const placement_request& req, int cpu) {
  const sched_domain* llc = nullptr;
  for (const sched_domain& sd : chain_of(req, cpu)) {
    if (sd.has_flag(SD_SHARE_PKG_RESOURCES)) {
      llc = &sd;
    }
  }
  return llc;
}

// cpus_share_cache(): the same worker, or both inside a's LLC domain.
bool share_cache(const placement_request& req, int a, int b) {
  if (a == b) {
    return true;
  }
  const sched_domain* llc = llc_domain(req, a);
  return llc != nullptr && in_span(llc->span, b);
}

// cpu_smt_mask(): the workers on cpu's core (the span of its SMT level), or
// null when it shares its core with no other worker.
const std::vector<int>* smt_siblings(const placement_request& req, int cpu) {
  for (const sched_domain& sd : chain_of(req, cpu)) {
    if (sd.has_flag(SD_SHARE_CPUCAPACITY)) {
      return &sd.span.get();
    }
  }
  return nullptr;
}

// for_each_cpu_wrap(): visit `span` from the first worker >= start,
// wrapping around; `visit` returns true to stop. No allocation: this is the
// wake-up path.
template <class Visit>
void for_each_wrap(const std::vector<int>& span, int start, Visit&& visit) {
  const auto n = span.size();
  const auto first = static_cast<std::size_t>(std::lower_bound(span.begin(), span.end(), start) - span.begin());
  for (std::size_t k = 0; k < n; ++k) {
    if (visit(span[(first + k) % n])) return;
  }
}

// The position of `cpu` in the wrap order of `span` from `start`.
std::size_t wrap_position(const std::vector<int>& span, int start, int cpu) {
  const auto n = span.size();
  const auto first = static_cast<std::size_t>(std::lower_bound(span.begin(), span.end(), start) - span.begin());
  const auto at = static_cast<std::size_t>(std::lower_bound(span.begin(), span.end(), cpu) - span.begin());
  return (at + n - first) % n;
}

// select_idle_core(): the first core of the LLC (in scan order from target)
// all of whose workers are idle; returns the worker through which the scan
// reached it. Only on machines with SMT (sched_smt_present), and only while
// the LLC's has_idle_cores hint is set: a scan that finds no idle core
// clears it (set_idle_cores(target, 0)); a worker going idle with every
// sibling idle sets it again (the engine).
// sched_smt_present, as far as the LLC shows it: some worker of it shares
// its core.
bool llc_has_smt(const placement_request& req, const sched_domain& llc) {
  return std::any_of(llc.span.begin(), llc.span.end(), [&](int cpu) { return smt_siblings(req, cpu) != nullptr; });
}

// Whether the scan from `start` reaches `core` after another worker of its
// SMT core: the core was judged then (the kernel drops the core's mask
// from the scan).
bool core_seen_before(const placement_request& req, const sched_domain& llc, int start, int core) {
  const std::vector<int>* siblings = smt_siblings(req, core);
  if (siblings == nullptr) return false;
  const std::size_t here = wrap_position(llc.span, start, core);
  return std::any_of(siblings->begin(), siblings->end(), [&](int s) {
    return s != core && in_span(llc.span, s) && wrap_position(llc.span, start, s) < here;
  });
}

int select_idle_core(const placement_request& req, const sched_domain& llc, int target) {
  const bool smt_present = llc_has_smt(req, llc);
  if (!smt_present || !snap(req, target).llc_has_idle_cores) {
    return -1;
  }
  int found = -1;
  for_each_wrap(llc.span, target, [&](int core) {
    const std::vector<int>* siblings = smt_siblings(req, core);
    if (siblings == nullptr) {
      if (idle_cpu(req, core)) found = core;
      return found >= 0;
    }
    // Each core is judged once, through the first of its workers the scan
    // meets (the kernel drops the core's mask from the scan).
    const std::size_t here = wrap_position(llc.span, target, core);
    for (const int s : *siblings) {
      if (s != core && in_span(llc.span, s) && wrap_position(llc.span, target, s) < here) return false;
    }
    if (std::all_of(siblings->begin(), siblings->end(), [&](int cpu) { return idle_cpu(req, cpu); })) {
      found = core;
    }
    return found >= 0;
  });
  if (found < 0 && req.effects != nullptr) req.effects->clear_idle_cores = target;
  return found;
}

// select_idle_smt(): an idle SMT sibling of target inside the LLC, from the
// lowest.
int select_idle_smt(const placement_request& req, const sched_domain& llc, int target) {
  const std::vector<int>* siblings = smt_siblings(req, target);
  if (siblings == nullptr) return -1;
  for (const int cpu : *siblings) {
    if (in_span(llc.span, cpu) && idle_cpu(req, cpu)) {
      return cpu;
    }
  }
  return -1;
}

// The margin by which a remote group must be lighter before a new fiber
// leaves the local group: the kernel's scale_load_down(NICE_0_LOAD) *
// (imbalance_pct - 100) / 100, i.e. 174 at pct 117.
unsigned long idlest_imbalance(unsigned pct) {
  return capacity_scale * (pct - 100) / 100;
}

// task_weight() stand-in: see numa_score_preferred.
long numa_score(int preferred_node, int node) {
  return preferred_node >= 0 && preferred_node == node ? numa_score_preferred : 0;
}

// The numa_stats the kernel gathers per node: sum of runnable load and of
// capacity over the node's workers.
struct node_stats {
  long load = 0;
  long capacity = 0;
};

node_stats node_stats_of(const placement_request& req, int node) {
  node_stats ns;
  for (const cpu_snapshot& s : req.cpus) {
    if (s.numa_node == node) {
      ns.load += static_cast<long>(s.runnable_load);
      ns.capacity += static_cast<long>(s.capacity);
    }
  }
  return ns;
}

int first_valid(const placement_request& req, int a, int b) {
  if (valid_cpu(req, a)) return a;
  if (valid_cpu(req, b)) return b;
  return 0;
}

}  // namespace

// select_idle_cpu(): the first idle worker of the LLC, scanning from target
// and wrapping. SIS_PROP bounds the scan by what the waker can afford: its
// average idle period / 512 per worker of the span against the average cost
// of a scan, at least 4 (a pre-decremented count, so at most nr - 1 are
// examined); only a scan that was not cut short joins that average.
int select_idle_cpu(const placement_request& req, const sched_domain& llc, int target) {
  long nr = std::numeric_limits<long>::max();
  const int waker = req.origin;
  if (valid_cpu(req, waker)) {
    const std::int64_t avg_idle = snap(req, waker).avg_idle_ns / 512;
    const std::int64_t avg_cost = snap(req, waker).avg_scan_cost_ns + 1;
    const std::int64_t span_avg = static_cast<std::int64_t>(llc.span.size()) * avg_idle;
    nr = span_avg > 4 * avg_cost ? static_cast<long>(span_avg / avg_cost) : 4;
  }
  int found = -1;
  bool cut = false;
  int examined = 0;
  for_each_wrap(llc.span, target, [&](int cpu) {
    if (--nr == 0) {
      cut = true;
      return true;
    }
    ++examined;
    if (idle_cpu(req, cpu)) found = cpu;
    return found >= 0;
  });
  if (!cut && valid_cpu(req, waker) && req.effects != nullptr) req.effects->scanned = examined;
  return found;
}

int nr_idle_scan(const placement_request& req, const sched_domain& llc) {
  const auto llc_weight = static_cast<std::uint64_t>(llc.span.size());
  if (llc_weight == 0) return 0;
  std::uint64_t sum_util = 0;
  for (const int cpu : llc.span) sum_util += snap(req, cpu).util_avg;
  // update_idle_cpu_scan(): y = 1024 - x^2 x pct^2 / (10000 x 1024), with x
  // the LLC's util per worker, scales the LLC's weight. At x = 1024 x
  // 100 / pct, the util of an overloaded LLC group, y reaches 0.
  const std::uint64_t x = sum_util / llc_weight;
  const std::uint64_t pct = llc.imbalance_pct;
  const std::uint64_t tmp = std::min<std::uint64_t>(x * x * pct * pct / (10000 * capacity_scale), capacity_scale);
  return static_cast<int>((capacity_scale - tmp) * llc_weight / capacity_scale);
}

int select_idle_cpu_v6(const placement_request& req, const sched_domain& llc, int target, bool has_idle_core,
                       const cfs_features& f) {
  long nr = std::numeric_limits<long>::max();
  if (f.sis_util) {
    // Plus one, because the scan stops at !--nr; an LLC too busy to have an
    // idle worker is not scanned at all.
    nr = nr_idle_scan(req, llc) + 1;
    if (nr == 1) return -1;
  }
  int idle_cpu = -1;
  int core_found = -1;
  bool cut = false;
  const int start = target + 1;
  for_each_wrap(llc.span, start, [&](int cpu) {
    if (has_idle_core) {
      if (core_seen_before(req, llc, start, cpu)) return false;
      // select_idle_core(): the core if every thread idles; on the way the
      // first idle thread of the first core that has one, for later.
      const std::vector<int>* siblings = smt_siblings(req, cpu);
      const std::vector<int> alone{cpu};
      bool idle = true;
      for (const int s : siblings != nullptr ? *siblings : alone) {
        if (!idle_cpu_of(req, s)) {
          idle = false;
          if (idle_cpu == -1) continue;
          break;
        }
        if (idle_cpu == -1 && in_span(llc.span, s)) idle_cpu = s;
      }
      if (idle) core_found = cpu;
      return idle;
    }
    if (--nr <= 0) {
      cut = true;
      return true;
    }
    if (idle_cpu_of(req, cpu)) idle_cpu = cpu;
    return idle_cpu >= 0;
  });
  if (core_found >= 0) return core_found;
  if (cut) return -1;
  // A full core scan that found none clears the hint.
  if (has_idle_core && req.effects != nullptr) req.effects->clear_idle_cores = target;
  return idle_cpu;
}

int select_idle_sibling(const placement_request& req, int prev, int target, const cfs_features& f) {
  if (idle_cpu(req, target)) {
    return target;
  }
  if (!has_tree(req)) {
    return target;
  }
  // A cache-affine idle prev: the fiber's data may still be warm there.
  if (valid_cpu(req, prev) && prev != target && share_cache(req, prev, target) &&
      idle_cpu(req, prev)) {
    return prev;
  }
  // A worker the fiber was recently woken towards, idle and cache-affine:
  // it takes that, and prev becomes the candidate for the next wake-up.
  const int recent = req.fiber.recent_used_cpu;
  // v5.16: prev becomes the candidate for the next wake-up whether or not
  // the recent worker is taken.
  if (f.recent_used_cpu_prev && valid_cpu(req, prev) && req.effects != nullptr) {
    req.effects->fiber_recent_used_cpu = prev;
  }
  if (valid_cpu(req, recent) && recent != prev && recent != target && share_cache(req, recent, target) &&
      idle_cpu(req, recent)) {
    if (req.effects != nullptr) req.effects->fiber_recent_used_cpu = prev;
    return recent;
  }
  const sched_domain* llc = llc_domain(req, target);
  if (llc == nullptr) {
    return target;
  }
  if (f.sis_merged_scan) {
    const bool has_idle_core = llc_has_smt(req, *llc) && snap(req, target).llc_has_idle_cores;
    // No idle core to hope for: a thread of prev's core, whose caches the
    // fiber may still warm, if one idles.
    if (!has_idle_core && valid_cpu(req, prev) && share_cache(req, prev, target)) {
      if (const int cpu = select_idle_smt(req, *llc, prev); cpu >= 0) return cpu;
    }
    const int cpu = select_idle_cpu_v6(req, *llc, target, has_idle_core, f);
    return cpu >= 0 ? cpu : target;
  }
  if (f.sis_util) {
    // SIS_UTIL on v5.10's sequence: the idle-worker scan bounded by the
    // LLC's util instead of SIS_PROP.
    if (const int core = select_idle_core(req, *llc, target); core >= 0) return core;
    if (const int cpu = select_idle_cpu_v6(req, *llc, target - 1, false, f); cpu >= 0) return cpu;
    if (const int cpu = select_idle_smt(req, *llc, target); cpu >= 0) return cpu;
    return target;
  }
  // A whole idle core first: an idle PU whose sibling is busy shares its
  // execution units, so the fiber would run at a fraction of its speed.
  if (const int core = select_idle_core(req, *llc, target); core >= 0) {
    return core;
  }
  if (const int cpu = select_idle_cpu(req, *llc, target); cpu >= 0) {
    return cpu;
  }
  if (const int cpu = select_idle_smt(req, *llc, target); cpu >= 0) {
    return cpu;
  }
  return target;
}

int wake_affine(const placement_request& req, const sched_domain& sd, int this_cpu, int prev_cpu,
                const cfs_features& f) {
  // WA_IDLE. An idle waker means the wake-up came from outside any fiber
  // (a timer, I/O completion); moving next to it only pays when the caches
  // are shared, and then an idle prev is better still: no migration at all.
  if (idle_cpu(req, this_cpu) && share_cache(req, this_cpu, prev_cpu)) {
    return idle_cpu(req, prev_cpu) ? prev_cpu : this_cpu;
  }

  // WA_WEIGHT with WA_BIAS (wake_affine_weight(), v5.9/v5.10): compare the
  // waker's load with the fiber added against prev's load with the fiber
  // taken out, each scaled by the other side's capacity, prev's side
  // inflated by half the domain's imbalance margin so that ties and
  // near-ties keep the fiber where its cache is. The loads are cpu_load(),
  // load_avg since v5.7: prev's still holds the sleeping fiber's blocked
  // load, which is why it is subtracted there (task_h_load(p)). No usched
  // wake-up promises that the waker sleeps next (WF_SYNC), so the waker's
  // own load is never taken out.
  const unsigned pct = f.imbalance_pct(sd);
  const wide task_load = static_cast<wide>(req.fiber.load_avg);
  wide this_eff_load = static_cast<wide>(snap(req, this_cpu).load_avg) + task_load;
  this_eff_load *= 100;
  this_eff_load *= static_cast<wide>(snap(req, prev_cpu).capacity);

  wide prev_eff_load = static_cast<wide>(snap(req, prev_cpu).load_avg) - task_load;
  prev_eff_load *= 100 + (static_cast<wide>(pct) - 100) / 2;
  prev_eff_load *= static_cast<wide>(snap(req, this_cpu).capacity);

  return this_eff_load < prev_eff_load ? this_cpu : prev_cpu;
}

sg_lb_stats update_sg_wakeup_stats(const placement_request& req, const sched_domain& sd,
                                   const sched_group& g, const cfs_features& f) {
  sg_lb_stats s;
  for (const int cpu : g.cpus) {
    const cpu_snapshot& c = snap(req, cpu);
    s.group_load += c.load_avg;
    s.group_util += c.util_avg;
    s.group_runnable += c.runnable_avg;
    s.group_capacity += c.capacity;
    s.sum_nr_running += c.nr_running;
    if (idle_cpu(req, cpu)) {
      ++s.idle_cpus;
    }
  }
  s.group_weight = static_cast<unsigned>(g.cpus.size());
  s.type = group_classify(f.imbalance_pct(sd), s);
  // avg_load only means something for groups without spare capacity: a group
  // with idle room is judged by its idle workers, not by its load.
  if ((s.type == group_type::fully_busy || s.type == group_type::overloaded) &&
      s.group_capacity > 0) {
    s.avg_load = s.group_load * capacity_scale / s.group_capacity;
  }
  return s;
}

bool update_pick_idlest(const sg_lb_stats& idlest, const sg_lb_stats& candidate, const cfs_features& f) {
  if (candidate.type < idlest.type) return true;
  if (candidate.type > idlest.type) return false;

  switch (candidate.type) {
    case group_type::overloaded:
    case group_type::fully_busy:
      // The lowest average load wins; equal keeps the first found.
      return idlest.avg_load > candidate.avg_load;
    case group_type::imbalanced:
    case group_type::asym_packing:
    case group_type::misfit_task:
      // Not produced on the spawn path (update_sg_wakeup_stats).
      return false;
    case group_type::has_spare:
      // Most idle workers wins.
      if (idlest.idle_cpus > candidate.idle_cpus) return false;
      if (idlest.idle_cpus == candidate.idle_cpus) {
        // seeds/004: with equal idle workers, the group with strictly less
        // utilization has more spare room for the new fiber; the kernel
        // before v5.10 kept the first group found, which packs new tasks
        // onto fewer CPUs (what Mel Gorman's fork_test and gitsource runs
        // preferred on machines without schedutil).
        if (!f.idlest_util_tiebreak) return false;
        if (idlest.group_util <= candidate.group_util) return false;
      }
      return true;
  }
  return false;
}

const sched_group* find_idlest_group(const placement_request& req, const sched_domain& sd,
                                     int this_cpu, const cfs_features& f) {
  const unsigned pct = f.imbalance_pct(sd);
  const unsigned long imbalance = idlest_imbalance(pct);
  const bool has_local = this_cpu >= 0 && in_span(sd.span, this_cpu);

  const sched_group* idlest = nullptr;
  const sched_group* local = nullptr;
  sg_lb_stats idlest_sgs;
  idlest_sgs.avg_load = std::numeric_limits<unsigned>::max();  // the kernel's UINT_MAX start
  idlest_sgs.type = group_type::overloaded;
  sg_lb_stats local_sgs;

  // The kernel's group ring starts at the local group and wraps in cpu order.
  const std::size_t n = sd.groups.size();
  const std::size_t start = has_local ? sd.local_group : 0;
  for (std::size_t k = 0; k < n; ++k) {
    const sched_group& g = sd.groups[(start + k) % n];
    if (g.cpus.empty()) {
      continue;
    }
    const sg_lb_stats s = update_sg_wakeup_stats(req, sd, g, f);
    if (has_local && in_span(g.cpus, this_cpu)) {
      local = &g;
      local_sgs = s;
    } else if (idlest == nullptr || update_pick_idlest(idlest_sgs, s, f)) {
      idlest = &g;
      idlest_sgs = s;
    }
  }

  if (idlest == nullptr) return nullptr;
  if (local == nullptr) return idlest;
  if (local_sgs.type < idlest_sgs.type) return nullptr;
  if (local_sgs.type > idlest_sgs.type) return idlest;

  switch (local_sgs.type) {
    case group_type::overloaded:
    case group_type::fully_busy:
      // Across NUMA nodes the margin counts against the remote group: a
      // lightly loaded local node must not lose the fiber to a remote one
      // that only looks better by less than the margin.
      if (sd.has_flag(SD_NUMA) && idlest_sgs.avg_load + imbalance >= local_sgs.avg_load) {
        return nullptr;
      }
      if (idlest_sgs.avg_load >= local_sgs.avg_load + imbalance) return nullptr;
      if (100 * local_sgs.avg_load <= pct * idlest_sgs.avg_load) return nullptr;
      break;
    case group_type::imbalanced:
    case group_type::asym_packing:
    case group_type::misfit_task:
      return nullptr;
    case group_type::has_spare:
      if (sd.has_flag(SD_NUMA)) {
        const int preferred = req.fiber.preferred_node;
        if (preferred >= 0) {
          // Spare room on both sides: go (or stay) where the fiber's memory is.
          if (snap(req, this_cpu).numa_node == preferred) return nullptr;
          if (snap(req, idlest->cpus.front()).numa_node == preferred) return idlest;
        }
        // Otherwise stay on the spawner's node, near the data it is about to
        // share with the new fiber; the periodic balancer spreads if needed.
        if (f.imb_numa_nr) {
          // v5.18: only while the node stays lightly loaded (imb_numa_nr,
          // at most the local group's weight: the kernel's cpus_ptr
          // intersection, which every fiber's affinity spans) and the
          // idle workers differ by at most 2.
          const unsigned imb_numa_nr =
              std::min(static_cast<unsigned>(local->cpus.size()), sd.imb_numa_nr);
          const long idle_diff = std::labs(static_cast<long>(local_sgs.idle_cpus) -
                                           static_cast<long>(idlest_sgs.idle_cpus));
          if (adjust_numa_imbalance_v6(idle_diff, local_sgs.sum_nr_running + 1, imb_numa_nr) == 0) return nullptr;
        } else if (local_sgs.idle_cpus > 0) {
          return nullptr;
        }
      }
      if (local_sgs.idle_cpus >= idlest_sgs.idle_cpus) return nullptr;
      break;
  }
  return idlest;
}

int find_idlest_group_cpu(const placement_request& req, const sched_group& g, int this_cpu) {
  if (g.cpus.size() == 1) {
    return g.cpus.front();
  }
  // The kernel's first test, sched_idle_cpu() (a CPU running only
  // SCHED_IDLE tasks is taken at once), never holds: fibers have no such
  // class.
  std::int64_t min_exit_latency = std::numeric_limits<std::int64_t>::max();
  std::int64_t latest_idle_stamp = 0;
  int shallowest_idle_cpu = -1;
  int least_loaded = this_cpu;
  unsigned long min_load = std::numeric_limits<unsigned long>::max();
  for (const int cpu : g.cpus) {
    const cpu_snapshot& s = snap(req, cpu);
    if (idle_cpu(req, cpu)) {
      if (s.idle_exit_latency_ns < min_exit_latency) {
        // The shallowest idle state wins whatever the stamps say: waking
        // the fiber's worker costs its exit latency.
        min_exit_latency = s.idle_exit_latency_ns;
        latest_idle_stamp = s.idle_stamp_ns;
        shallowest_idle_cpu = cpu;
      } else if (s.idle_exit_latency_ns == min_exit_latency && s.idle_stamp_ns > latest_idle_stamp) {
        // Among equally deep ones, the most recently idled: its cache may
        // still be warm.
        latest_idle_stamp = s.idle_stamp_ns;
        shallowest_idle_cpu = cpu;
      }
    } else if (shallowest_idle_cpu == -1) {
      // Loads count only until an idle worker is found: any idle one beats
      // every busy one.
      if (s.load_avg < min_load) {
        min_load = s.load_avg;
        least_loaded = cpu;
      }
    }
  }
  return shallowest_idle_cpu != -1 ? shallowest_idle_cpu : least_loaded;
}

int find_idlest_cpu(const placement_request& req, int this_cpu, const cfs_features& f) {
  if (!has_tree(req)) {
    return first_valid(req, this_cpu, -1);
  }
  int cpu = valid_cpu(req, this_cpu) ? this_cpu : -1;
  int new_cpu = cpu;
  // The current level as (chain owner, index in its chain); -1 = below the
  // narrowest level, the search is over.
  int owner = cpu >= 0 ? cpu : 0;
  int level = static_cast<int>(chain_of(req, owner).size()) - 1;

  while (level >= 0) {
    const sched_domain& sd = chain_of(req, owner)[static_cast<std::size_t>(level)];
    const sched_group* group = find_idlest_group(req, sd, cpu, f);
    if (group == nullptr) {
      --level;  // the local group stays: look inside it, one level down
      continue;
    }
    new_cpu = find_idlest_group_cpu(req, *group, cpu);
    if (new_cpu == cpu) {
      --level;
      continue;
    }
    // Continue in new_cpu's own hierarchy, at its widest level narrower than
    // the one just decided.
    const std::size_t weight = sd.span.size();
    cpu = new_cpu;
    owner = new_cpu;
    level = -1;
    const std::vector<sched_domain>& chain = chain_of(req, owner);
    for (std::size_t i = 0; i < chain.size() && chain[i].span.size() < weight; ++i) {
      level = static_cast<int>(i);
    }
  }
  return new_cpu >= 0 ? new_cpu : 0;
}

bool load_too_imbalanced(long src_load, long dst_load, long src_capacity, long dst_capacity,
                         long orig_src_load, long orig_dst_load) noexcept {
  // Loads are compared capacity-scaled (src/src_cap vs dst/dst_cap) by
  // cross-multiplying. Refuse a move that leaves the nodes further apart
  // than they were: NUMA placement must not fight the load balancer.
  const wide imb = static_cast<wide>(dst_load) * src_capacity -
                   static_cast<wide>(src_load) * dst_capacity;
  const wide old_imb = static_cast<wide>(orig_dst_load) * src_capacity -
                       static_cast<wide>(orig_src_load) * dst_capacity;
  return (imb < 0 ? -imb : imb) > (old_imb < 0 ? -old_imb : old_imb);
}

numa_choice task_numa_find_cpu(const placement_request& req, int src_node, int dst_node,
                               const cfs_features& f, bool fiber_on_src) {
  numa_choice best;
  if (src_node == dst_node || req.cpus.empty()) {
    return best;
  }
  const node_stats src = node_stats_of(req, src_node);
  const node_stats dst = node_stats_of(req, dst_node);
  if (dst.capacity == 0) {
    return best;
  }
  const int preferred = req.fiber.preferred_node;
  const long load = static_cast<long>(req.fiber.load_avg);
  // The fiber is counted where it would otherwise run (see the header);
  // a running fiber already is.
  const long src_load = fiber_on_src ? src.load : src.load + load;
  const long dst_load = dst.load;

  const long taskimp = numa_score(preferred, dst_node) - numa_score(preferred, src_node);
  const long moveimp = taskimp;
  // Whether moving the fiber alone keeps the nodes balanced; decided once
  // per search, as the kernel does since "Evaluate move once per node".
  const bool maymove = !load_too_imbalanced(src_load - load, dst_load + load, src.capacity,
                                            dst.capacity, src_load, dst_load);

  // Where a move lands: the node's first idle worker when it has one (v5.10
  // caches it in numa_stats.idle_cpu), else select_idle_sibling() around the
  // busy worker the move was decided on (the source node shares no cache
  // with dst_node, so prev never applies). For an idle worker taken by the
  // walk below the two agree: the walk takes the first idle worker or none,
  // because maymove is fixed and the best improvement only grows.
  int first_idle = -1;
  for (std::size_t i = 0; i < req.cpus.size() && first_idle < 0; ++i) {
    if (req.cpus[i].numa_node == dst_node && idle_cpu(req, static_cast<int>(i))) {
      first_idle = static_cast<int>(i);
    }
  }
  const auto move_to = [&](int cpu) {
    best.cpu = first_idle >= 0 ? first_idle : select_idle_sibling(req, -1, cpu, f);
    best.swap = false;
    best.imp = moveimp;
  };

  for (std::size_t i = 0; i < req.cpus.size(); ++i) {
    const int cpu = static_cast<int>(i);
    const cpu_snapshot& s = req.cpus[i];
    if (s.numa_node != dst_node) {
      continue;
    }
    if (idle_cpu(req, cpu)) {
      // seeds/002 patch 4: an idle worker always looks like the best
      // improvement, so only the balance check should let the fiber take
      // it. v4.19-rc1 took it whenever the move also beat the best found so
      // far, balanced or not; Mel Gorman's rule takes it whenever balance
      // allows, even over a better swap found earlier; Srikar Dronamraju's
      // keeps that swap.
      bool take = false;
      switch (f.numa_rule) {
        case numa_idle_rule::v4_19_rc1:
          take = maymove || moveimp > best.imp;
          break;
        case numa_idle_rule::mel:
          take = maymove;
          break;
        case numa_idle_rule::srikar:
          take = maymove && moveimp >= best.imp;
          break;
      }
      if (take) {
        move_to(cpu);
        // seeds/002 patch 3: any idle worker is as good as another; stop.
        if (f.numa_stop_on_move) break;
      }
      continue;
    }
    if (s.idle) {
      continue;  // fibers queued but none running: nobody to swap with
    }

    // The swap's improvement: the fiber's gain plus the running fiber's gain
    // from going to src_node.
    const int cur_preferred = s.curr_preferred_node;
    const long imp = taskimp + numa_score(cur_preferred, src_node) -
                     numa_score(cur_preferred, dst_node);

    // A plain move beats swapping with a fiber that is happier where it is:
    // move, and stop as the kernel does after any move since v5.7.
    if (maymove && moveimp > imp && moveimp > best.imp) {
      move_to(cpu);
      if (f.numa_stop_on_move) break;
      continue;
    }
    if (imp < small_numa_improvement || imp <= best.imp + small_numa_improvement / 2) {
      continue;
    }
    // An exchange moves load in both directions; only the difference shifts.
    const long delta = load - static_cast<long>(s.curr_load);
    if (delta != 0 && load_too_imbalanced(src_load - delta, dst_load + delta, src.capacity,
                                          dst.capacity, src_load, dst_load)) {
      continue;
    }
    best.cpu = cpu;
    best.swap = true;
    best.imp = imp;
  }
  return best;
}

int select_task_rq(const placement_request& req, const cfs_features& f) {
  if (req.cpus.empty()) {
    return 0;
  }
  const int origin = valid_cpu(req, req.origin) ? req.origin : -1;
  if (!has_tree(req)) {
    return req.kind == placement_kind::wake ? first_valid(req, req.prev, origin)
                                            : first_valid(req, origin, req.prev);
  }

  int cpu = 0;
  if (req.kind == placement_kind::spawn) {
    cpu = find_idlest_cpu(req, origin, f);
  } else {
    const int prev = first_valid(req, req.prev, origin);
    int target = prev;
    if (origin >= 0 && origin != prev) {
      // The narrowest of the waker's domains that also holds prev.
      for (const sched_domain& sd : chain_of(req, origin)) {
        if (in_span(sd.span, prev)) {
          target = wake_affine(req, sd, origin, prev, f);
          break;
        }
      }
    }
    cpu = select_idle_sibling(req, prev, target, f);
    // want_affine (wake_wide() is not modelled): the waker's running fiber
    // remembers its worker (until v5.16).
    if (origin >= 0 && req.effects != nullptr && !f.recent_used_cpu_prev) {
      req.effects->waker_recent_used_cpu = true;
    }
  }

  // v4.19 (f.numa_v4_19) never ran task_numa_migrate() at a wake-up: the
  // tick does, on the numa_migrate_retry cadence (task_numa_migrate below).
  const int preferred = req.fiber.preferred_node;
  const int node = snap(req, cpu).numa_node;
  if (preferred >= 0 && node != preferred && !f.numa_v4_19) {
    const numa_choice choice = task_numa_find_cpu(req, node, preferred, f);
    if (choice.cpu >= 0 && !choice.swap) {
      cpu = choice.cpu;
    }
  }
  return cpu;
}

numa_migration task_numa_migrate(const placement_request& req, const cfs_features& f) {
  const int preferred = req.fiber.preferred_node;
  if (preferred < 0 || !valid_cpu(req, req.prev)) return {};
  const int src_node = snap(req, req.prev).numa_node;
  if (src_node == preferred) return {};
  // The preferred node only: v4.19 looks at the other nodes when this
  // finds nothing or the task's numa_group spans several nodes, for nodes
  // whose fault share beats the source's. A fiber's score is 0 on every
  // node but its preferred one, so no other node could improve on the
  // source; fibers have no numa_group.
  const numa_choice choice = task_numa_find_cpu(req, src_node, preferred, f, true);
  if (choice.cpu < 0) return {};
  return {choice.cpu, choice.swap};
}

}  // namespace usched::cfs
