// cfs_balance.hpp: the Linux CFS load balancer of v5.9/v5.10
// (kernel/sched/fair.c: update_sg_lb_stats .. find_busiest_queue,
// detach_tasks) as pure functions over plain structs, shared by every member
// of the CFS policy family. The cfs_features switch between the variants the
// seed threads argue about (seeds/000: v5.9, the LLC fix, candidates A, B and
// C; seeds/003: whether blocked load counts).
//
// The pipeline, in the kernel's order and words:
//
//   update_sd_lb_stats          one sg_lb_stats per group (update_sg_lb_stats,
//                               group_classify), the busiest group
//                               (update_sd_pick_busiest), domain totals
//   find_imbalance              find_busiest_group()'s decision points, then
//                               calculate_imbalance(): how much, in what unit
//   find_busiest_queue          the worker of the busiest group to pull from
//   find_busiest_group          all of the above: one balance_decision
//   can_detach                  detach_tasks()/can_migrate_task() for one fiber
//
// Every function reads only its arguments: no locks, no clock, no state
// (DESIGN.md, seam 1). Worker indices are indices into balance_request::cpus,
// as are the `cpus` of the domain's groups.
#pragma once

#include <cstddef>
#include <limits>

#include "cfs_features.hpp"
#include "sched_domain.hpp"
#include "policy.hpp"

namespace usched::cfs {

// Statistics of one group of a domain: the kernel's struct sg_lb_stats.
// Loads, utilizations and capacities are 1024-scaled PELT sums over the
// group's workers.
struct sg_lb_stats {
  // group_load * 1024 / group_capacity; computed only for overloaded groups
  // (and for the local group by calculate_imbalance when it must take load).
  unsigned long avg_load = 0;
  // Σ cpu_load(); under cfs_features::load_idx, Σ target_load() for the
  // local group and Σ source_load() for the others.
  unsigned long group_load = 0;
  unsigned long sum_weighted_load = 0;  // Σ cpu_load(), whatever the index (v4.11's load_per_task)
  unsigned long group_capacity = 0;  // Σ capacity_of()
  unsigned long group_util = 0;      // Σ cpu_util()
  unsigned long group_runnable = 0;  // Σ cpu_runnable()
  unsigned sum_nr_running = 0;       // Σ nr_running
  // Σ cfs h_nr_running; every fiber is a "cfs task" here, so it equals
  // sum_nr_running. Kept separate so the code reads like fair.c.
  unsigned sum_h_nr_running = 0;
  unsigned idle_cpus = 0;            // workers running nothing (nr_running == 0 and idle)
  unsigned group_weight = 0;         // workers in the group
  bool has_stacked_cpu = false;      // a worker runs two fibers or more (seeds/003's debug test)
  group_type type = group_type::has_spare;
  unsigned long group_misfit_task_load = 0;  // biggest misfit load of a non-local group
  // v6.6's group_smt_balance (cfs_features::group_smt_balance): an SMT core
  // running two fibers or more, seen from an idle destination. `type` keeps
  // the group's type without it (the one statistics and traces report);
  // busy_rank() ranks the group above misfit_task and below asym_packing.
  bool smt_balance = false;
};

// busy_rank() orders groups by how badly they need help, as group_type
// does, with a group_smt_balance group between misfit_task and
// asym_packing (twice the type; the odd rank between for smt_balance).
unsigned busy_rank(const sg_lb_stats& sgs) noexcept;

// idle_cpus of the "no busiest yet" statistics, so that the first has_spare
// group with fibers wins update_sd_pick_busiest() (the kernel's UINT_MAX).
inline constexpr unsigned no_busiest_idle_cpus = std::numeric_limits<unsigned>::max();

// v4.11's enum group_type: three types, in ranking order.
enum class v4_11_group : unsigned char { other, imbalanced, overloaded };

// What v4.11's sg_lb_stats held beyond v5.10's (cfs_features::v4_11_balance):
// its group type, group_no_capacity (which the SD_PREFER_SIBLING rule can
// force), avg_load for every group, and the load per running fiber.
struct v4_11_sg_stats {
  v4_11_group type = v4_11_group::other;
  bool no_capacity = false;
  unsigned long avg_load = 0;       // group_load * 1024 / group_capacity
  unsigned long load_per_task = 0;  // sum_weighted_load / sum_nr_running (0 for an empty group)
};

// Statistics of one domain: the kernel's struct sd_lb_stats.
struct sd_lb_stats {
  int busiest = -1;  // index in sd.groups of the busiest group, -1 = none
  int local = -1;    // index in sd.groups of the group holding this_cpu, -1 = none
  unsigned long total_load = 0;      // Σ group_load over every group, local included
  unsigned long total_capacity = 0;  // Σ group_capacity over every group
  // total_load * 1024 / total_capacity, computed only where the kernel does
  // (when the local group is, or must become, overloaded).
  unsigned long avg_load = 0;
  bool prefer_sibling = false;  // the child level spreads to siblings (SD_PREFER_SIBLING)
  unsigned stacked_groups = 0;  // non-local groups with a worker running two fibers or more
  // init_sd_lb_stats(): the worst possible busiest, so any group with a
  // fiber beats it.
  sg_lb_stats busiest_stat = {.idle_cpus = no_busiest_idle_cpus};
  sg_lb_stats local_stat;
  // The v4.11 view of the same two groups, filled in only under
  // cfs_features::v4_11_balance.
  v4_11_sg_stats v4_11_busiest;
  v4_11_sg_stats v4_11_local;
};

// The part of the kernel's lb_env that find_busiest_group() fills in: what
// the imbalance is counted in and how much of it there is. imbalance <= 0
// means balanced.
struct lb_imbalance {
  migration_type type = migration_type::migrate_task;
  long imbalance = 0;

  bool operator==(const lb_imbalance&) const = default;
};

// cpu_load() is the load of one worker as the balancer counts it (v4.11's
// weighted_cpuload(), the root's runnable_load_avg): the runnable load
// (queued and running fibers only), or, when features.blocked_load (the
// fibers are one cgroup's, seeds/003), the group entity's load while the
// worker runs a fiber: load_avg, which also holds the decaying load of
// fibers that blocked there; on a worker running nothing the entity is
// dequeued and only the runnable load, nothing or a rounding, is left.
unsigned long cpu_load(const cpu_snapshot& cpu, const cfs_features& features) noexcept;

// sd_load_idx() is v4.11's get_sd_load_idx(): the load index a pass of
// kind `idle` reads at level `sd`, from sd_init()'s busy_idx, idle_idx and
// newidle_idx (2, 0, 0 at a level sharing a cache; 2, 1, 0 at a package
// level; 3, 2, 0 across NUMA nodes; 0 between SMT siblings).
unsigned sd_load_idx(const sched_domain& sd, cpu_idle_type idle) noexcept;

// source_load() and target_load() are v4.11's, with LB_BIAS (on by
// default then): at load index 0 the current load (cpu_load()); at index
// k > 0 the lower (source: a worker to pull from counts low) or the higher
// (target: the destination's group counts high) of the current load and the
// history cpu.cpu_load[k - 1].
unsigned long source_load(const cpu_snapshot& cpu, unsigned load_idx, const cfs_features& features) noexcept;
unsigned long target_load(const cpu_snapshot& cpu, unsigned load_idx, const cfs_features& features) noexcept;

// update_sg_lb_stats() sums the statistics of `group` of req.sd and
// classifies it with imbalance_pct `pct`. `local` says the group holds
// req.this_cpu: a local group never reports a misfit fiber. Requires every
// worker of the group to index req.cpus.
sg_lb_stats update_sg_lb_stats(const balance_request& req, const sched_group& group, bool local,
                               unsigned pct, const cfs_features& features);

// Which pressure signals group_has_capacity() and group_is_overloaded() read
// besides the fiber count. The kernel added runnable pressure in v5.7
// (commit 070f5e860ee2, "sched/fair: Take into account runnable_avg to
// classify group"): a group whose fibers wait for their turn is busy even
// while its utilization still looks low.
enum class capacity_signals : unsigned char {
  util,               // utilization only: v4.11's balancer (cfs_features::v4_11_balance)
  util_and_runnable,  // utilization and runnable pressure: v5.7 and later
};

// group_has_capacity() is true when the group could run more: fewer fibers
// than workers, or util (and, with util_and_runnable, runnable) below
// capacity by the pct margin.
bool group_has_capacity(unsigned pct, const sg_lb_stats& sgs, capacity_signals signals) noexcept;

// group_is_overloaded() is true when the group has more fibers than workers
// and util (or, with util_and_runnable, runnable) exceeds its capacity by
// the pct margin. Not the negation of group_has_capacity(): a group with
// exactly one fiber per worker is neither.
bool group_is_overloaded(unsigned pct, const sg_lb_stats& sgs, capacity_signals signals) noexcept;

// group_classify() returns the group's v5.10 group_type from its statistics,
// for the balancer and for the spawn path alike (update_sg_wakeup_stats).
// Only overloaded, misfit_task, fully_busy and has_spare come out of it:
// usched keeps no sgc->imbalance flag (imbalanced) and no asym packing
// (asym_packing), though the decision functions below handle both; the
// spawn path's statistics carry no misfit load, so they are never
// misfit_task.
group_type group_classify(unsigned pct, const sg_lb_stats& sgs) noexcept;

// update_sd_pick_busiest() is true when group `group` of req.sd, with
// statistics `sgs`, is busier than sds.busiest_stat. Requires sds.local and
// sds.local_stat to be set (the kernel visits the local group first).
// Under features.group_smt_balance (v6.5/v6.6) the ranking goes by
// busy_rank(), and of two fully_busy groups of equal avg_load the later one
// wins unless the domain's groups are SMT cores.
bool update_sd_pick_busiest(const balance_request& req, const sd_lb_stats& sds, std::size_t group,
                            const sg_lb_stats& sgs, const cfs_features& features = cfs_features{});

// update_sd_lb_stats() gathers the statistics of every group of req.sd,
// visiting them from the local group round the ring as the kernel does (ties
// go to the group seen first), and picks the busiest. pct is
// features.imbalance_pct(*req.sd); prefer_sibling comes from the request.
// Requires req.sd; sds.local stays -1 when req.this_cpu is in no group.
sd_lb_stats update_sd_lb_stats(const balance_request& req, const cfs_features& features);

// adjust_numa_imbalance() tolerates an imbalance between NUMA groups while
// the busiest one runs at most `imbalance_min` fibers (a communicating pair
// stays on its node): returns 0 then, `imbalance` otherwise. imbalance_min 0
// turns the tolerance off.
long adjust_numa_imbalance(long imbalance, unsigned nr_running, unsigned imbalance_min) noexcept;

// adjust_numa_imbalance_v6() is v5.18's (cfs_features::imb_numa_nr): an
// imbalance of at most 2 fibers (before halving) is tolerated, returned as
// 0, while the destination would run at most imb_numa_nr fibers
// (dst_running counts the one it would take); `imbalance` otherwise.
long adjust_numa_imbalance_v6(long imbalance, unsigned dst_running, unsigned imb_numa_nr) noexcept;

// sibling_imbalance() is v6.6's (cfs_features::sibling_imbalance): the
// fibers to move, before halving, so that both groups of sds run as many
// per SMT core (req.sd->group_cores_of()): the difference of counts when
// the groups have as many cores; otherwise ncores_local x nr_busiest -
// ncores_busiest x nr_local (floored at 0), doubled, plus both core counts,
// over the sum of the core counts; 2 when that is at most 1 while the local
// group runs nothing and busiest more than one. 0 for a busy destination
// (cpu_idle_type::not_idle) or an empty busiest group. Requires sds.local
// and sds.busiest.
long sibling_imbalance(const balance_request& req, const sd_lb_stats& sds) noexcept;

// calculate_imbalance() decides how much to pull from sds.busiest and in
// which unit, once find_imbalance() decided to. Sets sds.local_stat.avg_load
// and sds.avg_load where the kernel does. Requires sds.busiest >= 0.
lb_imbalance calculate_imbalance(const balance_request& req, sd_lb_stats& sds,
                                 const cfs_features& features);

// find_imbalance() is find_busiest_group() after the statistics: the
// decision points of the table above calculate_imbalance (in
// cfs_balance.cpp), then calculate_imbalance() when they say "force". A
// zero imbalance means balanced. Works on hand-built statistics too, which
// is how the imbalanced and asym_packing cells are tested.
lb_imbalance find_imbalance(const balance_request& req, sd_lb_stats& sds,
                            const cfs_features& features);

// v4_11_find_imbalance() is v4.11's find_busiest_group() after the
// statistics (cfs_features::v4_11_balance): its balanced checks, then
// calculate_imbalance() with fix_small_imbalance(), always in load units
// (migrate_load). Requires sds.v4_11_local and sds.v4_11_busiest (from
// update_sd_lb_stats() under v4_11_balance). Sets sds.avg_load. A zero
// imbalance means balanced.
lb_imbalance v4_11_find_imbalance(const balance_request& req, sd_lb_stats& sds,
                                  const cfs_features& features);

// v4_11_fix_small_imbalance() is v4.11's fix_small_imbalance(): the
// imbalance computed from the averages is smaller than one fiber of the
// busiest group, so either one whole fiber's load moves (the busiest group
// is ahead by at least that much, or moving one gains total throughput by
// the kernel's capacity arithmetic) or nothing does. Returns the imbalance
// to use: busiest's load_per_task, or `imbalance` unchanged. Reads
// sds.v4_11_local and sds.v4_11_busiest; `dst_load_per_task` stands in for
// the local group's load per fiber when it runs none.
long v4_11_fix_small_imbalance(const sd_lb_stats& sds, long imbalance,
                               unsigned long dst_load_per_task) noexcept;

// v4.19's enum fbq_type, ordered: a runqueue (or group) is `regular` when
// it runs fibers without a preferred node, else `remote` when some of its
// fibers are off their preferred node, else `all` (every fiber where it
// wants to be). find_busiest_queue() looks only at runqueues of a class up
// to the busiest group's, so that well-placed fibers stay while there are
// others to move (cfs_features::numa_v4_19).
enum class fbq_type : unsigned char { regular, remote, all };

// fbq_classify_rq() / fbq_classify_group(): the class of a worker, or of
// the workers `cpus` of a group, from nr_running, nr_numa_running and
// nr_preferred_running (summed over the group).
fbq_type fbq_classify(unsigned nr_running, unsigned nr_numa_running, unsigned nr_preferred_running) noexcept;
fbq_type fbq_classify_group(const balance_request& req, const sched_group& group) noexcept;

// migrate_degrades_locality() is v4.19's: 1 when pulling the fiber from
// env.src_node to env.dst_node takes it off its preferred node while the
// source runs others that are not on theirs (nr_running >
// nr_preferred_running); 0 when it brings it to its preferred node, or
// moves it between two other nodes on a busy destination (both score 0);
// -1 (locality does not decide; cache hotness does) off SD_NUMA levels,
// within a node, for a fiber without a preferred node, for one leaving its
// node when every fiber of the source is on its own, and for one between
// two other nodes onto an idle destination.
int migrate_degrades_locality(const fiber_view& fiber, const detach_env& env) noexcept;

// find_busiest_queue() returns the worker of `group` to pull `imbalance`
// units of `type` from, or -1 when none qualifies: the highest load per
// capacity (a worker with one fiber heavier than the imbalance only if its
// capacity is reduced), the highest util among workers with two fibers or
// more, the first worker with the most fibers, or the biggest misfit.
//
// With features.numa_v4_19, on an SD_NUMA level, a worker whose
// fbq_classify_rq() is above `fbq` (the busiest group's class) is skipped.
int find_busiest_queue(const balance_request& req, const sched_group& group, migration_type type,
                       long imbalance, const cfs_features& features, fbq_type fbq = fbq_type::all);

// find_busiest_group() runs the whole pipeline for req.sd and returns the
// worker to pull from, the migration type and the imbalance, with the group
// types of the local and busiest groups for statistics. The decision is
// empty (busiest -1, imbalance 0) when the domain is balanced or no worker
// of the busiest group qualifies; local_type and busiest_type are still
// filled in as far as they were found. req.sd == nullptr gives an empty
// decision.
balance_decision find_busiest_group(const balance_request& req, const cfs_features& features);

// can_detach() decides whether one queued fiber may leave during a pull and
// how much of env.imbalance it covers: the kernel's can_migrate_task()
// cache-hot rule and detach_tasks() switch (v5.10), with the v5.9 load rule
// and seeds/000 candidates B and C when the features ask for them. With
// features.numa_v4_19 the cache-hot rule is v4.19's: hot is
// migrate_degrades_locality() when it is 0 or 1, else cache hotness.
detach_verdict can_detach(const fiber_view& fiber, const detach_env& env,
                          const cfs_features& features);

// picked_group_without_stacked_cpu() is the seeds/003 `dbg_odd_cnt`
// condition: true when the chosen busiest group has no worker running two
// fibers or more while another non-local group has one, i.e. the balancer
// looked past a stacked worker. The engine counts it. False when there is
// no busiest group.
bool picked_group_without_stacked_cpu(const sd_lb_stats& sds) noexcept;

}  // namespace usched::cfs
