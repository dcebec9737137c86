// cfs_balance.cpp: the v5.9/v5.10 CFS load balancer as pure functions (see
// cfs_balance.hpp). Written from kernel/sched/fair.c at 16b0a7a1a0af (v5.10
// with the seeds/000 fix) and the v5.9 differences, in the kernel's order.
#include "cfs_balance.hpp"

#include <algorithm>
#include <cassert>

namespace usched::cfs {

namespace {

// imbalance_pct is a percentage of this: 117 tolerates 17% above the other
// side before calling it an imbalance.
constexpr unsigned long percent = 100;

// A worker running this many fibers or more has one waiting behind the
// running one: "stacked". seeds/003's debug counter looked for a CPU with
// more than one schbench thread.
constexpr unsigned stacked_nr_running = 2;

// The largest shift of a load or util by nr_balance_failed that is defined
// on a 64-bit long; beyond it everything has shifted out anyway.
constexpr unsigned max_failure_shift = 63;

// The load of one always-runnable fiber of default weight (the kernel's
// scale_load_down(NICE_0_LOAD)).
constexpr unsigned long nice_0_load = 1024;

// NUMA_IMBALANCE_MIN (v5.18): the imbalance, in fibers before halving,
// that a lightly loaded NUMA destination tolerates.
constexpr long numa_imbalance_min_v6 = 2;

// capacity_scale-scaled ratio of a load to a capacity. A capacity of 0
// cannot come from a real worker (capacity_of() is never 0); a hand-built
// snapshot that has one counts as capacity 1, as the kernel's
// update_cpu_capacity() would make it.
unsigned long scaled(unsigned long load, unsigned long capacity) noexcept {
  return load * capacity_scale / std::max(capacity, 1UL);
}

// check_cpu_capacity(): the worker's capacity is noticeably reduced by side
// activity (below capacity_orig by the pct margin). Workers have no
// capacity_orig in the snapshot; every worker's original capacity is
// capacity_scale (domain_tree::cpu_capacity), so that is the reference.
bool check_cpu_capacity(const cpu_snapshot& cpu, unsigned pct) noexcept {
  return cpu.capacity * pct < capacity_scale * percent;
}

// The highest capacity of a worker of `group`: the kernel's
// sgc->max_capacity.
unsigned long max_capacity(const balance_request& req, const sched_group& group) {
  unsigned long max = 0;
  for (const int cpu : group.cpus) {
    max = std::max(max, req.cpus[static_cast<std::size_t>(cpu)].capacity);
  }
  return max;
}

bool contains(const sched_group& group, int cpu) {
  return std::find(group.cpus.begin(), group.cpus.end(), cpu) != group.cpus.end();
}

}  // namespace

unsigned long cpu_load(const cpu_snapshot& cpu, const cfs_features& features) noexcept {
  // The group entity is queued on the root while a fiber is runnable here,
  // with the group's whole load_avg; dequeued, it left the root's runnable
  // load to what the runnable fibers' left: nothing, or a rounding.
  if (features.blocked_load && cpu.nr_running > 0) return cpu.load_avg;
  return cpu.runnable_load;
}

unsigned sd_load_idx(const sched_domain& sd, cpu_idle_type idle) noexcept {
  // sd_init()'s busy_idx, idle_idx and newidle_idx of each kind of level.
  struct indices {
    unsigned busy, idle, newidle;
  };
  constexpr indices smt{0, 0, 0};
  constexpr indices llc{2, 0, 0};
  constexpr indices numa{3, 2, 0};
  constexpr indices other{2, 1, 0};
  const indices& level = sd.has_flag(SD_SHARE_CPUCAPACITY)     ? smt
                         : sd.has_flag(SD_SHARE_PKG_RESOURCES) ? llc
                         : sd.has_flag(SD_NUMA)                ? numa
                                                               : other;
  // get_sd_load_idx().
  switch (idle) {
    case cpu_idle_type::not_idle:
      return level.busy;
    case cpu_idle_type::newly_idle:
      return level.newidle;
    case cpu_idle_type::idle:
      break;
  }
  return level.idle;
}

unsigned long source_load(const cpu_snapshot& cpu, unsigned load_idx, const cfs_features& features) noexcept {
  const unsigned long total = cpu_load(cpu, features);
  if (load_idx == 0 || load_idx > cpu_snapshot::cpu_load_indices) return total;
  return std::min(cpu.cpu_load[load_idx - 1], total);
}

unsigned long target_load(const cpu_snapshot& cpu, unsigned load_idx, const cfs_features& features) noexcept {
  const unsigned long total = cpu_load(cpu, features);
  if (load_idx == 0 || load_idx > cpu_snapshot::cpu_load_indices) return total;
  return std::max(cpu.cpu_load[load_idx - 1], total);
}

sg_lb_stats update_sg_lb_stats(const balance_request& req, const sched_group& group, bool local,
                               unsigned pct, const cfs_features& features) {
  sg_lb_stats sgs;
  // v4.11 biases the balance towards the destination's own group: its
  // workers count their higher load, the others their lower.
  const unsigned load_idx = features.load_idx && req.sd != nullptr ? sd_load_idx(*req.sd, req.idle) : 0;
  for (const int i : group.cpus) {
    assert(i >= 0 && static_cast<std::size_t>(i) < req.cpus.size());
    const cpu_snapshot& rq = req.cpus[static_cast<std::size_t>(i)];
    sgs.group_load += local ? target_load(rq, load_idx, features) : source_load(rq, load_idx, features);
    sgs.sum_weighted_load += cpu_load(rq, features);
    sgs.group_util += rq.util_avg;
    sgs.group_runnable += rq.runnable_avg;
    sgs.sum_h_nr_running += rq.nr_running;
    sgs.sum_nr_running += rq.nr_running;
    sgs.group_capacity += rq.capacity;
    if (rq.nr_running >= stacked_nr_running) sgs.has_stacked_cpu = true;
    if (rq.nr_running == 0 && rq.idle) {
      // An idle worker cannot hold a misfit fiber.
      ++sgs.idle_cpus;
      continue;
    }
    // A misfit fiber on the destination's own group cannot be helped by
    // pulling it to the destination.
    if (local) {
      continue;
    }
    sgs.group_misfit_task_load = std::max(sgs.group_misfit_task_load, rq.misfit_task_load);
  }
  sgs.group_weight = static_cast<unsigned>(group.cpus.size());
  sgs.type = group_classify(pct, sgs);
  // v6.6's smt_balance(): for an idle destination, an SMT core whose
  // threads run two fibers or more needs help more than any group without
  // waiting fibers; an overloaded core stays overloaded (group_classify()
  // tests that first).
  if (features.group_smt_balance && !local && req.idle != cpu_idle_type::not_idle && req.sd != nullptr &&
      (req.sd->child_flags & SD_SHARE_CPUCAPACITY) != 0 && sgs.sum_h_nr_running > 1 &&
      sgs.type < group_type::asym_packing) {
    sgs.smt_balance = true;
  }
  // Only overloaded groups compare by load; has_spare and fully_busy ones
  // compare by idle workers and fiber counts, so avg_load stays 0 for them.
  if (sgs.type == group_type::overloaded) {
    sgs.avg_load = scaled(sgs.group_load, sgs.group_capacity);
  }
  return sgs;
}

bool group_has_capacity(unsigned pct, const sg_lb_stats& sgs, capacity_signals signals) noexcept {
  if (sgs.sum_nr_running < sgs.group_weight) {
    return true;
  }
  // The pct margin keeps a group that is only just under capacity from
  // flapping between has_spare and fully_busy: 1% of spare capacity is no
  // room for a fiber.
  if (signals == capacity_signals::util_and_runnable &&
      sgs.group_capacity * pct < sgs.group_runnable * percent) {
    return false;
  }
  return sgs.group_capacity * percent > sgs.group_util * pct;
}

bool group_is_overloaded(unsigned pct, const sg_lb_stats& sgs, capacity_signals signals) noexcept {
  if (sgs.sum_nr_running <= sgs.group_weight) {
    return false;
  }
  if (sgs.group_capacity * percent < sgs.group_util * pct) {
    return true;
  }
  return signals == capacity_signals::util_and_runnable &&
         sgs.group_capacity * pct < sgs.group_runnable * percent;
}

group_type group_classify(unsigned pct, const sg_lb_stats& sgs) noexcept {
  constexpr capacity_signals v5_10 = capacity_signals::util_and_runnable;
  if (group_is_overloaded(pct, sgs, v5_10)) {
    return group_type::overloaded;
  }
  // The kernel checks sg_imbalanced() (group_imbalanced) and the asym
  // packing flag (group_asym_packing) here; usched tracks neither.
  if (sgs.group_misfit_task_load != 0) {
    return group_type::misfit_task;
  }
  if (!group_has_capacity(pct, sgs, v5_10)) {
    return group_type::fully_busy;
  }
  return group_type::has_spare;
}

namespace {

// v6.5's fully_busy rule ("sched/fair: Keep a fully_busy SMT sched group as
// busiest"): the higher avg_load wins, and of equals (avg_load is 0 for
// every fully_busy group) a later group replaces the one kept unless that
// one is an SMT core, which needs help more.
bool v6_fully_busy_replaces(const balance_request& req, const sg_lb_stats& sgs,
                            const sg_lb_stats& busiest) noexcept {
  if (sgs.avg_load < busiest.avg_load) return false;
  if (sgs.avg_load == busiest.avg_load && (req.sd->child_flags & SD_SHARE_CPUCAPACITY) != 0) return false;
  return true;
}

}  // namespace

unsigned busy_rank(const sg_lb_stats& sgs) noexcept {
  // Twice the group type, with smt_balance in the odd slot between
  // misfit_task and asym_packing, where v6.6 put group_smt_balance.
  const unsigned rank = 2 * static_cast<unsigned>(sgs.type);
  return sgs.smt_balance ? 2 * static_cast<unsigned>(group_type::misfit_task) + 1 : rank;
}

bool update_sd_pick_busiest(const balance_request& req, const sd_lb_stats& sds, std::size_t group,
                            const sg_lb_stats& sgs, const cfs_features& features) {
  const sg_lb_stats& busiest = sds.busiest_stat;

  // Nothing to pull.
  if (sgs.sum_h_nr_running == 0) {
    return false;
  }

  // A misfit fiber is worth pulling only to a group with spare room and
  // bigger workers; otherwise it would be just as misfit here.
  if (sgs.type == group_type::misfit_task) {
    if (sds.local < 0 || sds.local_stat.type != group_type::has_spare) {
      return false;
    }
    const auto& groups = req.sd->groups;
    const unsigned long local_max = max_capacity(req, groups[static_cast<std::size_t>(sds.local)]);
    if (!fits_capacity(max_capacity(req, groups[group]), local_max)) {
      return false;
    }
  }

  if (busy_rank(sgs) > busy_rank(busiest)) {
    return true;
  }
  if (busy_rank(sgs) < busy_rank(busiest)) {
    return false;
  }

  if (sgs.smt_balance) {
    // v6.6: between two loaded SMT cores, one with an idle thread is ranked
    // as has_spare; two without one as fully_busy.
    if (sgs.idle_cpus != 0 || busiest.idle_cpus != 0) {
      return !(sgs.idle_cpus > busiest.idle_cpus ||
               (sgs.idle_cpus == busiest.idle_cpus && sgs.sum_nr_running <= busiest.sum_nr_running));
    }
    return v6_fully_busy_replaces(req, sgs, busiest);
  }

  switch (sgs.type) {
    case group_type::overloaded:
      // The overloaded group with the highest average load.
      if (sgs.avg_load <= busiest.avg_load) {
        return false;
      }
      break;
    case group_type::imbalanced:
      // No way to rank imbalanced groups: the first one stays.
      return false;
    case group_type::asym_packing:
      // The kernel prefers the group whose preferred CPU has the lowest
      // priority; without asym packing there is no priority, the first stays.
      return false;
    case group_type::misfit_task:
      // The biggest misfit.
      if (sgs.group_misfit_task_load < busiest.group_misfit_task_load) {
        return false;
      }
      break;
    case group_type::fully_busy:
      if (features.group_smt_balance) {
        return v6_fully_busy_replaces(req, sgs, busiest);
      }
      // The kernel means "highest avg_load", but avg_load is not computed
      // for fully_busy groups (always 0), so the first one stays.
      if (sgs.avg_load <= busiest.avg_load) {
        return false;
      }
      break;
    case group_type::has_spare:
      // The fewest idle workers, then the most fibers: idle workers are
      // what the destination can fill, which spare capacity alone hides.
      if (sgs.idle_cpus > busiest.idle_cpus) {
        return false;
      }
      if (sgs.idle_cpus == busiest.idle_cpus && sgs.sum_nr_running <= busiest.sum_nr_running) {
        return false;
      }
      break;
  }
  // The kernel's SD_ASYM_CPUCAPACITY test (do not pull a not-overloaded
  // group onto smaller CPUs) needs a flag usched's domains do not have.
  return true;
}

namespace {

// update_sg_lb_stats() and group_classify() of v4.11 for one group, from
// the sums update_sg_lb_stats() made: avg_load from the group's load at the
// pass's load index (features.load_idx), the load per fiber from the
// current loads (sum_weighted_load).
v4_11_sg_stats v4_11_stats_of(unsigned pct, const sg_lb_stats& sgs) noexcept {
  v4_11_sg_stats r;
  r.no_capacity = group_is_overloaded(pct, sgs, capacity_signals::util);
  r.type = r.no_capacity ? v4_11_group::overloaded : v4_11_group::other;
  r.avg_load = scaled(sgs.group_load, sgs.group_capacity);
  if (sgs.sum_nr_running > 0) r.load_per_task = sgs.sum_weighted_load / sgs.sum_nr_running;
  return r;
}

// update_sd_pick_busiest() of v4.11: the higher type wins, then strictly
// higher avg_load. Nothing else: a group running nothing whose workers
// still show a rounding's worth of runnable load can be picked, and
// find_busiest_group() then finds it balanced (v4_11_find_imbalance).
bool v4_11_pick_busiest(const v4_11_sg_stats& candidate, const v4_11_sg_stats& busiest) noexcept {
  if (candidate.type != busiest.type) return candidate.type > busiest.type;
  return candidate.avg_load > busiest.avg_load;
}

}  // namespace

sd_lb_stats update_sd_lb_stats(const balance_request& req, const cfs_features& features) {
  assert(req.sd != nullptr);
  const sched_domain& sd = *req.sd;
  const unsigned pct = features.imbalance_pct(sd);
  sd_lb_stats sds;
  sds.prefer_sibling = req.prefer_sibling;

  const std::size_t n = sd.groups.size();
  for (std::size_t g = 0; g < n; ++g) {
    if (contains(sd.groups[g], req.this_cpu)) {
      sds.local = static_cast<int>(g);
      break;
    }
  }

  // The kernel's ring of groups starts at the local group and continues in
  // ascending order of first worker, wrapping; update_sd_pick_busiest()
  // keeps the first of equals, so the order is part of the behaviour.
  const std::size_t first = sds.local >= 0 ? static_cast<std::size_t>(sds.local) : 0;
  // Under v4.11 the local group, first in the ring, has its capacity known
  // before any other group is ranked.
  bool local_has_capacity = false;
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t g = (first + k) % n;
    const bool local = static_cast<int>(g) == sds.local;
    const sg_lb_stats sgs = update_sg_lb_stats(req, sd.groups[g], local, pct, features);
    if (local) {
      sds.local_stat = sgs;
      if (features.v4_11_balance) {
        sds.v4_11_local = v4_11_stats_of(pct, sgs);
        local_has_capacity = group_has_capacity(pct, sgs, capacity_signals::util);
      }
    } else if (features.v4_11_balance) {
      v4_11_sg_stats v4 = v4_11_stats_of(pct, sgs);
      // update_sd_lb_stats(): with an SD_PREFER_SIBLING child, a group
      // running more than one fiber has no capacity while the local group
      // has some, so that the fibers spread to the siblings.
      if (sds.prefer_sibling && local_has_capacity && sgs.sum_nr_running > 1) {
        v4.no_capacity = true;
        v4.type = v4_11_group::overloaded;
      }
      if (v4_11_pick_busiest(v4, sds.v4_11_busiest)) {
        sds.busiest = static_cast<int>(g);
        sds.busiest_stat = sgs;
        sds.v4_11_busiest = v4;
      }
    } else if (update_sd_pick_busiest(req, sds, g, sgs, features)) {
      sds.busiest = static_cast<int>(g);
      sds.busiest_stat = sgs;
    }
    if (!local && sgs.has_stacked_cpu) ++sds.stacked_groups;
    sds.total_load += sgs.group_load;
    sds.total_capacity += sgs.group_capacity;
  }
  return sds;
}

long adjust_numa_imbalance(long imbalance, unsigned nr_running, unsigned imbalance_min) noexcept {
  if (imbalance_min == 0) {
    return imbalance;
  }
  // A pair of communicating fibers on an otherwise idle node stays there:
  // moving one costs remote memory accesses and buys nothing.
  if (nr_running <= imbalance_min) {
    return 0;
  }
  return imbalance;
}

long adjust_numa_imbalance_v6(long imbalance, unsigned dst_running, unsigned imb_numa_nr) noexcept {
  // A destination that stays lightly loaded (at most imb_numa_nr fibers with
  // the one it would take) keeps a pair of communicating fibers local.
  if (dst_running > imb_numa_nr) {
    return imbalance;
  }
  return imbalance <= numa_imbalance_min_v6 ? 0 : imbalance;
}

long sibling_imbalance(const balance_request& req, const sd_lb_stats& sds) noexcept {
  const sg_lb_stats& local = sds.local_stat;
  const sg_lb_stats& busiest = sds.busiest_stat;
  // A busy destination leaves the spreading to an idle one.
  if (req.idle == cpu_idle_type::not_idle || busiest.sum_nr_running == 0 || sds.busiest < 0 || sds.local < 0) {
    return 0;
  }
  const long ncores_busiest = req.sd->group_cores_of(static_cast<std::size_t>(sds.busiest));
  const long ncores_local = req.sd->group_cores_of(static_cast<std::size_t>(sds.local));
  const long nr_busiest = busiest.sum_nr_running;
  const long nr_local = local.sum_nr_running;
  if (ncores_busiest == ncores_local) {
    return std::max(0L, nr_busiest - nr_local);
  }
  // The same fibers per core on both sides, rounded to the nearest.
  long imbalance = std::max(0L, ncores_local * nr_busiest - ncores_busiest * nr_local);
  imbalance = (2 * imbalance + ncores_local + ncores_busiest) / (ncores_local + ncores_busiest);
  // An empty group is a resource to use even when the ratio says one fiber.
  if (imbalance <= 1 && nr_local == 0 && nr_busiest > 1) {
    imbalance = 2;
  }
  return imbalance;
}

// Decision table of find_busiest_group() and calculate_imbalance() together
// (fair.c prints the first half, transposed, above find_busiest_group()).
// Rows: the local group's type. Columns: the busiest group's type.
//
//  local \ busiest | has_spare | fully_busy | misfit  | asym_pack | imbalanced | overloaded
//  ----------------+-----------+------------+---------+-----------+------------+-----------
//  has_spare       | nr|idle a | nr|idle a  | misfit  | task(all) | task(1)    | util b
//  fully_busy      | balanced  | balanced c | N/A d   | task(all) | task(1)    | load e
//  misfit_task     | N/A: a local group never reports a misfit fiber
//  asym_packing    | N/A: the destination's own group is never the one to pack from
//  imbalanced      | balanced  | balanced   | N/A d   | task(all) | task(1)    | load e
//  overloaded      | balanced  | balanced   | N/A d   | task(all) | task(1)    | load f
//
//  balanced   no decision; where not footnoted, the local group is the busier one.
//  nr         migrate_task, (busiest.sum_nr_running - local.sum_nr_running) / 2, floored
//             at 0, when busiest has one worker or the child level prefers siblings;
//  idle       otherwise migrate_task, (local.idle_cpus - busiest.idle_cpus) / 2, floored
//             at 0. On SD_NUMA domains either is 0 while busiest runs at most
//             numa_imbalance_min fibers (adjust_numa_imbalance). 0 is balanced.
//  misfit     migrate_misfit, 1 (picked as busiest only when the local group has spare
//             room and bigger workers).
//  task(all)  migrate_task, busiest.sum_h_nr_running.  task(1): migrate_task, 1.
//  util       migrate_util, the local spare capacity max(capacity, util) - util; an idle
//             destination facing none takes task(1) instead.
//  load       migrate_load, min((busiest.avg - sd.avg) * busiest.capacity,
//             (sd.avg - local.avg) * local.capacity) / 1024, each difference floored at 0.
//  a  prefer_sibling and busiest.sum_nr_running > local.sum_nr_running + 1: forced, even
//     on a busy destination. Otherwise only an idle destination pulls (CPU_NOT_IDLE:
//     balanced), only if busiest has one worker or local.idle_cpus > busiest.idle_cpus
//     + 1, and only if busiest has more than one fiber.
//  b  util in v5.9, and in v5.10 above the LLC. nr|idle (as a, no gates) in domains
//     sharing a cache (SD_SHARE_PKG_RESOURCES) with features.llc_migrate_task (the
//     seeds/000 fix), and with candidate A (weight1_spread) when busiest
//     has one worker.
//  c  past the gates of a, calculate_imbalance finds local.avg_load >= busiest.avg_load,
//     which is 0 (not computed for fully_busy): always balanced.
//  d  not picked as busiest: the local group has no spare room.
//  e  local.avg_load = local load per capacity; balanced if >= busiest.avg_load, else load.
//  f  balanced if local.avg >= busiest.avg, or local.avg >= the domain's average, or
//     100 * busiest.avg <= imbalance_pct * local.avg; else load.
lb_imbalance calculate_imbalance(const balance_request& req, sd_lb_stats& sds,
                                 const cfs_features& features) {
  assert(sds.busiest >= 0);
  const sched_domain& sd = *req.sd;
  sg_lb_stats& local = sds.local_stat;
  const sg_lb_stats& busiest = sds.busiest_stat;

  // v6.6: one fiber fewer sharing a core's capacity (group_classify() puts
  // group_smt_balance before group_misfit_task).
  if (busiest.smt_balance) {
    return {migration_type::migrate_task, 1};
  }
  if (busiest.type == group_type::misfit_task) {
    return {migration_type::migrate_misfit, 1};
  }
  if (busiest.type == group_type::asym_packing) {
    // Pack everything onto the preferred CPU.
    return {migration_type::migrate_task, static_cast<long>(busiest.sum_h_nr_running)};
  }
  if (busiest.type == group_type::imbalanced) {
    // Group averages lie when pinning skews a group: move any one fiber and
    // let the next pass rebalance.
    return {migration_type::migrate_task, 1};
  }

  // Use the spare capacity of the local group without overloading it or
  // emptying the busiest.
  if (local.type == group_type::has_spare) {
    bool fill_spare_capacity = busiest.type > group_type::fully_busy;
    // seeds/000, the fix that landed: inside a cache the wake-up path moves
    // fibers around freely (select_idle_sibling ignores capacity), so the
    // balancer counts fibers there too. Counting util left a queued hog
    // behind a busy worker while a sibling idled: util lags, and one hog's
    // util exceeds the few percent of spare capacity an idle sibling of a
    // busy worker shows.
    if (features.llc_migrate_task && sd.has_flag(SD_SHARE_PKG_RESOURCES)) {
      fill_spare_capacity = false;
    }
    // seeds/000, candidate A: between single workers, spread by count.
    // Helps where groups are single workers; not on SMT machines, whose
    // LLC groups are cores (busiest group_weight 2).
    if (features.weight1_spread && busiest.group_weight <= 1) {
      fill_spare_capacity = false;
    }
    if (fill_spare_capacity) {
      // Busiest is overloaded: fill local's spare capacity. That may leave
      // busiest overloaded or make it spare, but there is no simple way to
      // compute the exact load to move.
      lb_imbalance out{migration_type::migrate_util,
                       static_cast<long>(std::max(local.group_capacity, local.group_util) -
                                         local.group_util)};
      // Local util can sit at capacity right after a migration or a long
      // run even though this worker is (newly) idle, while busiest has a
      // waiting fiber: pull one.
      if (req.idle != cpu_idle_type::not_idle && out.imbalance == 0) {
        out = {migration_type::migrate_task, 1};
      }
      return out;
    }

    lb_imbalance out{migration_type::migrate_task, 0};
    if (features.sibling_imbalance || features.imb_numa_nr) {
      // v6.x: the count first, the NUMA tolerance on it, then half of it.
      if (busiest.group_weight == 1 || sds.prefer_sibling) {
        if (features.sibling_imbalance) {
          out.imbalance = sibling_imbalance(req, sds);
        } else {
          out.imbalance = std::max(0L, static_cast<long>(busiest.sum_nr_running) -
                                           static_cast<long>(local.sum_nr_running));
        }
      } else {
        out.imbalance = std::max(0L, static_cast<long>(local.idle_cpus) - static_cast<long>(busiest.idle_cpus));
      }
      if (sd.has_flag(SD_NUMA)) {
        out.imbalance = features.imb_numa_nr
                            ? adjust_numa_imbalance_v6(out.imbalance, local.sum_nr_running + 1, sd.imb_numa_nr)
                            : adjust_numa_imbalance(out.imbalance, busiest.sum_nr_running,
                                                    features.numa_imbalance_min);
      }
      out.imbalance >>= 1;
      return out;
    }
    if (busiest.group_weight == 1 || sds.prefer_sibling) {
      // Spread the fibers evenly over the groups.
      const unsigned nr_diff = busiest.sum_nr_running > local.sum_nr_running
                                   ? busiest.sum_nr_running - local.sum_nr_running
                                   : 0;
      out.imbalance = static_cast<long>(nr_diff >> 1);
    } else {
      // No overload to fix: even out the idle workers. The kernel subtracts
      // unsigned counts before flooring at 0, which would wrap if local had
      // fewer idle workers; the difference is floored here first.
      const long idle_diff =
          static_cast<long>(local.idle_cpus) - static_cast<long>(busiest.idle_cpus);
      out.imbalance = std::max(0L, idle_diff) >> 1;
    }
    if (sd.has_flag(SD_NUMA)) {
      out.imbalance = adjust_numa_imbalance(out.imbalance, busiest.sum_nr_running,
                                            features.numa_imbalance_min);
    }
    return out;
  }

  // Local is fully busy (or imbalanced) and must take load to relieve the
  // busiest: it will become overloaded, so the load averages count now.
  if (local.type < group_type::overloaded) {
    local.avg_load = scaled(local.group_load, local.group_capacity);
    sds.avg_load = scaled(sds.total_load, sds.total_capacity);
    if (local.avg_load >= busiest.avg_load) {
      return {migration_type::migrate_load, 0};
    }
    // v6.0: nor when it is already at or above the domain's average.
    if (features.local_above_domain_avg && local.avg_load >= sds.avg_load) {
      return {migration_type::migrate_load, 0};
    }
  }

  // Both groups are or will be overloaded: bring both towards the domain's
  // average without pushing local above it or busiest below it.
  // Deviation from the kernel: fair.c subtracts unsigned longs here. The
  // checks before make both differences positive with two groups, but with
  // more groups the domain's average can fall outside [local, busiest] and
  // the kernel's subtraction would wrap to a huge imbalance; each difference
  // is floored at 0 instead (no pull).
  const unsigned long above = busiest.avg_load > sds.avg_load ? busiest.avg_load - sds.avg_load : 0;
  const unsigned long below = sds.avg_load > local.avg_load ? sds.avg_load - local.avg_load : 0;
  const unsigned long load =
      std::min(above * busiest.group_capacity, below * local.group_capacity) / capacity_scale;
  return {migration_type::migrate_load, static_cast<long>(load)};
}

lb_imbalance find_imbalance(const balance_request& req, sd_lb_stats& sds,
                            const cfs_features& features) {
  const lb_imbalance balanced{};
  if (sds.busiest < 0) {
    return balanced;
  }
  const sg_lb_stats& local = sds.local_stat;
  const sg_lb_stats& busiest = sds.busiest_stat;

  // Misfit fibers are dealt with whatever the loads; asym packing bypasses
  // the load checks; an imbalanced group's averages are skewed by pinning,
  // so the checks below, which assume all things equal, do not apply.
  if (busiest.type == group_type::misfit_task || busiest.type == group_type::asym_packing ||
      busiest.type == group_type::imbalanced) {
    return calculate_imbalance(req, sds, features);
  }

  // The local group is busier than the busiest: do not pull.
  if (busy_rank(local) > busy_rank(busiest)) {
    return balanced;
  }

  // Between overloaded groups, fairness between fibers: average load.
  if (local.type == group_type::overloaded) {
    if (local.avg_load >= busiest.avg_load) {
      return balanced;
    }
    sds.avg_load = scaled(sds.total_load, sds.total_capacity);
    // Already above the domain's average.
    if (local.avg_load >= sds.avg_load) {
      return balanced;
    }
    // Only a difference beyond imbalance_pct is worth a migration.
    if (percent * busiest.avg_load <= features.imbalance_pct(*req.sd) * local.avg_load) {
      return balanced;
    }
  }

  // The child level prefers siblings: move every excess fiber to the
  // group with room, even from a busy destination.
  const bool spread = features.sibling_imbalance ? sibling_imbalance(req, sds) > 1
                                                  : busiest.sum_nr_running > local.sum_nr_running + 1;
  if (sds.prefer_sibling && local.type == group_type::has_spare && spread) {
    return calculate_imbalance(req, sds, features);
  }

  if (busiest.type != group_type::overloaded) {
    // Busiest is not overloaded (so neither is local) but this worker is
    // busy: leave the pull to an idle worker.
    if (req.idle == cpu_idle_type::not_idle) {
      return balanced;
    }
    // An idle-worker difference of one is no imbalance: moving a fiber
    // would only move the difference to the other group. Applies only to
    // groups of more than one worker.
    if (busiest.group_weight > 1 && local.idle_cpus <= busiest.idle_cpus + 1) {
      return balanced;
    }
    // Busiest has no fiber waiting.
    if (busiest.sum_h_nr_running == 1) {
      return balanced;
    }
  }
  return calculate_imbalance(req, sds, features);
}

long v4_11_fix_small_imbalance(const sd_lb_stats& sds, long imbalance,
                               unsigned long dst_load_per_task) noexcept {
  const sg_lb_stats& local = sds.local_stat;
  const sg_lb_stats& busiest = sds.busiest_stat;
  const v4_11_sg_stats& b = sds.v4_11_busiest;
  v4_11_sg_stats l = sds.v4_11_local;

  // Two fibers' worth of lead are needed to move one, unless the busiest
  // group's fibers are the heavier ones; an empty local group borrows the
  // destination's own load per fiber.
  unsigned long imbn = 2;
  if (local.sum_nr_running == 0) {
    l.load_per_task = dst_load_per_task;
  } else if (b.load_per_task > l.load_per_task) {
    imbn = 1;
  }
  const unsigned long capacity_b = std::max(busiest.group_capacity, 1UL);
  const unsigned long capacity_l = std::max(local.group_capacity, 1UL);
  const unsigned long scaled_busy_load_per_task = b.load_per_task * capacity_scale / capacity_b;
  if (b.avg_load + scaled_busy_load_per_task >= l.avg_load + scaled_busy_load_per_task * imbn) {
    return static_cast<long>(b.load_per_task);
  }

  // Not enough imbalance to justify moving a fiber; moving one may still
  // raise the total capacity used: the load each group can run (at most one
  // fiber's worth per unit of capacity) now, and after the move.
  unsigned long capa_now = capacity_b * std::min(b.load_per_task, b.avg_load);
  capa_now += capacity_l * std::min(l.load_per_task, l.avg_load);
  capa_now /= capacity_scale;

  unsigned long capa_move = 0;
  if (b.avg_load > scaled_busy_load_per_task) {
    capa_move += capacity_b * std::min(b.load_per_task, b.avg_load - scaled_busy_load_per_task);
  }
  const unsigned long added = b.avg_load * capacity_b < b.load_per_task * capacity_scale
                                  ? b.avg_load * capacity_b / capacity_l
                                  : b.load_per_task * capacity_scale / capacity_l;
  capa_move += capacity_l * std::min(l.load_per_task, l.avg_load + added);
  capa_move /= capacity_scale;

  if (capa_move > capa_now) return static_cast<long>(b.load_per_task);
  return imbalance;
}

namespace {

// calculate_imbalance() of v4.11: bring both groups towards the domain's
// average, not below the busiest group's capacity when both are
// overloaded, and round a remainder smaller than one fiber with
// fix_small_imbalance(). Requires sds.avg_load.
long v4_11_calculate_imbalance(const sd_lb_stats& sds, unsigned long dst_load_per_task) noexcept {
  const sg_lb_stats& local = sds.local_stat;
  const sg_lb_stats& busiest = sds.busiest_stat;
  const v4_11_sg_stats& b = sds.v4_11_busiest;
  const v4_11_sg_stats& l = sds.v4_11_local;
  // (The kernel caps an imbalanced group's load_per_task here; usched has
  // no group_imbalanced.)

  // The group averages count capacity, and groups of a lower type were
  // never candidates, so busiest can be below the domain's average and
  // local above it.
  if (b.avg_load <= sds.avg_load || l.avg_load >= sds.avg_load) {
    return v4_11_fix_small_imbalance(sds, 0, dst_load_per_task);
  }

  // If there are no idle workers, do not create any: pull no more than the
  // busiest group's load above its capacity.
  unsigned long load_above_capacity = std::numeric_limits<unsigned long>::max();
  if (b.type == v4_11_group::overloaded && l.type == v4_11_group::overloaded) {
    const unsigned long demand = static_cast<unsigned long>(busiest.sum_nr_running) * capacity_scale;
    if (demand > busiest.group_capacity) {
      load_above_capacity = (demand - busiest.group_capacity) * nice_0_load / busiest.group_capacity;
    }
  }
  const unsigned long max_pull = std::min(b.avg_load - sds.avg_load, load_above_capacity);
  const unsigned long imbalance =
      std::min(max_pull * busiest.group_capacity, (sds.avg_load - l.avg_load) * local.group_capacity) /
      capacity_scale;
  // Less than one fiber's load may move nothing at all: think about moving
  // one whole fiber.
  if (imbalance < b.load_per_task) {
    return v4_11_fix_small_imbalance(sds, static_cast<long>(imbalance), dst_load_per_task);
  }
  return static_cast<long>(imbalance);
}

}  // namespace

lb_imbalance v4_11_find_imbalance(const balance_request& req, sd_lb_stats& sds,
                                  const cfs_features& features) {
  const lb_imbalance balanced{migration_type::migrate_load, 0};
  if (sds.busiest < 0 || sds.busiest_stat.sum_nr_running == 0) {
    return balanced;
  }
  const sg_lb_stats& local = sds.local_stat;
  const sg_lb_stats& busiest = sds.busiest_stat;
  const v4_11_sg_stats& l = sds.v4_11_local;
  const v4_11_sg_stats& b = sds.v4_11_busiest;
  const unsigned pct = features.imbalance_pct(*req.sd);
  sds.avg_load = scaled(sds.total_load, sds.total_capacity);

  // cpu_avg_load_per_task() of the destination.
  const cpu_snapshot& dst = req.cpus[static_cast<std::size_t>(req.this_cpu)];
  const unsigned long dst_load_per_task = dst.nr_running > 0 ? cpu_load(dst, features) / dst.nr_running : 0;
  const auto force = [&] {
    return lb_imbalance{migration_type::migrate_load, v4_11_calculate_imbalance(sds, dst_load_per_task)};
  };

  // A newly idle destination with room pulls from a group without any,
  // whatever the averages say.
  if (req.idle == cpu_idle_type::newly_idle && group_has_capacity(pct, local, capacity_signals::util) &&
      b.no_capacity) {
    return force();
  }
  // The local group is the busier, or already above the domain's average.
  if (l.avg_load >= b.avg_load || l.avg_load >= sds.avg_load) {
    return balanced;
  }
  if (req.idle == cpu_idle_type::idle) {
    // An idle destination: without an overload, an idle-worker difference
    // of one is no imbalance (moving a fiber would only move it).
    if (b.type != v4_11_group::overloaded && local.idle_cpus <= busiest.idle_cpus + 1) {
      return balanced;
    }
  } else if (percent * b.avg_load <= pct * l.avg_load) {
    // Newly idle or busy: only a difference beyond imbalance_pct counts.
    return balanced;
  }
  return force();
}

fbq_type fbq_classify(unsigned nr_running, unsigned nr_numa_running, unsigned nr_preferred_running) noexcept {
  if (nr_running > nr_numa_running) return fbq_type::regular;
  if (nr_running > nr_preferred_running) return fbq_type::remote;
  return fbq_type::all;
}

fbq_type fbq_classify_group(const balance_request& req, const sched_group& group) noexcept {
  unsigned nr = 0;
  unsigned numa = 0;
  unsigned preferred = 0;
  for (const int i : group.cpus) {
    const cpu_snapshot& rq = req.cpus[static_cast<std::size_t>(i)];
    nr += rq.nr_running;
    numa += rq.nr_numa_running;
    preferred += rq.nr_preferred_running;
  }
  return fbq_classify(nr, numa, preferred);
}

int migrate_degrades_locality(const fiber_view& fiber, const detach_env& env) noexcept {
  if (fiber.preferred_node < 0 || !env.numa_level || env.src_node == env.dst_node) return -1;
  // Migrating away from the preferred node is always bad, unless every
  // fiber of the source is on its own node anyway.
  if (env.src_node == fiber.preferred_node) {
    return env.src_nr_running > env.src_nr_preferred_running ? 1 : -1;
  }
  // Encourage migration to the preferred node.
  if (env.dst_node == fiber.preferred_node) return 0;
  // Leaving a worker idle is often worse than degrading locality.
  if (env.idle != cpu_idle_type::not_idle) return -1;
  // dst_weight < src_weight: the fiber's score is 0 on both.
  return 0;
}

int find_busiest_queue(const balance_request& req, const sched_group& group, migration_type type,
                       long imbalance, const cfs_features& features, fbq_type fbq) {
  const bool numa_classes = features.numa_v4_19 && req.sd->has_flag(SD_NUMA);
  const unsigned pct = features.imbalance_pct(*req.sd);
  int busiest = -1;
  unsigned long busiest_util = 0;
  unsigned long busiest_load = 0;
  unsigned long busiest_capacity = 1;
  unsigned busiest_nr = 0;

  for (const int i : group.cpus) {
    assert(i >= 0 && static_cast<std::size_t>(i) < req.cpus.size());
    const cpu_snapshot& rq = req.cpus[static_cast<std::size_t>(i)];
    const unsigned long capacity = rq.capacity;
    const unsigned nr_running = rq.nr_running;
    // v4.19: in order not to move fibers already on their preferred node
    // while there are others, a runqueue of a higher class than the
    // busiest group's is left alone; if that cannot move enough, the next
    // pass classifies the group again.
    if (numa_classes && fbq_classify(nr_running, rq.nr_numa_running, rq.nr_preferred_running) > fbq) {
      continue;
    }
    // The kernel skips, on SD_ASYM_CPUCAPACITY domains, a bigger worker
    // running a single fiber; usched's domains have no such flag.
    switch (type) {
      case migration_type::migrate_load: {
        // The same load as the group statistics counted, not scaled by
        // capacity here: it is compared with the imbalance.
        const unsigned long load = cpu_load(rq, features);
        // A worker running one fiber heavier than the whole imbalance would
        // only swap the imbalance around, unless its capacity is reduced
        // and the fiber runs better elsewhere.
        if (nr_running == 1 && imbalance >= 0 && load > static_cast<unsigned long>(imbalance) &&
            !check_cpu_capacity(rq, pct)) {
          break;
        }
        // The highest load per capacity, cross-multiplied:
        // load_i / capacity_i > load_j / capacity_j.
        if (load * busiest_capacity > busiest_load * capacity) {
          busiest_load = load;
          busiest_capacity = capacity;
          busiest = i;
        }
        break;
      }
      case migration_type::migrate_util:
        // A worker with one fiber: whatever its util, detaching would fail
        // (the running fiber cannot be taken).
        if (nr_running <= 1) {
          break;
        }
        // v6.5's runnable boosting: waiting fibers count as busy time.
        if (const unsigned long util = features.runnable_boost
                                           ? std::min(std::max(rq.util_avg, rq.runnable_avg), capacity)
                                           : rq.util_avg;
            busiest_util < util) {
          busiest_util = util;
          busiest = i;
        }
        break;
      case migration_type::migrate_task:
        if (busiest_nr < nr_running) {
          busiest_nr = nr_running;
          busiest = i;
        }
        break;
      case migration_type::migrate_misfit:
        // The biggest misfit fiber.
        if (rq.misfit_task_load > busiest_load) {
          busiest_load = rq.misfit_task_load;
          busiest = i;
        }
        break;
    }
  }
  return busiest;
}

balance_decision find_busiest_group(const balance_request& req, const cfs_features& features) {
  balance_decision decision;
  if (req.sd == nullptr) {
    return decision;
  }
  sd_lb_stats sds = update_sd_lb_stats(req, features);
  // The kernel's should_we_balance() refuses a destination outside the
  // domain.
  if (sds.local < 0) {
    return decision;
  }
  decision.local_type = sds.local_stat.type;
  if (sds.busiest < 0) {
    return decision;
  }
  decision.busiest_type = sds.busiest_stat.type;
  decision.odd_pick = picked_group_without_stacked_cpu(sds);

  const lb_imbalance imb =
      features.v4_11_balance ? v4_11_find_imbalance(req, sds, features) : find_imbalance(req, sds, features);
  decision.type = imb.type;
  if (imb.imbalance <= 0) {
    return decision;
  }
  const sched_group& group = req.sd->groups[static_cast<std::size_t>(sds.busiest)];
  // update_sd_lb_stats(): on SD_NUMA levels env->fbq_type is the busiest
  // group's class (v4.19); `all` elsewhere.
  const fbq_type fbq = features.numa_v4_19 && req.sd->has_flag(SD_NUMA) ? fbq_classify_group(req, group)
                                                                        : fbq_type::all;
  const int queue = find_busiest_queue(req, group, imb.type, imb.imbalance, features, fbq);
  if (queue < 0) {
    return decision;
  }
  decision.busiest = queue;
  decision.imbalance = imb.imbalance;
  return decision;
}

detach_verdict can_detach(const fiber_view& fiber, const detach_env& env,
                          const cfs_features& features) {
  // can_migrate_task(): a fiber that ran on its worker within the migration
  // cost still has its cache there; leave it unless balancing at this level
  // keeps failing. (Pinned and running fibers are the engine's to skip.)
  const bool balance_keeps_failing = env.nr_balance_failed > env.cache_nice_tries;
  // v6.12: a delayed fiber is not runnable; only a pass counting load,
  // which still counts its load here, moves it.
  if (features.delayed_dequeue && fiber.sched_delayed && env.type != migration_type::migrate_load) {
    return {};
  }
  bool hot = fiber.cache_hot;
  if (features.numa_v4_19) {
    // v4.19's can_migrate_task(): locality decides first; cache hotness
    // only where it has no opinion.
    if (const int degrades = migrate_degrades_locality(fiber, env); degrades >= 0) hot = degrades == 1;
  }
  if (hot && !balance_keeps_failing) {
    return {};
  }

  switch (env.type) {
    case migration_type::migrate_load:
      if (features.v4_11_balance) {
        // v4.11: a fiber whose half load exceeds what is left would
        // overshoot; there is no exception for a pass that keeps failing.
        const long load = static_cast<long>(fiber.load_avg);
        if (load / 2 > env.imbalance) {
          return {};
        }
        return {true, load};
      }
      if (features.v5_9_load_detach) {
        // v5.9: do not move more than twice what is left, until balancing
        // here has failed more than cache_nice_tries times. (A load of 0
        // still counts 1, so the imbalance shrinks and the pass ends.)
        const long load = fiber.load_avg > 0 ? static_cast<long>(fiber.load_avg) : 1;
        if (load / 2 > env.imbalance && !balance_keeps_failing) {
          return {};
        }
        return {true, load};
      }
      break;
    case migration_type::migrate_util: {
      const long util = static_cast<long>(fiber.util_avg);
      // seeds/000, candidate C: an idle destination takes the fiber
      // whatever its util (fixes the latency, but overrides util-based
      // balancing at every level, which is why it did not land).
      if (features.idle_skips_util_check && env.idle != cpu_idle_type::not_idle) {
        return {true, util};
      }
      // seeds/000, candidate B: each failed attempt halves the fiber's
      // apparent util, so a hog eventually fits the spare capacity.
      if (features.failshift_util) {
        const unsigned shift = std::min(env.nr_balance_failed, max_failure_shift);
        if ((util >> shift) > env.imbalance) {
          return {};
        }
        return {true, util};
      }
      break;
    }
    case migration_type::migrate_task:
    case migration_type::migrate_misfit:
      break;
  }
  // Everything the variants leave alone is the kernel's v5.10 rule.
  return kernel_detach_rule(fiber, env);
}

bool picked_group_without_stacked_cpu(const sd_lb_stats& sds) noexcept {
  // Every stacked non-local group is another group than a busiest one
  // without a stacked worker.
  return sds.busiest >= 0 && !sds.busiest_stat.has_stacked_cpu && sds.stacked_groups > 0;
}

}  // namespace usched::cfs
