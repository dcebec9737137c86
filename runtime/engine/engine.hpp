// engine.hpp: the backend-neutral half of the scheduler, the class and
// its contracts.
//
// The engine owns the runqueues and everything that happens to a fiber while
// it is runnable: where a new or woken fiber is queued (placement by the
// policy), in which order a worker runs its fibers (FIFO, or CFS's vruntime
// order with slices and wake-up preemption), load tracking (PELT), and
// balancing (the balance driver asks the policy, then detaches and attaches
// fibers). It creates no threads, switches no contexts and reads no clock:
// every entry point takes `now` (ns) from its caller, as a now_source, and
// returns what the backend must do (the worker to notify, whether to kick an
// idle one, a fiber pushed elsewhere). Every scheduling decision is made here
// (the kernel's core.c to the policies' fair.c); a backend only runs fibers,
// parks and wakes workers, and keeps timers. The real backend (worker.cpp)
// drives it with the time-stamp counter; the simulator (sim/) drives the
// same code with virtual time (DESIGN.md, seam 2).
//
// One class, served from several files by concern, as the kernel serves
// one struct rq from core.c, fair.c and pelt.c:
//   sched_entity.hpp   the part of a fiber the engine sees
//   runqueue.hpp       a worker's runqueue, balancing state and counters
//   engine_config.hpp  the tunables, and how options fill them
//   events.hpp         what an event takes (now_source) and returns
//   engine.hpp         this class: the events, the queries, the contracts
//   engine_inline.hpp  the always-inline fast paths (the switch, the queue)
//   engine.cpp         construction and statistics
//   core.cpp           the events: wake-up, enqueue, pick, idle, tick
//   fair.cpp           the fair discipline (vruntime, slices, preemption)
//   load.cpp           load tracking's runqueue side (publishing, util_est)
//   placement.cpp      snapshots and wake-up/spawn placement
//   balance.cpp        the balance driver (newly-idle, periodic, active)
//   join.cpp           the join hand-off
//   trace_events.cpp   the trace's records of the events (trace.hpp)
// (pelt.hpp/.cpp, timeline.hpp and domains.hpp/.cpp are the engine's
// building blocks: the PELT arithmetic, the fair queue's tree, the
// scheduling domains.)
//
// Locking: each runqueue has its own spinlock, taken inside the engine. No
// function here ever holds two runqueue locks at once: migration is
// two-phase, detach under the source's lock, then attach under the
// destination's.
#pragma once

#include <atomic>
#include <cassert>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <usched/runtime.hpp>

#include "domains.hpp"
#include "engine_config.hpp"
#include "events.hpp"
#include "pelt.hpp"
#include "policy.hpp"
#include "runqueue.hpp"
#include "sched_entity.hpp"
#include "timeline.hpp"
#include "trace.hpp"

namespace usched::detail {

// engine_test_access opens the engine's internals (its runqueues, the
// balance driver's steps) to the engine tests, which build states by hand
// and check each step of a decision (tests/engine_test_access.hpp). Nothing
// else uses it.
struct engine_test_access;

class engine {
 public:
  // Upper bound on fibers moved by one balance pass (the kernel's
  // sysctl_sched_nr_migrate default, which ghOSt's userspace CFS also uses):
  // it bounds the time a source queue's lock is held.
  static constexpr unsigned max_migrate_per_pass = 32;

  // The exit latency a backend reports for a parked worker
  // (set_idle_state()): what waking it costs before it runs, the futex
  // wake-to-run p50 of a parked worker (wake_cv parked, 5170 ns in
  // docs/performance.md; the simulator's wake_parked_ns). A spinning
  // worker reports 0, as the kernel's polling idle state has. Only the
  // order matters to the spawn placement (a spinning worker before a
  // parked one), so the value needs no tuning per machine.
  static constexpr std::int64_t parked_exit_latency_ns = 5000;

  engine(domain_tree domains, std::unique_ptr<usched::policy> pol, engine_config cfg = {});

  std::size_t nr_cpus() const noexcept { return domains_.nr_cpus(); }
  const domain_tree& domains() const noexcept { return domains_; }
  const usched::policy& policy() const noexcept { return *policy_; }
  const engine_config& config() const noexcept { return cfg_; }
  bool fair() const noexcept { return fair_; }
  bool eevdf() const noexcept { return eevdf_; }
  bool tracks_load() const noexcept { return tracks_load_; }
  // keeps_time(): whether a switch away from a running fiber reads the
  // clock (vruntime or load accounting); FIFO and LIFO without load
  // tracking never do.
  bool keeps_time() const noexcept { return fair_ || tracks_load_; }
  // idle_pulls_by_itself(): whether an idle worker balances at every poll
  // of its spin (idle_poll(): the work stealers), and so finds fibers queued
  // elsewhere without being told. The CFS family's idle workers balance
  // only when kicked or at their tick.
  bool idle_pulls_by_itself() const noexcept { return traits_.pulls_when_idle && !traits_.rations_newidle; }

  // ---- events: what a backend calls -----------------------------------------
  //
  // wake_up() is try_to_wake_up() and wake_up_new_task(): a fiber made
  // runnable by `origin` (the worker the wake-up is from, -1 for a thread
  // outside the runtime; a timer's wake-up is from the worker that armed
  // it; a spawn's is the worker whose running fiber spawns) is placed
  // (select_cpu), queued (enqueue) and the result says whom
  // to wake. A wake-up of a fiber still on its way to block only marks it
  // (wake_running), and cpu is -1. `scratch` is the caller's snapshot space.
  //
  // `by_origin` says whether the calling thread is origin's worker (false
  // for a timer that another worker fires on origin's behalf): only then
  // does the placement write origin's state (its running fiber's
  // recent_used_cpu, its scan average).
  //
  // `why` is what made the fiber runnable (wake_reason::spawn for a
  // spawn). The kernel's try_to_wake_up() has no such argument: it is for
  // accounting only, counted on the worker the fiber lands on
  // (cpu_counters::wakeups, under that runqueue's lock; for a fiber still
  // on its way to block, on the worker it stays on), and never read by
  // placement, which decides the same whatever it is.
  wake_result wake_up(sched_entity* se, placement_kind kind, wake_reason why, int origin, std::uint64_t random,
                      std::vector<cpu_snapshot>& scratch, const now_source& now, bool by_origin = true);

  // The join hand-off (engine_config::join_handoff), both halves, each
  // called by worker `cpu` for its running fiber:
  //
  // hand_off() is the joiner's: it is about to block until `target`
  // finishes; if target waits in cpu's queue, that block's pick runs it
  // (true). Locks cpu's runqueue. With the hand-off off, or target running
  // or queued elsewhere, nothing changes (false).
  //
  // wake_joiner() is the exiting fiber's: it wakes `joiner`, which waits
  // for it. A joiner that last ran on cpu (and may run there) is queued
  // there without a placement, and the exit's pick runs it: the fork-join
  // continuation resumes where its children ran. Otherwise, or with the
  // hand-off off, it is wake_up() of a plain wake-up. Either way the
  // wake-up counts as wake_reason::join.
  bool hand_off(int cpu, sched_entity* target);
  wake_result wake_joiner(sched_entity* joiner, int cpu, std::uint64_t random, std::vector<cpu_snapshot>& scratch,
                          const now_source& now);

  // The backends take both halves in the switch they end in, one lock hold
  // each instead of two; a differential test holds them to the two-step
  // sequences above.
  //
  // The joiner's: schedule(cpu, prev, block, now, joined), where joined is
  // the fiber prev waits for, is hand_off(cpu, joined) and then the block's
  // pick, under the one lock of that pick (and the same under a block that
  // a wake-up turned into a requeue).
  //
  // The exiting fiber's: hands_back(joiner, cpu) says whether wake_joiner()
  // would hand cpu to the joiner; if so, exit_to_joiner(cpu, prev, joiner,
  // now) is wake_joiner() and then the exit's pick (schedule(cpu, prev,
  // exit)), with the joiner made the running fiber directly (its wake-up
  // counted as wake_reason::join, as wake_joiner() counts it): it never
  // enters the queue, so there is no insert and erase of it, no queue
  // count to publish, and the runqueue's signals change once. The overload
  // flag is noted from the state after the exit (the two-step path notes
  // it with the joiner queued, which overloads a worker that will not be).
  // Otherwise the backend wakes the joiner with wake_up() and then
  // schedules the exit.
  bool hands_back(const sched_entity& joiner, int cpu) const noexcept {
    return cfg_.join_handoff && joiner.cpu.load(std::memory_order_relaxed) == cpu &&
           (joiner.pinned < 0 || joiner.pinned == cpu);
  }
  pick_result exit_to_joiner(int cpu, sched_entity* prev, sched_entity* joiner, const now_source& now);

  // schedule() is the running worker's switch decision: prev (its running
  // fiber) stops running as `action` says, and the next fiber comes back
  // (see pick_next). The FIFO disciplines without load tracking take the
  // short paths (yield_fifo, leave_fifo), which read no clock. Inline: it
  // is most of a yield.
  // `joined`: see the join hand-off above (a block only).
  [[gnu::always_inline]] pick_result schedule(int cpu, sched_entity* prev, prev_action action,
                                              const now_source& now, sched_entity* joined = nullptr);

  // find_work() is the idle worker's schedule(): the first queued fiber;
  // if there is none, a newly-idle balance (idle_balance) and a second
  // look. Null when there is still nothing. `kicked`: the worker was sent
  // by a pull kick (wake_result::pull); its pass is not rationed.
  sched_entity* find_work(int cpu, const now_source& now, std::uint64_t random,
                          std::vector<cpu_snapshot>& scratch, bool kicked = false);

  // idle_poll() is what a spinning worker does at each poll, and once more
  // before it parks: idle_balance() again for the policies whose idle
  // workers keep looking (the work stealers' spinning thieves), nothing
  // for those that follow the kernel (the CFS family): an idle CPU there
  // balances again only from its tick (tick(), as CPU_IDLE) or when a busy
  // one kicks it.
  unsigned idle_poll(int cpu, const now_source& now, std::uint64_t random, std::vector<cpu_snapshot>& scratch) {
    return traits_.rations_newidle ? 0 : idle_balance(cpu, now, random, scratch);
  }

  // tick() is the per-worker periodic work, called by the running worker
  // every config().tick_ns and from its idle loop: PELT update of the
  // running fiber, the periodic balance of every due domain level, and the
  // nohz kick decision (tick_result::kick: fibers are queued behind this
  // busy worker and it last kicked at least idle_kick_interval_ns ago).
  tick_result tick(int cpu, const now_source& now, std::uint64_t random, std::vector<cpu_snapshot>& scratch);

  // kick() decides which idle worker a kick goes to (wake_result::kick,
  // pick_result::kick, tick_result::kick): work is queued behind the busy
  // worker `busy_cpu`, and one idle worker is enough (it balances, and
  // wakes no others). A plain kick leaves a spinning worker alone: a work
  // stealer finds the work by itself, and the CFS family's idle worker
  // balances from its tick, as the kernel's does; it wakes a parked worker
  // when none spins. A pull kick (wake_result::pull: a spawn that fork
  // balancing would have placed) tells a spinning worker first (a store
  // instead of a futex wake and a wait for its thread), and else wakes a
  // parked one; either balances unrationed. The search starts at a random
  // worker. `idle` is the backend's view of its idle workers:
  //   unsigned nr_spinning(), nr_parked(): how many spin, or are parked;
  //   std::uint64_t random(): the bits of the search's start, drawn only
  //     when a search is made;
  //   bool tell_spinning(int cpu): if cpu spins, ask it to leave its spin
  //     and balance unrationed; true when it has been asked (now or by an
  //     earlier kick). Asked in search order, not again after the first yes;
  //   bool parked(int cpu).
  // The backend carries out the result: it notifies kick_result::cpu, for
  // a pull marked as one.
  template <class Idle>
  kick_result kick(int busy_cpu, bool pull, Idle&& idle) const;

  // ---- the steps the events are made of ---------------------------------------
  // Called by the events above; the placement benchmark and the engine
  // tests call them one at a time (the simulator queues a workload's first
  // fibers with enqueue()).
  //
  // select_cpu() chooses the worker for a new (kind == spawn) or woken fiber:
  // its pinned worker if it has one, else the policy's choice. `origin` is the
  // worker asking, -1 for a thread outside the runtime. Counts the wake-up
  // path on `origin` (or the target when origin < 0), and applies what the
  // placement noted (recent_used_cpu, the has_idle_cores hint, the scan
  // average). Takes no lock.
  int select_cpu(placement_kind kind, sched_entity& se, int origin, std::uint64_t random,
                 std::vector<cpu_snapshot>& scratch, const now_source& now, bool by_origin = true);

  // enqueue() makes `se` runnable on `cpu`. Locks that runqueue. Returns the
  // number queued after the push. `handoff`: a joiner woken by the fiber
  // exiting on cpu (wake_joiner): it is cpu's next pick, and the exiting
  // fiber is not asked to yield for it. `why`: the wake-up events pass
  // their reason, counted on cpu under the lock the enqueue holds; a
  // caller of the step alone may leave it out, and nothing is counted.
  // `waker`: the worker whose thread wakes it, -1 for none (a thread
  // outside the runtime, a caller of the step alone); see count_wakeup().
  unsigned enqueue(int cpu, sched_entity* se, enqueue_kind kind, const now_source& now, bool handoff = false,
                   std::optional<wake_reason> why = std::nullopt, int waker = -1);

  // pick_next() is the worker's scheduling decision: `prev` (the running
  // fiber, or null from the idle loop) stops running as `action` says, and
  // the next fiber to run comes back (possibly prev itself after a requeue),
  // or null when there is none. Locks the runqueue once. If an active
  // balance asked for it, a requeued prev is pushed to the requesting worker
  // instead (its lock taken after ours is released); *pushed_to then names
  // that worker, which the caller must wake.
  // `joined`: a fiber queued here that prev, blocking, waits for (the
  // join hand-off, schedule()): it runs next.
  sched_entity* pick_next(int cpu, sched_entity* prev, prev_action action, const now_source& now,
                          int* pushed_to = nullptr, sched_entity* joined = nullptr);

  // The backend's own work done on a worker while a fiber is its running one
  // (the I/O reactor's submissions and reaping, docs/io.md) is not that
  // fiber's: the kernel takes interrupt time out of the task clock the same
  // way (IRQ_TIME_ACCOUNTING's clock_task), and under the fair discipline a
  // fiber charged for it falls behind every other in vruntime: with a
  // hundred connections on one worker, half a second behind. foreign_begin()
  // charges cpu's running fiber up to now and notes where it stands;
  // foreign_end() gives back whatever it was charged since (a wake-up's
  // update_curr in between included) and restarts its clock now. Both lock
  // cpu's runqueue; nothing happens unless fair() and `se` is still cpu's
  // running fiber.
  struct foreign_mark {
    sched_entity* se = nullptr;
    std::uint64_t vruntime = 0;
    std::int64_t sum_exec = 0;      // fair
    std::uint64_t deadline = 0;     // eevdf
    std::int64_t begun = 0;         // eevdf: when the foreign work began
  };
  foreign_mark foreign_begin(int cpu, sched_entity* se, const now_source& now);
  void foreign_end(int cpu, const foreign_mark& m, const now_source& now);

  // ---- queries: a worker's state as a backend may read it, lock-free ----------
  //
  // should_preempt() is the running fiber's question at a preempt point:
  // has someone asked it to yield (a wake-up, the tick, an active
  // balance), or, under FIFO and LIFO, has it used up its fixed slice while
  // others wait? `ran_ns` is how long it has run since its slice began (the
  // backend measures it: the real one with the counter it reads at the
  // preempt point anyway). The fair discipline ends a slice only at the
  // tick, as the kernel's check_preempt_tick() does (tick()): the slice is
  // recomputed there from the runqueue as it is then. No lock. Inline: a
  // think loop asks it at every clock read.
  bool should_preempt(int cpu, std::int64_t ran_ns) const noexcept;

  // has_queued(): whether fibers wait in cpu's queue. A worker about to
  // park reads it seq_cst: its store to its park word, then this load,
  // against a pusher's seq_cst store of the count, then its load of the
  // park word (worker.cpp, idle_wait): one side always sees the other.
  // Elsewhere relaxed is enough: a stale answer only delays a look.
  bool has_queued(int cpu, std::memory_order order = std::memory_order_relaxed) const noexcept {
    return rq(cpu).nr_queued.load(order) != 0;
  }
  // set_idle_state(): cpu's worker, idle, is now in an idle state whose
  // exit latency is `exit_latency_ns` (0: spinning; parked_exit_latency_ns:
  // parked), and has been idle since `since_ns` (engine time: when it
  // stopped running fibers, unchanged while it only changes depth). The
  // kernel's idle_set_state() and rq->idle_stamp, read by the spawn
  // placement to choose between idle workers (find_idlest_group_cpu()).
  // Only cpu's own thread calls it; the stores are relaxed, as every value
  // a snapshot reads: a stale one only makes a placement less precise.
  void set_idle_state(int cpu, std::int64_t exit_latency_ns, std::int64_t since_ns) noexcept {
    runqueue& q = rq(cpu);
    q.idle_exit_latency.store(exit_latency_ns, std::memory_order_relaxed);
    q.idle_since.store(since_ns, std::memory_order_relaxed);
  }
  // nr_queued(): how many fibers wait in cpu's queue (relaxed: a count
  // for the backend's spawn backlog, exact only under the lock).
  unsigned nr_queued(int cpu) const noexcept { return rq(cpu).nr_queued.load(std::memory_order_relaxed); }
  // resched_asked(): whether cpu's running fiber has been asked to yield
  // at its next preempt point (a wake-up, the tick, an active balance).
  // slice_ns(): the slice it was given when picked (the fixed slice under
  // FIFO and LIFO). cpu_idle(): whether cpu's last pick found nothing to
  // run. Relaxed: the simulator reads them between its events, when no
  // other thread writes.
  bool resched_asked(int cpu) const noexcept { return rq(cpu).need_resched.load(std::memory_order_relaxed); }
  std::int64_t slice_ns(int cpu) const noexcept { return rq(cpu).slice_ns; }
  bool cpu_idle(int cpu) const noexcept { return rq(cpu).idle.load(std::memory_order_relaxed); }
  // How many active balances have been asked for so far (each sets the
  // busiest worker's need_resched): a backend that does not poll
  // need_resched (the simulator) looks for the asked worker when this
  // changes.
  std::uint64_t active_balance_requests() const noexcept {
    return active_requests_.n.load(std::memory_order_relaxed);
  }

  // ---- tracing (trace_events.cpp) ------------------------------------------------
  //
  // With a tracer set, every event above records what it decided
  // (trace.hpp): a switch (with why the previous fiber stopped), a wake-up
  // or spawn and where it was placed, a migration and what moved it, a
  // balance pass's decision. Off (null, the default), each event pays one
  // load and a branch predicted not taken. The engine knows fibers only as
  // sched_entities; the backend says how to name one (its id) and what a
  // blocking one waits in (a wait_kind, or 0). Set before any event, never
  // changed while the backend runs.
  // `clock`, when set, is read for the records made after an event's work
  // rather than before it (an idle worker's pick of a fiber its balance just
  // took, the balance's own records): a fiber stolen from a busy worker
  // starts on the thief after it stopped there, whatever `now` the event
  // was given. Null (the simulator's): those records take `now` too.
  struct trace_hooks {
    std::uint64_t (*id)(const sched_entity&) noexcept = nullptr;
    std::uint8_t (*wait)(const sched_entity&) noexcept = nullptr;
    std::int64_t (*clock)() noexcept = nullptr;
  };
  void set_tracer(tracer* t, trace_hooks hooks) noexcept {
    tracer_ = t;
    trace_hooks_ = hooks;
  }
  tracer* tracing() const noexcept { return tracer_; }
  // trace_idle(): the backend's record of worker cpu's idle loop (`from`:
  // the worker that kicked it, for idle_kind::kick).
  void trace_idle(int cpu, idle_kind k, const now_source& now, int from = -1) const noexcept;

  // ---- statistics ---------------------------------------------------------------
  const cpu_counters& counters(int cpu) const noexcept {
    return counters_[static_cast<std::size_t>(cpu)];
  }
  const level_counters& counters(int cpu, std::size_t level) const noexcept {
    return level_counters_[static_cast<std::size_t>(cpu)][level];
  }
  // add_counters() copies worker `cpu`'s engine counters (placement,
  // balancing, every domain level's) into what runtime::stats() reports;
  // the backend adds its own (switches, parks, idle and busy time).
  void add_counters(int cpu, worker_stats& out) const;

 private:
  friend struct engine_test_access;

  // ---- the trace's records (trace_events.cpp) -----------------------------------
  // schedule() with a tracer: the same decision, then its switch record.
  pick_result schedule_traced(int cpu, sched_entity* prev, prev_action action, const now_source& now,
                              sched_entity* joined);
  [[gnu::always_inline]] pick_result schedule_untraced(int cpu, sched_entity* prev, prev_action action,
                                                       const now_source& now, sched_entity* joined);
  std::uint64_t trace_id(const sched_entity* se) const noexcept { return se ? trace_hooks_.id(*se) : 0; }
  // The time of a record made after the event's work (trace_hooks::clock).
  std::int64_t trace_time(const now_source& now) const noexcept {
    return trace_hooks_.clock ? trace_hooks_.clock() : now();
  }
  void trace_switch(int cpu, const sched_entity* prev, stop_reason why, bool prev_runnable,
                    const sched_entity* next, const now_source& now) const noexcept;
  // trace_wakeup(): `asked_before`: cpu's running fiber had been asked to
  // yield before this wake-up (or the wake-up cannot ask it: a join's
  // hand-off); only a wake-up that found it unasked and left it asked, for
  // a wake-up preemption, is marked as preempting.
  void trace_wakeup(std::uint64_t id, placement_kind kind, wake_reason why, int origin,
                    bool by_origin, int prev_cpu, int cpu, bool running, const now_source& now,
                    bool asked_before = true) const noexcept;
  void trace_migrate(std::uint64_t id, int from, int to, migrate_cause c, int level, int by,
                     const now_source& now) const noexcept;
  void trace_balance(int cpu, std::size_t level, cpu_idle_type idle, const balance_decision& d, balance_outcome o,
                     unsigned moved, const now_source& now) const noexcept;
  // What moved a fiber a balance pass of this kind pulled.
  migrate_cause pull_cause(cpu_idle_type idle) const noexcept;

  // Above this many runnable fibers the CFS period stretches to
  // nr x min_granularity instead of sched_latency: the kernel's
  // sched_nr_latency, latency / min_granularity rounded up (8 with the
  // default granularities, whatever the scaling).
  unsigned sched_nr_latency() const noexcept { return nr_latency_; }
  bool lifo() const noexcept { return lifo_; }

  runqueue& rq(int cpu) noexcept { return rqs_[static_cast<std::size_t>(cpu)]; }
  const runqueue& rq(int cpu) const noexcept { return rqs_[static_cast<std::size_t>(cpu)]; }

  // ---- the switch's fast paths (engine_inline.hpp) -----------------------------
  [[gnu::always_inline]] sched_entity* yield_fifo(int cpu, sched_entity* prev, const now_source& now,
                                                  int* pushed_to);

  [[gnu::always_inline]] sched_entity* yield_fair(int cpu, sched_entity* prev, const now_source& now, int* pushed_to);

  // ---- queue bookkeeping (engine_inline.hpp; the timeline's part in fair.cpp) ---
  // `in_tree`: se is in EEVDF's tree already (a delayed fiber made runnable
  // again): the list and the counts only.
  void queue_insert(runqueue& q, sched_entity* se, bool publish = true, bool front = false,
                    bool in_tree = false) noexcept;
  void queue_remove(runqueue& q, sched_entity* se) noexcept;
  void add_runnable(int cpu, runqueue& q, sched_entity* se, enqueue_kind kind) noexcept;
  void make_next(int cpu, runqueue& q, sched_entity* se) noexcept;
  void take_handoff(int cpu, runqueue& q, sched_entity* joined) noexcept;
  // The queue-order list alone (no counts, no timeline); inline, for the
  // yield path.
  static void list_link(runqueue& q, sched_entity* se, bool front) noexcept;
  static void list_unlink(runqueue& q, sched_entity* se) noexcept;
  // The virtual-time order's insert and erase: CFS's timeline or EEVDF's
  // tree, whichever the discipline keeps.
  void timeline_insert(runqueue& q, sched_entity* se) noexcept;
  void timeline_erase(runqueue& q, sched_entity* se) noexcept;
  sched_entity* queue_first(runqueue& q) noexcept;

  // ---- the events' parts (core.cpp) ---------------------------------------------
  // The FIFO and LIFO disciplines without load tracking have no clock, no
  // vruntime and nothing to publish but the queue count: enqueue() and
  // pick_next() go straight to these.
  unsigned enqueue_fifo(int cpu, sched_entity* se, enqueue_kind kind, bool handoff,
                        std::optional<wake_reason> why, const now_source& now, int waker) noexcept;
  sched_entity* leave_fifo(int cpu, sched_entity* prev, prev_action action, const now_source& now,
                           sched_entity* joined) noexcept;
  // wake_running() handles a wake-up of a fiber that has published itself
  // as waiting but may not have left its worker yet: if it is still on its
  // runqueue (running), it is marked so that its block turns into a
  // requeue, and true is returned: nothing else is to be done. False means
  // it is off every runqueue and must be enqueued. Takes that runqueue's lock
  // only when the fiber may still be on it, and counts the wake-up there by
  // `why` when it is (`waker` as for count_wakeup()). Under EEVDF a fiber
  // still queued may be a delayed one (it blocked with negative lag): it is
  // made runnable where it is, and, with `handoff`, that worker's next pick;
  // `requeued` (when given) is then set to its worker (else left alone).
  bool wake_running(sched_entity* se, wake_reason why, const now_source& now, int waker = -1,
                    bool handoff = false, int* requeued = nullptr);
  // The wake_result of a wake-up that requeued a delayed fiber on `cpu`
  // (wake_running()'s `requeued`): that worker runs another fiber (a
  // delayed one is only ever queued behind a running one), so no one is
  // to be woken; fibers may wait there now.
  wake_result requeued_result(int cpu) const noexcept;
  // count_wakeup(): one wake-up of `se` for `why` on cpu, at `now`, by a
  // fiber or event of worker `waker` (-1: none); the caller holds cpu's
  // runqueue lock (cpu_counters::wakeups). It also stamps se for the
  // wake-to-run delay its next pick records (note_run), except for a
  // wake-up by cpu's own worker when `now` would cost a clock read.
  //
  // Why that one is left untimed: under FIFO and LIFO without load
  // tracking nothing else on a switch reads the clock, and a read at the
  // stamp and another at the pick made a same-worker wake-up (a local
  // spawn, a hand-off between two fibers of one worker) measurably slower:
  // spawn_join under `none` by about a tenth (docs/performance.md, the
  // histogram's cost). Such a delay is the rest of the waker's run and the
  // queue ahead of it, not a wait for a worker to notice.
  // Where the clock is at hand (the load-tracking enqueue reads it first,
  // the fair one whenever a fiber is running there; the simulator's time
  // is a value) every wake-up is timed, so the simulator and the engine
  // tests see one delay per wake-up.
  void count_wakeup(int cpu, sched_entity& se, wake_reason why, const now_source& now, int waker) noexcept {
    counters_[static_cast<std::size_t>(cpu)].wakeups[static_cast<std::size_t>(why)].add();
    if (waker == cpu && !now.at_hand()) return;
    wake_stamp_slot(se) = static_cast<std::uint32_t>(now());
    se.wake_why = static_cast<std::uint8_t>(static_cast<unsigned>(why) + 1);
  }

  // ---- the wake-to-run delay (cpu_counters::wake_latency) ---------------------
  //
  // A wake-up stamps the fiber with the low 32 bits of `now` (ns) and its
  // reason; the pick that next runs it records now minus the stamp, on the
  // picking worker. The stamp lives on a line the wake-up writes anyway,
  // so that always-on costs no extra line between the waker's core and
  // the picker's: under load tracking, the PELT line (the enqueue's
  // pelt_update), in its padding (pelt_avg::wake_stamp); otherwise, the
  // wake-up line's util_est_enqueued, which nothing reads or writes
  // without load tracking. 32 bits of ns wrap after 4.29 s; a difference
  // of 2^31 or more is taken for a clock read a little behind the stamp's
  // on another core (TSC skew) and counts as 0, so delays are measured up
  // to 2.1 s (latency_histogram's last bucket).
  std::uint32_t& wake_stamp_slot(sched_entity& se) const noexcept {
    return tracks_load_ ? se.avg.wake_stamp : se.util_est_enqueued;
  }
  // note_run(): se becomes cpu's running fiber now (under cpu's runqueue
  // lock); if a wake-up stamped it, its delay is recorded. `now` is read
  // only then: a yield between fibers that nobody woke reads no clock.
  [[gnu::always_inline]] void note_run(int cpu, sched_entity& se, const now_source& now) noexcept {
    if (se.wake_why == 0) return;
    const auto delta = static_cast<std::int32_t>(static_cast<std::uint32_t>(now()) - wake_stamp_slot(se));
    counters_[static_cast<std::size_t>(cpu)].wake_latency[se.wake_why - 1u].record(
        delta > 0 ? static_cast<std::uint64_t>(delta) : 0);
    se.wake_why = 0;
  }

  // ---- the fair discipline (fair.cpp; its inline parts in engine_inline.hpp) ----
  void update_curr(runqueue& q, const now_source& now) noexcept;
  void update_min_vruntime(runqueue& q) noexcept;
  std::int64_t sched_slice(const runqueue& q, const sched_entity& se) const noexcept;
  void place_woken(const runqueue& q, sched_entity& se) const noexcept;
  void set_next_entity(runqueue& q, sched_entity& se, std::int64_t t) noexcept;
  void set_slice(runqueue& q, const sched_entity& se) noexcept;
  void check_preempt(int cpu, runqueue& q, sched_entity& se) noexcept;
  void check_preempt_tick(int cpu, runqueue& q) noexcept;

  // ---- the EEVDF discipline (eevdf.cpp) ------------------------------------------
  // Kernel names (fair.c of v6.18.y); q locked throughout. V is the
  // queue's weighted average vruntime, the running fiber included.
  bool ev_feature(unsigned f) const noexcept { return (cfg_.eevdf_features & f) != 0; }
  // The slice a fiber asks for, ns: its own (spawn_options::slice) or the base.
  std::int64_t ev_slice_of(const sched_entity& se) const noexcept;
  // The kernel's cfs_rq->nr_queued: the tree and the running fiber.
  static unsigned ev_nr_queued(const runqueue& q) noexcept { return q.ev_nr + (q.curr ? 1u : 0u); }
  static std::uint64_t avg_vruntime(const runqueue& q) noexcept;
  static bool vruntime_eligible(const runqueue& q, std::uint64_t vruntime) noexcept;
  static bool entity_eligible(const runqueue& q, const sched_entity& se) noexcept {
    return vruntime_eligible(q, se.vruntime);
  }
  std::int64_t entity_lag(std::uint64_t avruntime, const sched_entity& se) const noexcept;
  void update_entity_lag(const runqueue& q, sched_entity& se) const noexcept;
  void place_entity(const runqueue& q, sched_entity& se, bool initial) const noexcept;
  bool update_deadline(sched_entity& se) const noexcept;
  void set_protect_slice(const runqueue& q, sched_entity& se) const noexcept;
  void update_protect_slice(const runqueue& q, sched_entity& se) const noexcept;
  static bool protect_slice(const sched_entity& se) noexcept {
    return static_cast<std::int64_t>(se.vprot - se.vruntime) > 0;
  }
  static void cancel_protect_slice(sched_entity& se) noexcept {
    if (protect_slice(se)) se.vprot = se.vruntime;
  }
  // __enqueue_entity / __dequeue_entity: into and out of the tree and V's sums.
  static void ev_enqueue(runqueue& q, sched_entity& se) noexcept;
  static void ev_dequeue(runqueue& q, sched_entity& se) noexcept;
  // __pick_eevdf(): the earliest eligible deadline, `curr` (q.curr, not in
  // the tree, or null) included; with `protect`, a running fiber within
  // its protected slice keeps the worker.
  sched_entity* pick_eevdf(const runqueue& q, sched_entity* curr, bool protect) const noexcept;
  // The pick of a switch, q.curr null and prev (if requeued) in the tree:
  // delayed fibers it meets finish their dequeue, and it picks again.
  sched_entity* ev_pick_next(runqueue& q) noexcept;
  // A delayed fiber leaves for good (pick_next_entity's DEQUEUE_DELAYED).
  void ev_finish_delayed(runqueue& q, sched_entity& se) noexcept;
  // update_curr()'s EEVDF half: the deadline renewed, a reschedule asked.
  void ev_update_curr(int cpu, runqueue& q, sched_entity& curr) noexcept;
  // check_preempt_wakeup_fair() for se, just queued on q.
  void ev_check_preempt(int cpu, runqueue& q, sched_entity& se) noexcept;
  // yield_task_fair(): the running fiber skips to its deadline.
  void ev_yield(runqueue& q, sched_entity& se) noexcept;
  // ttwu_runnable() of a delayed fiber: runnable again where it is queued.
  void ev_requeue_delayed(int cpu, runqueue& q, sched_entity& se, const now_source& now) noexcept;
  // The fiber blocks: delayed (true, it stays queued) or gone with its lag.
  bool ev_block(runqueue& q, sched_entity& se) noexcept;

  // ---- load tracking (load.cpp; its inline parts in engine_inline.hpp) ----------
  [[gnu::always_inline]] bool update_load(runqueue& q, std::int64_t now, bool rq_inputs_change = true) noexcept;
  void leave_signals(runqueue& q, sched_entity& se, prev_action action) noexcept;
  void publish(runqueue& q) noexcept;
  void publish_load(runqueue& q) noexcept;
  // util_est_enqueue() / util_est_dequeue(): se joins or leaves q's sum;
  // a dequeue because it goes to sleep also updates its estimate from
  // its util now (util_est_update()).
  static void util_est_enqueue(runqueue& q, const sched_entity& se) noexcept { q.util_est += util_est_of(se); }
  static void util_est_dequeue(runqueue& q, sched_entity& se, bool sleep) noexcept;
  // v4.11's per-CPU load history (policy_traits::cpu_load_signal; load.cpp).
  // weighted_cpuload() is the load the history is kept of; q locked.
  unsigned long weighted_cpuload(const runqueue& q) const noexcept;
  // cpu_load_tick() is cpu_load_update_active() at cpu's tick, or, for a
  // worker idle since its entry into idle, the catch-up of the ticks it
  // missed that nohz_idle_balance() made (cpu_load_update_idle()); q locked.
  void cpu_load_tick(runqueue& q, const now_source& now) noexcept;
  // cpu_load_idle_enter() is cpu_load_update_nohz_start(): the worker goes
  // idle and its tick stops; cpu_load_idle_exit() is
  // cpu_load_update_nohz_stop(): it has a fiber to run again, and the ticks
  // it missed are caught up. Both lock q; no-ops without a history.
  void cpu_load_idle_enter(runqueue& q) noexcept;
  void cpu_load_idle_exit(runqueue& q, const now_source& now) noexcept;
  void cpu_load_catch_up(runqueue& q, std::int64_t jiffies, unsigned long load) noexcept;

  // ---- placement (placement.cpp) ------------------------------------------------
  // snapshot() fills `out` with a lock-free reading of every worker, PELT
  // signals decayed to `now`.
  void snapshot(std::vector<cpu_snapshot>& out, const now_source& now) const;
  void snapshot_cpu(std::size_t i, cpu_snapshot& s, const now_source& now) const;
  // snapshot_llcs() fills only the entries of the workers that share a
  // last-level cache with a or b (each of them included; -1: none), for a
  // wake-up placement that reads nothing else (policy_traits::wake_reads_only_llcs).
  void snapshot_llcs(std::vector<cpu_snapshot>& out, const now_source& now, int a, int b) const;
  fiber_view view_of(const sched_entity& se, const now_source& now, bool hot_check) const noexcept;
  void apply_effects(const placement_effects& fx, sched_entity& se, int origin, bool by_origin) noexcept;
  void update_idle_core(int cpu) noexcept;
  // account_numa(): se joins (delta +1) or leaves (-1) cpu's runnable
  // fibers: the kernel's account_numa_enqueue()/account_numa_dequeue(),
  // for policies with policy_traits::counts_numa_fibers. q locked.
  void account_numa(int cpu, runqueue& q, const sched_entity& se, int delta) noexcept {
    if (!traits_.counts_numa_fibers || se.preferred_node < 0) return;
    const auto d = static_cast<unsigned>(delta);
    q.nr_numa_running.store(q.nr_numa_running.load(std::memory_order_relaxed) + d, std::memory_order_relaxed);
    if (!domains_.cpu_node.empty() && se.preferred_node == domains_.cpu_node[static_cast<std::size_t>(cpu)]) {
      q.nr_preferred_running.store(q.nr_preferred_running.load(std::memory_order_relaxed) + d,
                                   std::memory_order_relaxed);
    }
  }
  // numa_migrate() is the tick's task_numa_fault() -> numa_migrate_preferred()
  // for cpu's running fiber (policy_traits::numa_migrate_on_tick): once
  // its retry time has come, and the fiber is off its preferred node, ask
  // the policy (task_numa_migrate()) and ask for the move it finds. Called
  // by cpu's own worker, no lock held.
  void numa_migrate(int cpu, const now_source& now, std::uint64_t random, std::vector<cpu_snapshot>& scratch);
  // request_push_curr(): ask `cpu` to push its running fiber to `dst` at
  // its next switch (migrate_task_to()'s stopper move; engine::pick_next).
  // False when a push is already asked of cpu.
  bool request_push_curr(int cpu, int dst) noexcept;
  unsigned llc_busy_cpus(int cpu) const noexcept;
  // stays_unbalanced(): a spawn from worker `origin` that stays there
  // because fork balancing is off (engine_config::fork_balance), without
  // asking the policy: neither pinned (it goes to its worker) nor with a
  // node preference (the policy places it). Its pull kick stands in for
  // the fork balance it skipped (wake_result::pull).
  bool stays_unbalanced(placement_kind kind, const sched_entity& se, int origin) const noexcept {
    return kind == placement_kind::spawn && !cfg_.fork_balance && origin >= 0 && se.pinned < 0 &&
           se.preferred_node < 0;
  }

  // ---- the balance driver (balance.cpp) -----------------------------------------
  // idle_balance() is the newly-idle pull of a worker with nothing to run
  // (its idle loop while it spins, and once more before it parks): nothing
  // when the policy does not pull or no worker has a fiber that could be
  // pulled (overloaded(), the kernel's rd->overload test in
  // newidle_balance()), else newidle_balance(). Returns fibers moved here.
  unsigned idle_balance(int cpu, const now_source& now, std::uint64_t random,
                        std::vector<cpu_snapshot>& scratch, bool kicked = false);

  // newidle_balance() runs when `cpu` has nothing to run: for each level of
  // its chain, narrowest first, balance; stop at the first level that moved
  // something. Returns the number of fibers moved onto cpu's runqueue.
  // find_work() and idle_poll() call idle_balance(), which rations it.
  unsigned newidle_balance(int cpu, const now_source& now, std::uint64_t random,
                           std::vector<cpu_snapshot>& scratch, bool kicked = false);

  // load_balance() balances one level of `cpu`'s chain (the kernel's
  // load_balance()): ask the policy, detach from the busiest, attach here,
  // and keep nr_balance_failed and the interval. Returns fibers moved.
  unsigned load_balance(int cpu, std::size_t level, cpu_idle_type idle, const now_source& now,
                        std::uint64_t random, std::vector<cpu_snapshot>& scratch);

  // detach_fibers() removes, under the source's lock only, the fibers the
  // decision and the policy's can_detach() allow, from the least recently
  // queued, at most `max`. Pinned fibers and the running one are never taken.
  unsigned detach_fibers(int dst, const balance_decision& decision, cpu_idle_type idle,
                         const sched_domain* sd, unsigned nr_balance_failed, const now_source& now,
                         sched_entity** out, unsigned max);

  // attach_fibers() appends detached fibers to `dst`'s runqueue, under its lock.
  void attach_fibers(int dst, sched_entity* const* list, unsigned n, const now_source& now);

  // should_we_balance() is true when `cpu` is the worker of its group that
  // balances `level` this time: the first idle one, or the first one.
  bool should_we_balance(int cpu, std::size_t level, cpu_idle_type idle) const;

  // balance_interval() is how long a level waits between two periodic
  // passes (get_sd_balance_interval()): `st`'s interval, times the policy's
  // busy_factor while the worker is busy, less one tick there where the
  // policy follows v5.10; clamped to one tick .. 100 ms per worker
  // (max_load_balance_interval).
  std::int64_t balance_interval(const sd_balance_state& st, bool busy) const noexcept;
  sd_balance_state& balance_state(int cpu, std::size_t level) noexcept {
    return sd_state_[static_cast<std::size_t>(cpu)][level];
  }

  // rebalance_domains() is the tick's periodic balance (the kernel's
  // rebalance_domains() and nohz_balancer_kick()): each level of cpu's
  // chain whose interval has passed is balanced, narrowest first; then
  // whether this busy worker kicks an idle one. Fills r.
  void rebalance_domains(int cpu, const now_source& now, std::uint64_t random, std::vector<cpu_snapshot>& scratch,
                         tick_result& r);
  sched_entity* active_balance_victim(runqueue& q, int dst) noexcept;
  void detach_entity(runqueue& src, sched_entity& se) noexcept;
  void note_newidle_cost(runqueue& q, std::int64_t cost) noexcept;
  void close_idle_period(runqueue& q, const now_source& now) noexcept;

  // overloaded() is the whole machine's "some worker has a fiber queued
  // that another could take" (the kernel's rd->overload): set by every
  // enqueue that leaves a runqueue with two runnable fibers, one of them
  // queued and unpinned; cleared by a balance pass that finds no such
  // runqueue. A set flag with nothing to take costs one balance pass; a
  // clear flag is never stale: the clearer clears, then looks at every
  // runqueue again, and an enqueuer that stored its count before that look
  // is seen, one that stored it after reads the cleared flag and sets it
  // (all seq_cst).
  bool overloaded() const noexcept { return overload_.flag.load(std::memory_order_seq_cst); }
  static bool has_movable(const runqueue& q) noexcept;
  void note_overload(const runqueue& q) noexcept;
  // refresh_overload(): a balance pass found nothing to take; clear the
  // flag unless some runqueue has a movable fiber (the hand-shake above).
  void refresh_overload() noexcept;

  // ---- the join hand-off (join.cpp) ---------------------------------------------
  pick_result exit_to_joiner_untraced(int cpu, sched_entity* prev, sched_entity* joiner, const now_source& now);
  // queue_joiner(): wake_joiner() for a joiner hands_back() applies to:
  // queued on cpu as its next pick (nothing, if it had not left yet).
  wake_result queue_joiner(sched_entity* joiner, int cpu, const now_source& now);

  domain_tree domains_;
  std::unique_ptr<usched::policy> policy_;
  tracer* tracer_ = nullptr;
  trace_hooks trace_hooks_;
  engine_config cfg_;
  // The policy's fixed facts, read once; the disciplines and load tracking
  // follow from them and the configuration.
  policy_traits traits_;
  bool fair_;   // a virtual-time discipline: CFS's (fair) or EEVDF's
  bool eevdf_;  // EEVDF's, always with fair_
  bool lifo_;   // LIFO discipline, never with fair_
  bool tracks_load_;
  // Fibers carry util estimates (tracks_load_ and policy_traits::util_est).
  bool util_est_;
  // The engine keeps v4.11's per-CPU load history (tracks_load_ and
  // policy_traits::cpu_load_signal).
  bool keeps_cpu_load_;
  // has_idle_cores of each LLC (sd_llc_shared), indexed by the LLC's first
  // worker; each worker's LLC level in its chain (sd_llc; -1 for none), and
  // its SMT siblings (empty without SMT). Wake-up placement reads the hint,
  // a worker going idle sets it, a scan that finds no idle core clears it.
  std::unique_ptr<std::atomic<bool>[]> idle_cores_;
  std::vector<int> llc_level_;
  const sched_domain* llc_of(std::size_t cpu) const noexcept {
    const int l = llc_level_[cpu];
    return l < 0 ? nullptr : &domains_.per_cpu[cpu][static_cast<std::size_t>(l)];
  }
  int llc_first(std::size_t cpu) const noexcept {
    const sched_domain* llc = llc_of(cpu);
    return llc ? llc->span.get().front() : -1;
  }
  std::vector<std::vector<int>> smt_siblings_;
  bool smt_present_ = false;
  unsigned nr_latency_ = 8;  // sched_nr_latency()
  // sched_slice() for n runnable fibers of equal weight, n = 1 ..
  // min(sched_nr_latency, max_equal_slice): sched_latency / n.
  static constexpr std::size_t max_equal_slice = 64;
  std::vector<std::int64_t> equal_slice_;
  std::unique_ptr<runqueue[]> rqs_;
  std::vector<std::vector<sd_balance_state>> sd_state_;
  std::unique_ptr<cpu_counters[]> counters_;
  std::vector<std::unique_ptr<level_counters[]>> level_counters_;
  // When each worker last kicked an idle one from its tick.
  std::vector<std::int64_t> last_idle_kick_;
  struct alignas(64) request_count {
    request_count() = default;
    request_count(request_count&& o) noexcept : n(o.n.load(std::memory_order_relaxed)) {}
    std::atomic<std::uint64_t> n{0};
  } active_requests_;
  // On a line of its own: every worker reads it while idle.
  struct alignas(64) overload_flag {
    overload_flag() = default;
    overload_flag(overload_flag&& o) noexcept : flag(o.flag.load(std::memory_order_relaxed)) {}
    std::atomic<bool> flag{false};
  } overload_;
};

}  // namespace usched::detail

#include "engine_inline.hpp"
