// usched/options.hpp: every tunable of a runtime, in one struct.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <usched/worker_unit.hpp>

namespace usched {

// The default usable stack of a fiber. Sanitizers enlarge every frame (ASan's
// redzones; TSan's runtime runs its own calls on the fiber's stack), so a
// sanitized build starts from a larger default.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr std::size_t default_stack_size = 256 * 1024;
#else
inline constexpr std::size_t default_stack_size = 64 * 1024;
#endif

// The most workers a runtime may have, and the most PUs a topology may
// describe (checked before hwloc builds a synthetic one, which for some
// shapes takes it minutes). Half the kernel's NR_CPUS of distribution
// kernels: every worker's balance pass reads a snapshot of every runqueue,
// so a runtime's memory grows with the square of its workers (4096 workers
// start in about 2 s and 1.4 GB; 8192 would need 5.4 GB).
inline constexpr unsigned max_workers = 4096;

// options configures a runtime. Every field has a default, the embedder's;
// options::kernel_experiment() is the kernel's, which the simulator runs.
// options::from_env() starts from the defaults (or from the options it is
// given) and overrides each field whose environment variable is set. validate() checks every field, whichever way it was set; the runtime
// constructors call it, and check the topology and the worker count against
// each other. A bad value throws usched::config_error.
struct options {
  // Load-balancing policy by registered name (USCHED_POLICY). See
  // usched::policy_names() or docs/policies/.
  std::string policy = "cfs";

  // Number of workers (USCHED_WORKERS: a number, `pus` or `cores`). 0 means one
  // per unit of `unit`; at most max_workers. More workers than the topology
  // has units is an oversubscribed run: the workers are not pinned, and worker
  // i takes the place of unit i mod units in the domain hierarchy (a warning
  // says so at start).
  unsigned workers = 0;
  worker_unit unit = worker_unit::pu;

  // Topology to schedule on (USCHED_TOPOLOGY): empty for this host, a hwloc
  // synthetic description ("pack:2 l3:2 core:4 pu:2"), or a path to a hwloc
  // XML file. Workers are pinned only when the topology fits this host.
  std::string topology;

  // Time a fiber may run before this_fiber::preempt_point() yields
  // (USCHED_SLICE_US), 1 us..10 s.
  std::chrono::microseconds slice{3000};

  // Stall report (USCHED_STALL_MS), 0..1 h: a fiber that runs this long
  // without a switch or a preempt point is named once, at warn level, by
  // the runtime's monitor (its id and label, its worker, how long); and a
  // runtime whose workers have all been parked for max(stall, 1 s) while
  // fibers wait that nothing inside it can wake (no timer, no I/O, no
  // blocking call) lists them once, as the destructor's hang report does.
  // 0 turns both off.
  std::chrono::milliseconds stall{50};

  // Usable stack of every fiber, excluding its guard page (USCHED_STACK_KB),
  // 16 KiB..1 GiB, in bytes: 64 KiB (256 KiB in sanitizer builds, see
  // default_stack_size).
  std::size_t stack_size = default_stack_size;

  // How fiber stacks are guarded (USCHED_GUARD_PAGES): `auto` puts a guard
  // region below every stack where the kernel has them (Linux 6.13+,
  // MADV_GUARD_INSTALL: no mapping per stack, so no limit), else a
  // PROT_NONE page while a quarter of vm.max_map_count lasts, then a canary
  // that the tick and the fiber's exit check; `mprotect` skips guard
  // regions (to compare with older kernels). Either way an overflow is a
  // one-line report naming the fiber (docs/architecture.md).
  enum class guard_pages { automatic, mprotect };
  guard_pages stack_guard = guard_pages::automatic;

  // How long an idle worker spins looking for work before it parks
  // (USCHED_SPIN_US), 0..1 s. Spinning buys wake-up latency with CPU time.
  std::chrono::microseconds spin{50};

  // Pin workers to their PUs (USCHED_PIN=0 disables).
  bool pin = true;

  // The most OS threads usched::blocking() runs calls on at once
  // (USCHED_BLOCKING_THREADS), 1..4096. Threads are started as calls
  // need them and kept until the runtime ends; a call that finds them all
  // busy waits in line. They are not workers: a blocked read() there
  // stalls no fiber but its caller.
  unsigned blocking_threads = 64;

  // CFS-family local discipline (ignored by FIFO policies). The period over
  // which every runnable fiber should run once (sched_latency), the least a
  // fiber runs before the tick may end its slice (min_granularity), and how
  // much smaller a woken fiber's vruntime must be to preempt the running one
  // (wakeup_granularity). These are the kernel's normalized values (6 ms,
  // 0.75 ms, 1 ms by default), which the runtime scales by its number of
  // workers as the kernel scales them by its CPUs (sysctl_sched_tunable_
  // scaling, USCHED_CFS_TUNABLE_SCALING): `log` (the kernel's default)
  // multiplies them by 1 + log2(min(workers, 8)), so 8 or more workers get
  // 24 ms, 3 ms and 4 ms; `linear` by min(workers, 8); `none` uses them as
  // they are. Accepted: latency 100 us..10 s, min granularity 10 us..10 s,
  // wake-up granularity 0..10 s.
  std::chrono::microseconds cfs_latency{6000};
  std::chrono::microseconds cfs_min_granularity{750};
  std::chrono::microseconds cfs_wakeup_granularity{1000};
  enum class tunable_scaling { none, log, linear };
  tunable_scaling cfs_tunable_scaling = tunable_scaling::log;

  // EEVDF local discipline (policies with the eevdf discipline; ignored by
  // the others). The base slice, the virtual time between a fiber's
  // deadlines when it asked for none (spawn_options::slice): the kernel's
  // normalized sysctl_sched_base_slice, scaled like the CFS values above
  // (USCHED_EEVDF_BASE_SLICE_US; 0.7 ms, so 2.8 ms with 8 or more workers;
  // 100 us..100 ms). The discipline's switches, the kernel's scheduler
  // features of the same names (USCHED_SCHED_FEATURES: a comma-separated
  // list, a name turns one on, NO_ and the name turns it off; all on by
  // default): PLACE_LAG, PLACE_DEADLINE_INITIAL, PLACE_REL_DEADLINE,
  // RUN_TO_PARITY, PREEMPT_SHORT, DELAY_DEQUEUE, DELAY_ZERO
  // (docs/policies/eevdf.md). A bit mask here: bit i is the i-th of that list.
  std::chrono::microseconds eevdf_base_slice{700};
  unsigned eevdf_features = (1u << 7) - 1;

  // PELT load tracking under fair policies (USCHED_LOAD_TRACKING=0 turns it
  // off). Off, every load signal reads 0 and the CFS balancer decides on
  // fiber counts alone; it exists to measure what load tracking costs on
  // the switch path (bench/micro: yield/cfs vs yield/cfs-nopelt).
  bool load_tracking = true;

  // The join hand-off (USCHED_JOIN_HANDOFF=0 turns it off), under every
  // policy: a fiber that joins one still queued on its own worker hands the
  // worker to it, and a fiber that exits hands its worker back to a joiner
  // that last ran there. Fork-join code then runs depth-first, with a
  // handful of fibers alive per worker instead of every leaf of the tree
  // (docs/performance.md). The kernel has no join to hand off from:
  // kernel_experiment() turns it off.
  bool join_handoff = true;

  // Fork balancing (USCHED_FORK_BALANCE=1 turns it on): whether a spawn
  // from a worker asks the policy where the new fiber goes (under CFS, the
  // kernel's fork balance: find_idlest_cpu() over a snapshot of every
  // worker, SD_BALANCE_FORK on every domain), or stays on the spawner's
  // worker for idle workers to pull, as Go and Tokio place a spawn. Off by
  // default: a fork balance costs a snapshot of every worker per spawn and
  // sends most spawns of a busy worker to another one, which costs more
  // than a small fiber's work (docs/performance.md); kernel_experiment()
  // turns it on. A spawn from outside the runtime, or of a fiber with a
  // preferred node, is placed by the policy either way; FIFO and LIFO
  // policies place a spawn from a worker locally either way.
  bool fork_balance = false;

  // The workers' I/O reactor (USCHED_IO; docs/io.md): `auto` sets up an
  // io_uring per worker and falls back to epoll, with one warning that says
  // why, where the kernel refuses one (a seccomp profile, the
  // io_uring_disabled sysctl, a kernel older than 6.1); `io_uring` insists
  // (the runtime's constructor throws usched::config_error saying why it
  // cannot); `epoll` asks for the epoll backend.
  enum class io_backend { automatic, io_uring, epoll };
  io_backend io = io_backend::automatic;

  // Print statistics to stderr when the runtime shuts down (USCHED_STATS):
  // none, a readable table (`1`), or one JSON document (`json`).
  enum class stats_output { none, table, json };
  stats_output stats = stats_output::none;

  // Recording what the scheduler did (docs/tracing.md). `trace`
  // (USCHED_TRACE) is the file a trace is written to, in the format its
  // name says: a name ending in `.json` gets Chrome's Trace Event Format
  // (Perfetto's UI, chrome://tracing), any other Linux ftrace text (what
  // `trace-cmd report` prints); empty (the default) records nothing
  // unless trace_flight asks for a flight recorder.
  // `trace_flight` (USCHED_TRACE_FLIGHT), 0..16777216: 0 records the whole
  // run and writes it to `trace` when the runtime is destroyed; N keeps
  // only the last N events of each worker (rounded up to a power of two,
  // at least 16), written only when asked: runtime::dump_trace(), a
  // stall report, a fatal report (to `trace`, when it is set).
  // `trace_limit_mb` (USCHED_TRACE_LIMIT_MB), 1..65536: the most memory a
  // whole run's trace takes; events past it are counted as dropped.
  std::string trace;
  unsigned trace_flight = 0;
  unsigned trace_limit_mb = 1024;

  // spdlog level of the runtime's logger (USCHED_LOG): trace, debug, info,
  // warn, error, critical or off. At info the runtime logs its topology,
  // domain tree and policy when it starts.
  std::string log_level = "warn";

  // kernel_experiment() is the kernel's configuration, the one the
  // simulator runs (usched_sim, its --experiments page, the seed tests):
  // the embedder's defaults above except where the kernel whose
  // regressions the seeds record behaves otherwise. A spawn is placed by
  // the fork balance (fork_balance on: every domain has SD_BALANCE_FORK),
  // and a joiner blocks and is woken like any other waiter (join_handoff
  // off: the kernel has no join to hand a CPU over from). Every other field
  // keeps its default, so a simulation and a runtime made from the same
  // options differ in nothing else.
  static options kernel_experiment();

  // from_env() returns the defaults overridden by the USCHED_* variables that
  // are set (an empty variable counts as unset), validated; from_env(base)
  // the same on top of `base` (usched_sim reads them on top of
  // kernel_experiment()). Throws usched::config_error naming the variable,
  // its value and what is accepted. These are the only readers of USCHED_*.
  static options from_env();
  static options from_env(options base);

  // validate() checks every field against what it accepts (the topology and
  // the worker count against each other are checked when a runtime is built).
  // Throws usched::config_error with one line that names the value as it was
  // set: by its variable ("USCHED_SPIN_US='99999999' ...") while the field
  // holds what the environment gave it, else by its field
  // ("options::spin=3600000000us ...").
  void validate() const;

  // Field by field.
  bool operator==(const options&) const = default;
};

// The names of the registered load-balancing policies, in listing order.
std::vector<std::string> policy_names();

// parse_sched_features() applies a comma-separated list of EEVDF switches
// to `mask` (options::eevdf_features), as a write to the kernel's
// sched_features file applies one: NAME turns it on, NO_NAME off; spaces
// and empty entries are skipped. nullopt when a name is not one of
// sched_feature_names().
std::optional<unsigned> parse_sched_features(std::string_view list, unsigned mask);
// "PLACE_LAG, PLACE_DEADLINE_INITIAL, ...": the switches, in bit order.
std::string sched_feature_names();

}  // namespace usched
