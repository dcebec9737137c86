// runtime.cpp: the runtime's life cycle, spawning, placement and the wait
// protocol; the public API's glue.
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <boost/context/detail/fcontext.hpp>

#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <new>
#include <ostream>
#include <system_error>
#include <thread>

#include <usched/error.hpp>
#include <usched/runtime.hpp>

#include "clock.hpp"
#include "futex.hpp"
#include "options_check.hpp"
#include "overflow.hpp"
#include "runtime_impl.hpp"

namespace usched::detail {
namespace {

thread_local thread_parker tls_parker;

// The level is one of options' names (options::validate()).
std::shared_ptr<spdlog::logger> make_logger(const std::string& level) {
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto log = std::make_shared<spdlog::logger>("usched", std::move(sink));
  log->set_pattern("[usched] [%l] %v");
  log->set_level(spdlog::level::from_str(level));
  return log;
}

options checked(options o) {
  o.validate();
  return o;
}

std::size_t round_to_page(std::size_t v) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return (v + page - 1) / page * page;
}


// The end of a process the runtime cannot go on in: one line to stderr with
// a plain write, whatever the log level (the process is about to die and this
// is the only account of why), then abort(), not std::terminate(): there is
// no active exception, and the C++ runtime's terminate handler would add a
// misleading "without an active exception" line.
[[noreturn]] void die(std::string line) noexcept {
  // One line, however long the parts are: a newline in one would split it.
  for (char& c : line) {
    if (c == '\n') c = ' ';
  }
  line = "usched: " + line + "\n";
  for (std::size_t off = 0; off < line.size();) {
    const ssize_t n = write(STDERR_FILENO, line.data() + off, line.size() - off);
    if (n <= 0) break;
    off += static_cast<std::size_t>(n);
  }
  std::abort();
}

// An uncaught exception in a detached fiber ends the process (the exception
// was caught into the task: nobody else will see it).
// fiber_name(): the fiber's id, and its label if it was spawned with one:
// `12 ("http accept loop")`.
std::string fiber_name(const fiber* f) {
  std::string s = std::to_string(f->id.load(std::memory_order_relaxed));
  if (const char* label = f->label.load(std::memory_order_relaxed)) s += " (\"" + std::string(label) + "\")";
  return s;
}

// what_of(): an exception's what(), for the one-line reports.
std::string what_of(const std::exception_ptr& e) noexcept {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
  }
  return "unknown exception";
}

[[noreturn]] void report_detached_exception(fiber* f) noexcept {
  f->rt->log().flush();
  die("detached fiber " + fiber_name(f) + " ended with an uncaught exception: " + what_of(f->task->error) +
      "; aborting");
}

}  // namespace

// ---- life cycle ------------------------------------------------------------

runtime_impl::runtime_impl(options opts)
    : opts_(checked(std::move(opts))),
      topo_(topology::load(opts_.topology,
                           opts_.topology.empty() ? std::string() : option_subject(opts_, "topology"))),
      places_(topo_.place_workers(opts_.workers, opts_.unit, option_subject(opts_, "workers"))),
      log_(make_logger(opts_.log_level)),
      engine_(build_domains(places_), make_policy(opts_.policy), engine_config_of(opts_)),
      pool_(round_to_page(opts_.stack_size), stack_pool::default_guard_budget(),
            opts_.stack_guard == options::guard_pages::mprotect ? stack_pool::guard_method::mprotect
                                                                 : stack_pool::guard_method::automatic) {
  unit_ = opts_.unit;
  initial_fp_ = fp_control::current();
  fp_in_frame_ = fp_in_first_frame();
  // More workers than units: the kernel time-shares them over the machine,
  // which pinning several to one PU would forbid it to do.
  const bool shares_units = places_.size() > topo_.nr_units(unit_);
  pinned_ = opts_.pin && topo_.pinnable() && !shares_units;
  oversubscribed_ = places_.size() > std::max(1u, std::thread::hardware_concurrency());
  cycles_per_ns_ = tsc_per_us() / 1000.0;
  ns_per_cycle_ = 1.0 / cycles_per_ns_;
  calibrate_tsc();  // before any worker reads the engine clock
  tick_cycles_ = static_cast<std::uint64_t>(static_cast<double>(engine_.config().tick_ns) * cycles_per_ns_);
  spin_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(opts_.spin).count();
  install_overflow_handler();

  log_->info("starting: {}", describe());
  if (shares_units) {
    log_->warn("{}: more workers than the topology's {} {}; the run is oversubscribed and the "
               "workers are not pinned",
               option_subject(opts_, "workers"), topo_.nr_units(unit_),
               unit_ == worker_unit::core ? "cores" : "PUs");
  } else if (opts_.pin && !pinned_) {
    log_->info("topology has more PUs than this host: workers run unpinned");
  }

  workers_.reserve(places_.size());
  for (const worker_place& p : places_) {
    workers_.push_back(std::make_unique<worker>(*this, p.worker, p));
  }
  start_workers();
}

// A thread that cannot be made (the process is at its address-space or
// thread limit) fails the construction: the workers already running are
// stopped and joined first, so nothing of the runtime is left behind.
void runtime_impl::start_workers() {
  std::size_t started = 0;
  try {
    for (; started < workers_.size(); ++started) workers_[started]->start();
  } catch (const std::system_error& e) {
    stop_workers();
    throw std::system_error(e.code(), fmt::format("usched: could not start worker {} of {} (the "
                                                  "process is at its thread or address-space limit)",
                                                  started, workers_.size()));
  }
}

void runtime_impl::stop_workers() noexcept {
  stopping_.store(true, std::memory_order_seq_cst);
  for (auto& w : workers_) w->notify();
  for (auto& w : workers_) w->join();
}

runtime_impl::~runtime_impl() {
  // It would wait for the fiber running the destructor to finish.
  if (worker* w = local_worker()) {
    log_->flush();
    die("fiber " + std::to_string(w->current_fiber() ? w->current_fiber()->id.load(std::memory_order_relaxed) : 0) +
        " destroyed the runtime it runs on, which would wait for it forever; aborting");
  }
  {
    // An exiting fiber checks draining_ with a plain load after counting
    // itself, so it can miss the flag just set here and not notify (making
    // that handshake exact would put a full fence on every fiber exit). The
    // wait therefore also looks again every millisecond.
    //
    // A fiber that never finishes (blocked on a channel nobody closes) keeps
    // the wait going forever; after hang_report_after, and then after twice
    // as long each time, the wait says which fibers it is waiting for.
    draining_.store(true, std::memory_order_seq_cst);
    const auto began = std::chrono::steady_clock::now();
    auto report_at = hang_report_after;
    std::unique_lock<std::mutex> lk(live_mutex_);
    while (!all_done()) {
      live_cv_.wait_for(lk, std::chrono::milliseconds(1));
      const auto waited = std::chrono::steady_clock::now() - began;
      if (waited >= report_at) [[unlikely]] {
        // Without the lock: exiting fibers take it to notify.
        lk.unlock();
        report_hang(std::chrono::duration_cast<std::chrono::milliseconds>(waited));
        lk.lock();
        report_at *= 2;
      }
    }
  }
  // After the last fiber: until then a fiber may still be waiting for a
  // blocking call (and it keeps the wait above going).
  stop_blocking_pool();
  stop_workers();
  if (teardown_books_) *teardown_books_ = pool_.books();
  if (opts_.stats != options::stats_output::none) {
    const runtime_stats st = stats();
    const std::string text = opts_.stats == options::stats_output::json ? st.to_json() : st.to_table();
    std::fputs(text.c_str(), stderr);
    std::fflush(stderr);
  }
  log_->flush();
}

namespace {

const char* to_string(wait_kind k) noexcept {
  switch (k) {
    case wait_kind::none: break;
    case wait_kind::channel_send: return "channel::send";
    case wait_kind::channel_recv: return "channel::recv";
    case wait_kind::mutex: return "mutex::lock";
    case wait_kind::condition_variable: return "condition_variable::wait";
    case wait_kind::wait_group: return "wait_group::wait";
    case wait_kind::join: return "join_handle::join";
    case wait_kind::sleep: return "this_fiber::sleep";
    case wait_kind::future: return "future::wait";
    case wait_kind::latch: return "latch::wait";
    case wait_kind::barrier: return "barrier::wait";
    case wait_kind::semaphore: return "counting_semaphore::acquire";
    case wait_kind::shared_mutex: return "shared_mutex::lock";
    case wait_kind::condition_variable_any: return "condition_variable_any::wait";
    case wait_kind::select: return "select";
    case wait_kind::blocking: return "blocking";
  }
  return "an unknown wait";
}

// Blocked fibers the hang report names one by one; the rest are counted.
constexpr std::size_t hang_report_max_fibers = 32;

}  // namespace

// report_hang(): which live fibers the destructor is waiting for. A fiber
// whose wait token is armed (odd) is blocked, in what prepare_wait recorded;
// the other live fibers are running or queued. The fibers are found in the
// stack pool, which holds every fiber ever mapped, so neither spawn nor exit
// keeps a list of live ones for this. Everything read here is a snapshot
// taken while the workers run; after seconds without progress it is stable.
void runtime_impl::report_hang(std::chrono::milliseconds waited) {
  struct blocked_fiber {
    std::uint64_t id;
    std::string name;
    wait_kind kind;
    const void* object;
  };
  std::vector<blocked_fiber> blocked;
  for (fiber* f : pool_.all_fibers()) {
    if ((f->wait_token.load(std::memory_order_acquire) & 1) == 0) continue;
    blocked.push_back({f->id.load(std::memory_order_relaxed), fiber_name(f),
                       f->waiting_in.load(std::memory_order_relaxed), f->waiting_on.load(std::memory_order_relaxed)});
  }
  std::uint64_t exited = 0;
  std::uint64_t spawned = external_spawned_.load(std::memory_order_acquire);
  for (const auto& w : workers_) exited += w->exited_.load(std::memory_order_acquire);
  for (const auto& w : workers_) spawned += w->spawned_.load(std::memory_order_acquire);
  const std::uint64_t live = spawned > exited ? spawned - exited : 0;
  const std::uint64_t others = live > blocked.size() ? live - blocked.size() : 0;
  std::sort(blocked.begin(), blocked.end(),
            [](const blocked_fiber& a, const blocked_fiber& b) { return a.id < b.id; });
  log_->warn("~runtime has waited {:.1f} s for {} fiber{} to finish: {} blocked, {} running or queued",
             static_cast<double>(waited.count()) / 1000.0, live, live == 1 ? "" : "s", blocked.size(),
             others);
  for (std::size_t i = 0; i < blocked.size() && i < hang_report_max_fibers; ++i) {
    const blocked_fiber& b = blocked[i];
    std::string on;
    if (b.kind == wait_kind::join && b.object) {
      on = "fiber " + fiber_name(static_cast<const fiber*>(b.object));
    } else if (b.object) {
      on = fmt::format("{}", b.object);
    }
    log_->warn("  fiber {} is blocked in {}{}{}", b.name, to_string(b.kind), on.empty() ? "" : " on ", on);
  }
  if (blocked.size() > hang_report_max_fibers) {
    log_->warn("  ... and {} more blocked fibers", blocked.size() - hang_report_max_fibers);
  }
  log_->flush();
}

std::string runtime_impl::describe() const {
  std::string s = fmt::format("policy '{}', {} worker{} ({}), slice {} us, stack {} KiB\n",
                              engine_.policy().name(), places_.size(),
                              places_.size() == 1 ? "" : "s",
                              pinned_ ? (unit_ == worker_unit::core ? "pinned to cores" : "pinned to PUs")
                                      : "unpinned",
                              opts_.slice.count(), opts_.stack_size / 1024);
  s += "topology: " + topo_.describe() + "\n";
  s += "domains:\n" + engine_.domains().describe();
  return s;
}

runtime_stats runtime_impl::stats() const {
  runtime_stats out;
  out.policy = std::string(engine_.policy().name());
  out.workers.reserve(workers_.size());
  for (const auto& w : workers_) out.workers.push_back(w->stats());
  return out;
}

// Exits are read before spawns. Every exit counted was preceded (through
// the enqueue and the pick, under runqueue locks, and the release store of
// the exit count) by its fiber's spawn count, so the exits read can only
// equal the spawns read later if, at some instant between the two reads,
// every fiber spawned had finished; after that, with no fiber left, only a
// thread outside the runtime could spawn, which destroying it forbids.
bool runtime_impl::all_done() const noexcept {
  std::uint64_t exited = 0;
  for (const auto& w : workers_) exited += w->exited_.load(std::memory_order_acquire);
  std::uint64_t spawned = external_spawned_.load(std::memory_order_acquire);
  for (const auto& w : workers_) spawned += w->spawned_.load(std::memory_order_acquire);
  return exited == spawned;
}

worker* runtime_impl::local_worker() const noexcept {
  worker* w = worker_of_this_thread();
  return w && &w->rt() == this ? w : nullptr;
}

std::uint64_t runtime_impl::external_random() noexcept {
  return splitmix64_mix(external_seq_.fetch_add(splitmix64_increment, std::memory_order_relaxed));
}

// ---- fibers ----------------------------------------------------------------

fiber_slot runtime_impl::allocate(std::size_t size, std::size_t align) {
  worker* w = local_worker();
  fiber* f = w ? w->take_fiber() : pool_.take();
  if (pool_.take_budget_exhausted_notice()) [[unlikely]] {
    log().warn("{} fiber stacks have guard pages (a quarter of vm.max_map_count); stacks mapped "
               "from now on have a canary instead, checked at the tick and when the fiber exits: "
               "an overflow there is found late, or not at all if it skips the canary",
               pool_.guarded());
  }
  void* frame = stack_pool::inline_frame(f, size, align);
  f->heap_frame = nullptr;
  if (!frame) {
    try {
      frame = ::operator new(size, std::align_val_t(align));
    } catch (...) {
      discard(f, w);
      throw;
    }
    f->heap_frame = frame;
    f->heap_frame_align = align;
  }
  return {f, frame};
}

void runtime_impl::discard(fiber* f, worker* w) noexcept {
  if (f->heap_frame) {
    ::operator delete(f->heap_frame, std::align_val_t(f->heap_frame_align));
    f->heap_frame = nullptr;
  }
  if (w) {
    w->give_fiber(f);
  } else {
    pool_.give(&f, 1);
  }
}

void runtime_impl::start(fiber* f, task_base* task, const spawn_options& opts, worker* w) {
  f->rt = this;
  f->id.store(w ? w->next_fiber_id() : reserve_ids(1), std::memory_order_relaxed);
  f->task = task;
  f->pinned = opts.pin;
  f->preferred_node = opts.numa_node;
  f->weight = opts.weight;
  f->label.store(opts.label, std::memory_order_relaxed);
  f->cpu.store(-1, std::memory_order_relaxed);
  f->on_rq.store(false, std::memory_order_relaxed);
  f->wake_pending = false;
  // The time the fair discipline keeps; under FIFO and LIFO it is never
  // written and stays 0, and its cache lines stay where they are.
  if (engine_.fair()) {
    f->vruntime = 0;
    f->sum_exec = 0;
    f->prev_sum_exec = 0;
    f->exec_start = 0;
  }
  f->refs.store(2, std::memory_order_relaxed);
  f->done.store(false, std::memory_order_relaxed);
  f->detached = false;
  f->joiner = nullptr;
  f->on_cpu.store(false, std::memory_order_relaxed);
  sanitizer_unpoison_stack(f->ctx.stack_bottom, f->ctx.stack_size);
  // Its first frame is made where it first runs (worker::switch_to).
  f->ctx.fctx = nullptr;
  if (w) {
    w->spawned_.store(w->spawned_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  } else {
    external_spawned_.fetch_add(1, std::memory_order_relaxed);
  }
  try_to_wake_up(f, placement_kind::spawn, w);
}

void runtime_impl::try_to_wake_up(fiber* f, placement_kind kind) noexcept {
  try_to_wake_up(f, kind, local_worker());
}

void runtime_impl::try_to_wake_up(fiber* f, placement_kind kind, worker* w) noexcept {
  try_to_wake_up(f, kind, w, w ? w->index() : -1);
}

void runtime_impl::try_to_wake_up(fiber* f, placement_kind kind, worker* w, int waker) noexcept {
  // The engine places and queues the fiber; the backend wakes whom it says.
  wake_result r;
  if (w) {
    r = engine_.wake_up(f, kind, waker, w->next_random(), w->scratch(), engine_clock(), waker == w->index());
  } else {
    // A thread outside the runtime places with its own scratch space and
    // the shared generator.
    thread_local std::vector<cpu_snapshot> scratch;
    r = engine_.wake_up(f, kind, -1, external_random(), scratch, engine_clock());
  }
  carry_out(r, w);
}

void runtime_impl::carry_out(const wake_result& r, worker* w) noexcept {
  if (r.cpu < 0) return;
  // Publish (the enqueue's seq_cst store of the queue count), then check the
  // park word: paired with the parker's announce-then-check in
  // worker::idle_wait().
  if (r.notify) worker_at(r.cpu).notify();
  if (r.kick) kick_idle(r.cpu, w, r.pull);
}

// kick_idle(): carries out the engine's kick decision (engine::kick) over
// this runtime's idle workers: the spin word of a spinning one, the park
// word of a parked one. The search's start is random: the caller's
// worker's generator, or the shared one (an atomic every caller would
// write) from a thread outside the runtime.
void runtime_impl::kick_idle(int busy_cpu, worker* w, bool pull) noexcept {
  struct idle_workers {
    runtime_impl& rt;
    worker* w;
    unsigned nr_spinning() const noexcept {
      return static_cast<unsigned>(rt.nr_spinning.load(std::memory_order_seq_cst));
    }
    unsigned nr_parked() const noexcept { return static_cast<unsigned>(rt.nr_parked.load(std::memory_order_seq_cst)); }
    std::uint64_t random() const noexcept { return w ? w->next_random() : rt.external_random(); }
    bool tell_spinning(int cpu) const noexcept { return rt.worker_at(cpu).kick_spinning(); }
    bool parked(int cpu) const noexcept { return rt.worker_at(cpu).parked(); }
  };
  const kick_result k = engine_.kick(busy_cpu, pull, idle_workers{*this, w});
  if (k.cpu < 0) return;
  if (k.pull) worker_at(k.cpu).mark_pull();
  worker_at(k.cpu).notify();
}

fiber* runtime_impl::fiber_done(fiber* f, worker* w) noexcept {
  check_stack_canary(f, opts_.stack_size / 1024);
  f->join_lock.lock();
  f->done.store(true, std::memory_order_release);
  waitable* joiner = f->joiner;
  const std::uint64_t token = f->joiner_token;
  const bool detached = f->detached;
  // Claimed under join_lock: a joiner whose deadline or stop ended its
  // wait takes join_lock before it returns, so until then it (a thread's
  // parker, which ends with its thread) is still there to be claimed; once
  // we hold the claim, it waits for our resume_wait().
  const bool won = joiner && claim_wait(*joiner, token);
  f->join_lock.unlock();
  fiber* handed = nullptr;
  if (won) {
    // A joining fiber is woken by the exit's switch (the join hand-off's
    // second half: one that last ran here runs next, where its children's
    // data is); a thread is resumed now.
    if (joiner->is_fiber) {
      handed = static_cast<fiber*>(joiner);
    } else {
      resume_wait(*joiner);
    }
  }
  if (detached && f->task->error) report_detached_exception(f);
  w->exited_.store(w->exited_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  if (draining_.load(std::memory_order_relaxed)) [[unlikely]] {
    std::lock_guard<std::mutex> lk(live_mutex_);
    live_cv_.notify_all();
  }
  return handed;
}

void runtime_impl::drop_ref(fiber* f) noexcept {
  if (f->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  recycle(f, local_worker());
}

void runtime_impl::drop_ref(fiber* f, worker& w) noexcept {
  if (f->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  recycle(f, &w);
}

void runtime_impl::recycle(fiber* f, worker* w) noexcept {
  f->task->destroy(f->task);
  f->task = nullptr;
  discard(f, w);
}

// ---- waiting ---------------------------------------------------------------

waitable& current_waitable() noexcept {
  worker* w = worker_of_this_thread();
  if (w) {
    if (fiber* f = w->current_fiber()) return *f;
  }
  return tls_parker;
}

void block(waitable& me, std::uint64_t token, std::int64_t deadline_ns) {
  if (me.is_fiber) {
    auto& f = static_cast<fiber&>(me);
    worker_of_this_thread()->block_current(&f, token, deadline_ns);
    return;
  }
  auto& p = static_cast<thread_parker&>(me);
  for (;;) {
    if (p.word.load(std::memory_order_acquire) == 1) {
      p.word.store(0, std::memory_order_relaxed);
      return;
    }
    if (!has_timer(deadline_ns)) {
      futex_wait(p.word, 0);
      continue;
    }
    const std::int64_t left = deadline_ns - now_ns();
    if (left <= 0) {
      // Time is up: claim our own wait. If a waker claimed it first, its
      // resume_wait() is on the way; wait for it so the counts stay paired.
      if (claim_wait(me, token)) return;
      deadline_ns = -1;
      continue;
    }
    futex_wait(p.word, 0, left);
  }
}

std::uint64_t prepare_wait(waitable& me, wait_kind kind, const void* object) noexcept {
  // What the wait is in, for the hang report only: relaxed stores, before
  // the token that says the wait is armed.
  me.waiting_in.store(kind, std::memory_order_relaxed);
  if (me.is_fiber) static_cast<fiber&>(me).waiting_on.store(object, std::memory_order_relaxed);
  // Only the waiter writes an armed value; publication under the primitive's
  // lock orders it for wakers, so relaxed is enough.
  const std::uint64_t armed = me.wait_token.load(std::memory_order_relaxed) + 1;
  me.wait_token.store(armed, std::memory_order_relaxed);
  return armed;
}

bool wake(waitable& w, std::uint64_t token) noexcept {
  if (!claim_wait(w, token)) return false;
  resume_wait(w);
  return true;
}

void resume_wait(waitable& w) noexcept {
  if (w.is_fiber) {
    auto& f = static_cast<fiber&>(w);
    f.rt->try_to_wake_up(&f, placement_kind::wake);
    return;
  }
  auto& p = static_cast<thread_parker&>(w);
  p.word.store(1, std::memory_order_release);
  futex_wake(p.word);
}

// ---- core.hpp --------------------------------------------------------------

runtime_impl* runtime_of_current_fiber() noexcept {
  worker* w = worker_of_this_thread();
  return w && w->current_fiber() ? &w->rt() : nullptr;
}

// The kernel's weights for nice 19 and nice -20: the range a fiber's weight
// may take.
constexpr unsigned min_weight = 15;
constexpr unsigned max_weight = 88761;

namespace {

void check_spawn_options(runtime_impl& rt, const spawn_options& opts) {
  if (opts.pin < -1 || opts.pin >= static_cast<int>(rt.nr_workers())) {
    throw std::invalid_argument("spawn_options::pin=" + std::to_string(opts.pin) +
                                " is out of range: allowed -1 (unpinned) or 0.." +
                                std::to_string(rt.nr_workers() - 1));
  }
  if (opts.numa_node < -1 || opts.numa_node >= static_cast<int>(rt.topo().nr_numa_nodes())) {
    throw std::invalid_argument("spawn_options::numa_node=" + std::to_string(opts.numa_node) +
                                " is out of range: allowed -1 (none) or 0.." +
                                std::to_string(static_cast<int>(rt.topo().nr_numa_nodes()) - 1));
  }
  if (opts.weight < min_weight || opts.weight > max_weight) {
    throw std::invalid_argument("spawn_options::weight=" + std::to_string(opts.weight) +
                                " is out of range: allowed " + std::to_string(min_weight) + ".." +
                                std::to_string(max_weight) + " (1024 is the default)");
  }
}

}  // namespace

fiber_slot allocate_fiber(runtime_impl& rt, std::size_t size, std::size_t align,
                          const spawn_options& opts) {
  // The defaults are valid for every runtime; only other values are checked.
  const spawn_options defaults;
  if (opts.pin != defaults.pin || opts.numa_node != defaults.numa_node || opts.weight != defaults.weight) {
    check_spawn_options(rt, opts);
  }
  return rt.allocate(size, align);
}

// The calling thread's worker is looked up again here, not carried over from
// allocate_fiber(): constructing the task frame in between runs the caller's
// code (a move constructor), which may block, and the spawning fiber may then
// continue on another worker. start() passes it on to the placement.
void discard_fiber(runtime_impl& rt, fiber* f) noexcept { rt.discard(f, rt.local_worker()); }

void start_fiber(runtime_impl& rt, fiber* f, task_base* task, const spawn_options& opts) {
  rt.start(f, task, opts, rt.local_worker());
}

void join_fiber(fiber* f) { (void)join_fiber_until(f, no_deadline); }

namespace {

// The fiber_local table of the caller: its fiber's (made on first use), or
// its thread's.
fiber_locals& locals_of_caller() {
  if (worker* w = worker_of_this_thread()) {
    if (fiber* f = w->current_fiber()) {
      if (!f->locals) f->locals = new fiber_locals;
      return *f->locals;
    }
  }
  thread_local fiber_locals of_thread;
  return of_thread;
}

}  // namespace

void* fiber_local_find(std::uint64_t key) noexcept {
  fiber_locals* l = nullptr;
  if (worker* w = worker_of_this_thread(); w && w->current_fiber()) {
    l = w->current_fiber()->locals;
    if (!l) return nullptr;
  } else {
    l = &locals_of_caller();
  }
  for (auto it = l->entries.rbegin(); it != l->entries.rend(); ++it) {
    if (it->key == key) return it->value;
  }
  return nullptr;
}

void fiber_local_add(std::uint64_t key, void* value, void (*destroy)(void*) noexcept) {
  try {
    locals_of_caller().entries.push_back({key, value, destroy});
  } catch (...) {
    destroy(value);
    throw;
  }
}

void clear_fiber_locals() noexcept {
  if (worker* w = worker_of_this_thread(); w && w->current_fiber() && w->current_fiber()->locals) {
    w->current_fiber()->locals->clear();
  }
}

std::uint64_t new_fiber_local_key() noexcept {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

void runtime_impl::submit_blocking(blocking_job* job) {
  std::unique_lock<std::mutex> lk(blocking_.mutex);
  job->next = nullptr;
  (blocking_.tail ? blocking_.tail->next : blocking_.head) = job;
  blocking_.tail = job;
  ++blocking_.queued;
  // A thread per call while the pool may grow, so that a call never waits
  // behind another blocking one: a new thread when the queue holds more
  // calls than there are idle threads to take them. Once it is full,
  // calls queue.
  if (blocking_.queued > blocking_.idle && blocking_.threads.size() < opts_.blocking_threads) {
    try {
      blocking_.threads.emplace_back([this] { blocking_thread_main(); });
      return;
    } catch (...) {
      // No thread to be had (no memory, or the system's limit): the call
      // waits for one that is running; with none running it cannot run,
      // and leaves the queue before its frame does.
      if (blocking_.threads.empty()) {
        blocking_.head = blocking_.tail = nullptr;
        blocking_.queued = 0;
        throw;
      }
    }
  }
  lk.unlock();
  blocking_.ready.notify_one();
}

void runtime_impl::blocking_thread_main() noexcept {
  std::unique_lock<std::mutex> lk(blocking_.mutex);
  for (;;) {
    while (!blocking_.head && !blocking_.stopping) {
      ++blocking_.idle;
      blocking_.ready.wait(lk);
      --blocking_.idle;
    }
    if (!blocking_.head) return;  // stopping, and nothing left to run
    blocking_job* job = blocking_.head;
    blocking_.head = job->next;
    if (!blocking_.head) blocking_.tail = nullptr;
    --blocking_.queued;
    lk.unlock();
    job->run(job);
    // Last: the job is on the caller's stack, which may unwind once it runs.
    wake(*job->who, job->token);
    lk.lock();
  }
}

void runtime_impl::stop_blocking_pool() noexcept {
  {
    std::lock_guard<std::mutex> lk(blocking_.mutex);
    blocking_.stopping = true;
  }
  blocking_.ready.notify_all();
  for (std::thread& t : blocking_.threads) t.join();
  blocking_.threads.clear();
}

void run_blocking(runtime_impl& rt, blocking_job& job) {
  waitable& me = current_waitable();
  job.who = &me;
  job.token = prepare_wait(me, wait_kind::blocking, &job);
  try {
    rt.submit_blocking(&job);
  } catch (...) {
    (void)claim_wait(me, job.token);  // disarm: nobody will end this wait
    throw;
  }
  block(me, job.token, no_deadline);
}

void report_unobserved_group_exception(const std::exception_ptr& e) noexcept {
  die("a task_group was destroyed without a wait() after a task threw: " + what_of(e) + "; aborting");
}

bool join_fiber_until(fiber* f, std::int64_t deadline_ns, const std::stop_token& stop) {
  if (f->done.load(std::memory_order_acquire)) return true;
  if (deadline_ns == 0 || (has_timer(deadline_ns) && deadline_ns <= now_ns()) || stop.stop_requested()) {
    return false;
  }
  waitable& me = current_waitable();
  f->join_lock.lock();
  if (f->done.load(std::memory_order_relaxed)) {
    f->join_lock.unlock();
    return true;
  }
  const std::uint64_t token = prepare_wait(me, wait_kind::join, f);
  f->joiner = &me;
  f->joiner_token = token;
  f->join_lock.unlock();
  if (me.is_fiber) {
    // The join hand-off: a joinee still queued on this worker runs next, in
    // the joiner's place (depth-first fork-join), decided by the block's
    // own switch.
    worker* w = worker_of_this_thread();
    auto& self = static_cast<fiber&>(me);
    if (stop.stop_possible()) {
      // As block(me, token, deadline_ns, stop).
      std::stop_callback on_stop(stop, [&me, token]() noexcept { wake(me, token); });
      w->block_current(&self, token, deadline_ns, f);
    } else {
      w->block_current(&self, token, deadline_ns, f);
    }
  } else {
    block(me, token, deadline_ns, stop);
  }
  // Woken by the exit, or by the deadline or a stop: the exit sets done before it
  // claims, so done tells. A joiner the deadline woke leaves its place
  // (under join_lock, where the exit reads it); a later join takes it again.
  // A fiber that finds done needs no lock: the exit may still be reading
  // f->joiner under it (its claim, if a timer or stop won, then fails on
  // the spent token), and a fiber's waitable outlives any such read (fibers
  // are pooled). A thread's parker ends with its thread: it waits for the
  // exit to leave the lock.
  if (me.is_fiber && f->done.load(std::memory_order_acquire)) return true;
  f->join_lock.lock();
  const bool done = f->done.load(std::memory_order_relaxed);
  if (!done && f->joiner == &me) f->joiner = nullptr;
  f->join_lock.unlock();
  return done;
}

void sleep_until_deadline(std::int64_t deadline_ns) {
  worker* w = worker_of_this_thread();
  fiber* f = w ? w->current_fiber() : nullptr;
  if (!f) {
    // A thread sleeps in the kernel; time_point::max() (far_deadline_ns) is
    // a sleep the kernel itself clamps to the end of its clock.
    std::this_thread::sleep_until(
        std::chrono::steady_clock::time_point(std::chrono::nanoseconds(deadline_ns)));
    return;
  }
  if (deadline_ns <= now_ns()) return;
  // A far deadline arms no timer: nothing ever resumes this wait.
  const std::uint64_t token = prepare_wait(*f, wait_kind::sleep, nullptr);
  w->block_current(f, token, deadline_ns);
}

bool fiber_finished(const fiber* f) noexcept { return f->done.load(std::memory_order_acquire); }

void release_fiber(fiber* f) noexcept { f->rt->drop_ref(f); }

void detach_fiber(fiber* f) noexcept {
  f->join_lock.lock();
  f->detached = true;
  const bool done = f->done.load(std::memory_order_relaxed);
  f->join_lock.unlock();
  if (done && f->task->error) report_detached_exception(f);
  f->rt->drop_ref(f);
}

std::uint64_t fiber_id_of(const fiber* f) noexcept { return f->id.load(std::memory_order_relaxed); }

void calibrate_tsc() noexcept {
  static std::once_flag once;
  std::call_once(once, [] {
    const double per_us = tsc_per_us();
    const double ns_per_cycle = 1000.0 / per_us;
    tsc_calibration_value = tsc_calibration{
        cycles(), now_ns(), ns_per_cycle,
        static_cast<std::uint64_t>(std::ldexp(ns_per_cycle, static_cast<int>(tsc_mult_shift)))};
  });
}

double tsc_per_us() noexcept {
  static const double rate = [] {
    const std::int64_t t0 = now_ns();
    const std::uint64_t c0 = cycles();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const std::int64_t t1 = now_ns();
    const std::uint64_t c1 = cycles();
    const double us = static_cast<double>(t1 - t0) / 1000.0;
    return us > 0 ? static_cast<double>(c1 - c0) / us : 1000.0;
  }();
  return rate;
}

}  // namespace usched::detail

// ---- public API --------------------------------------------------------------

namespace usched {

std::ostream& operator<<(std::ostream& os, fiber_id id) { return os << "fiber#" << id.value(); }

runtime::runtime() : runtime(options::from_env()) {}
runtime::runtime(options opts) : impl_(std::make_unique<detail::runtime_impl>(std::move(opts))) {
  impl_->set_owner(this);
}

runtime* runtime::current() noexcept {
  detail::runtime_impl* rt = detail::runtime_of_current_fiber();
  return rt ? rt->owner() : nullptr;
}
runtime::~runtime() = default;
unsigned runtime::workers() const noexcept { return impl_->nr_workers(); }
const options& runtime::config() const noexcept { return impl_->config(); }
std::string runtime::describe() const { return impl_->describe(); }
runtime_stats runtime::stats() const { return impl_->stats(); }

namespace this_fiber {

// yield() is defined in worker.cpp, beside the switch it inlines.

void sleep_until(std::chrono::steady_clock::time_point deadline) {
  detail::sleep_until_deadline(detail::deadline_at(deadline));
}

fiber_id get_id() noexcept {
  detail::worker* w = detail::worker_of_this_thread();
  detail::fiber* f = w ? w->current_fiber() : nullptr;
  return fiber_id(f ? f->id.load(std::memory_order_relaxed) : 0);
}

int worker_index() noexcept {
  detail::worker* w = detail::worker_of_this_thread();
  return w && w->current_fiber() ? w->index() : -1;
}

void preempt_point() noexcept {
  detail::worker* w = detail::worker_of_this_thread();
  if (w && w->current_fiber()) w->preempt_check();
}

}  // namespace this_fiber
}  // namespace usched
