// policy.hpp: the seam between the engine and a load-balancing policy.
//
// A policy is a set of pure decisions. It reads a snapshot the engine built
// (per-worker statistics, the domain it is asked about, a random number) and
// returns a decision: a worker for a waking or new fiber, or which worker to
// pull from, how (migration type) and how much. A policy never takes a lock,
// reads a clock, touches a thread or a fiber context; that is what lets unit
// tests drive it with hand-built snapshots and the simulator run it unchanged
// (DESIGN.md, seam 1). Executing a decision (detaching fibers from one
// runqueue and attaching them to another) is the engine's job.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "domains.hpp"

namespace usched {

// What the engine knows about one worker when it asks a policy. Values are
// read without locks, so they are a consistent-enough picture, not an exact
// one (the kernel's balancer reads remote runqueues the same way).
struct cpu_snapshot {
  unsigned nr_running = 0;  // queued + the one running (the kernel's rq->nr_running)
  unsigned nr_queued = 0;   // waiting in the runqueue, not running
  unsigned nr_pinned = 0;   // of the queued, those pinned to this worker (never movable)
  bool idle = true;         // running nothing (in its idle loop, spinning or parked)
  unsigned long capacity = capacity_scale;
};

// Why a worker is placing a fiber.
enum class placement_kind : std::uint8_t {
  spawn,  // a new fiber (the kernel's fork/exec balance, find_idlest_group)
  wake,   // a blocked fiber became runnable (select_idle_sibling)
};

struct placement_request {
  placement_kind kind = placement_kind::wake;
  int origin = -1;  // worker doing the spawn or wake-up; -1 for a thread outside the runtime
  int prev = -1;    // worker the fiber last ran on; -1 for a new fiber
  std::span<const cpu_snapshot> cpus;
  const domain_tree* domains = nullptr;
  std::uint64_t random = 0;  // fresh random bits for randomized choices
};

// The kernel's enum cpu_idle_type: the state of the worker that balances.
enum class cpu_idle_type : std::uint8_t {
  idle,        // CPU_IDLE: periodic balance on an idle worker
  newly_idle,  // CPU_NEWLY_IDLE: the worker just ran out of fibers
  not_idle,    // CPU_NOT_IDLE: periodic balance on a busy worker
};

// The kernel's enum migration_type: what the imbalance is counted in.
enum class migration_type : std::uint8_t {
  migrate_load,    // sum of load_avg of the fibers moved
  migrate_util,    // sum of util_avg of the fibers moved
  migrate_task,    // number of fibers moved
  migrate_misfit,  // one fiber too big for its worker's capacity
};

const char* to_string(migration_type type) noexcept;

struct balance_request {
  int this_cpu = 0;  // the worker that balances (the destination of any pull)
  cpu_idle_type idle = cpu_idle_type::newly_idle;
  const sched_domain* sd = nullptr;  // the level being balanced, from this_cpu's chain
  std::span<const cpu_snapshot> cpus;
  unsigned nr_balance_failed = 0;  // consecutive failed attempts at this level
  std::uint64_t random = 0;
};

// What to pull: `imbalance` units of `type` from worker `busiest`, onto
// this_cpu. A decision with busiest < 0 means "balanced, do nothing".
struct balance_decision {
  int busiest = -1;
  migration_type type = migration_type::migrate_task;
  long imbalance = 0;

  explicit operator bool() const noexcept { return busiest >= 0 && imbalance > 0; }
};

class policy {
 public:
  virtual ~policy() = default;

  // The registered name, as USCHED_POLICY spells it.
  virtual std::string_view name() const noexcept = 0;

  // select_cpu() returns the worker that should run a new or woken fiber. It is
  // not asked about pinned fibers. The result must be a valid worker index.
  virtual int select_cpu(const placement_request& req) const = 0;

  // find_busiest() decides whether, from where and how much this_cpu should
  // pull within req.sd. Called for each level of this_cpu's chain, narrowest
  // first.
  virtual balance_decision find_busiest(const balance_request& req) const = 0;

  // True when the policy pulls work on an idle worker. The runtime then wakes a
  // parked worker when work queues up behind a busy one, so it can pull; for a
  // policy that never pulls, that wake-up would be wasted.
  virtual bool pulls_when_idle() const noexcept = 0;
};

// One entry of the registry.
struct policy_info {
  std::string_view name;
  std::string_view summary;  // one line for listings and --help
  std::unique_ptr<policy> (*make)();
};

// Every policy, in listing order. The registry is a constant table: tests,
// benchmarks and error messages iterate over it.
std::span<const policy_info> registered_policies() noexcept;

// make_policy() builds the policy called `name`. Throws usched::config_error
// naming the value and listing the registered names when there is none.
std::unique_ptr<policy> make_policy(std::string_view name);

// "none, steal": the registered names, comma separated.
std::string policy_names_joined();

}  // namespace usched
