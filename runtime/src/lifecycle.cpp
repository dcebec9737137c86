// lifecycle.cpp: a runtime's life: construction (options checked, the
// topology loaded, workers placed and started), what it says about itself
// (describe, stats), and the destructor's wait for the last fibers before
// the workers stop; the public usched::runtime on top.
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>

#include <usched/error.hpp>
#include <usched/runtime.hpp>

#include "clock.hpp"
#include "fatal.hpp"
#include "options_check.hpp"
#include "overflow.hpp"
#include "runtime_impl.hpp"
#include "trace_export.hpp"

namespace usched::detail {
namespace {

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

}  // namespace

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
  // Spinning workers yield while they outnumber the CPUs they may run on:
  // on this host, the PUs its affinity mask allows (the topology holds only
  // those); a described machine runs on whatever the host has.
  const unsigned runnable_cpus =
      topo_.is_host() ? topo_.nr_pus() : std::max(1u, std::thread::hardware_concurrency());
  oversubscribed_ = places_.size() > runnable_cpus;
  cycles_per_ns_ = tsc_per_us() / 1000.0;
  ns_per_cycle_ = 1.0 / cycles_per_ns_;
  calibrate_tsc();  // before any worker reads the engine clock
  tick_cycles_ = static_cast<std::uint64_t>(static_cast<double>(engine_.config().tick_ns) * cycles_per_ns_);
  spin_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(opts_.spin).count();
  install_overflow_handler();
  io_backend_ = choose_io_backend();
  start_tracing();

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
    start_monitor();
  } catch (const std::system_error& e) {
    stop_workers();
    throw std::system_error(e.code(), fmt::format("usched: could not start worker {} of {} (the "
                                                  "process is at its thread or address-space limit)",
                                                  started, workers_.size()));
  }
}

void runtime_impl::start_tracing() {
  if (opts_.trace.empty() && opts_.trace_flight == 0) return;
  if (opts_.trace_flight == 0) {
    // A whole run is written when the runtime ends; a path that cannot be
    // written is said now, not after the run.
    std::FILE* f = std::fopen(opts_.trace.c_str(), "w");
    if (!f) {
      throw config_error(option_subject(opts_, "trace") + " cannot be written: " + std::strerror(errno));
    }
    std::fclose(f);
  }
  tracer::config c;
  c.nr_cpus = places_.size();
  c.kind = opts_.trace_flight > 0 ? tracer::mode::flight : tracer::mode::whole_run;
  c.flight_records = opts_.trace_flight;
  c.limit_bytes = std::size_t{opts_.trace_limit_mb} << 20;
  tracer_ = std::make_unique<tracer>(c);
  engine::trace_hooks hooks;
  hooks.id = [](const sched_entity& se) noexcept {
    return static_cast<const fiber&>(se).id.load(std::memory_order_relaxed);
  };
  hooks.clock = &read_engine_clock;
  hooks.wait = [](const sched_entity& se) noexcept {
    return static_cast<std::uint8_t>(static_cast<const fiber&>(se).waiting_in.load(std::memory_order_relaxed));
  };
  engine_.set_tracer(tracer_.get(), hooks);
  if (!opts_.trace.empty()) raw_trace_path_ = opts_.trace + ".raw";
  const std::string name(engine_.policy().name());
  std::snprintf(policy_name_, sizeof policy_name_, "%s", name.c_str());
}

void runtime_impl::dump_trace_for_report(const char* why, bool fatal) const noexcept {
  if (!tracer_ || opts_.trace.empty()) return;
  std::string line;
  try {
    const trace_data d = trace_now();
    write_trace_file(opts_.trace, d);
    line = std::string(why) + ": the trace's " + std::to_string(d.records.size()) +
           (tracer_->cfg().kind == tracer::mode::flight ? " last events" : " events so far") + " are in '" +
           opts_.trace + "'";
  } catch (const std::exception& e) {
    line = std::string(why) + ": the trace could not be written: " + e.what();
  }
  if (!fatal) {
    log_->warn("{}", line);
    log_->flush();
    return;
  }
  line = "usched: " + line + "\n";
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

void runtime_impl::dump_raw_in_signal() const noexcept {
  if (!tracer_ || raw_trace_path_.empty()) return;
  const int fd = ::open(raw_trace_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  const bool ok = tracer_->write_raw(fd, policy_name_, false);
  ::close(fd);
  if (!ok) return;
  // One write of fixed parts: no formatting that could allocate.
  const char* parts[] = {"usched: the trace's events are in '", raw_trace_path_.c_str(),
                         "' (raw: usched_trace convert it)\n"};
  for (const char* p : parts) {
    const ssize_t ignored = ::write(STDERR_FILENO, p, std::strlen(p));
    (void)ignored;
  }
}

void runtime_impl::dump_trace(const std::string& path) const {
  if (!tracer_) {
    throw config_error("dump_trace('" + path +
                       "'): this runtime records no trace; set USCHED_TRACE or USCHED_TRACE_FLIGHT "
                       "(options::trace, options::trace_flight)");
  }
  write_trace_file(path, trace_now());
}

void runtime_impl::write_trace_at_exit() noexcept {
  if (!tracer_ || opts_.trace.empty() || tracer_->cfg().kind != tracer::mode::whole_run) return;
  try {
    const trace_data d = trace_now();
    write_trace_file(opts_.trace, d);
    log_->info("trace: {} events written to '{}'", d.records.size(), opts_.trace);
    if (d.dropped > 0) {
      log_->warn("{}: {} events were dropped past the trace's {} MiB (USCHED_TRACE_LIMIT_MB)",
                 option_subject(opts_, "trace"), d.dropped, opts_.trace_limit_mb);
    }
  } catch (const std::exception& e) {
    log_->error("{}: {}", option_subject(opts_, "trace"), e.what());
  }
}

trace_data runtime_impl::trace_now() const {
  trace_data d = tracer_->collect();
  d.policy = engine_.policy().name();
  return d;
}

void runtime_impl::stop_workers() noexcept {
  // The monitor first: it reads the workers' state until it stops.
  stop_monitor();
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
    // I/O ends with the runtime (as Tokio's tasks end with theirs): a fiber
    // blocked in a read nobody will answer would keep this wait going for
    // ever. Every worker takes the cancel at its next poll; a parked one is
    // woken for it.
    io_closed_.store(true, std::memory_order_seq_cst);
    for (auto& w : workers_) w->notify();
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
  // A thread outside the runtime that woke the last fibers may still be
  // notifying a worker: all_done() was read after it queued them (they
  // finished), so its count is seen here.
  while (external_wakers_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  // After the last fiber: until then a fiber may still be waiting for a
  // blocking call (and it keeps the wait above going).
  stop_blocking_pool();
  stop_workers();
  write_trace_at_exit();
  if (teardown_books_) *teardown_books_ = pool_.books();
  if (opts_.stats != options::stats_output::none) {
    const runtime_stats st = stats();
    const std::string text = opts_.stats == options::stats_output::json ? st.to_json() : st.to_table();
    std::fputs(text.c_str(), stderr);
    std::fflush(stderr);
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
  if (io_backend_ == options::io_backend::io_uring) {
    s += "io: io_uring per worker (" + probe_io_support().features + ")\n";
  } else if (opts_.io == options::io_backend::epoll) {
    s += "io: epoll per worker (asked for)\n";
  } else {
    s += "io: epoll per worker (" + probe_io_support().why_not + ")\n";
  }
  s += "topology: " + topo_.describe() + "\n";
  s += "domains:\n" + engine_.domains().describe();
  return s;
}

options::io_backend runtime_impl::choose_io_backend() {
  if (opts_.io == options::io_backend::epoll) return options::io_backend::epoll;
  const io_support& s = probe_io_support();
  if (s.uring) return options::io_backend::io_uring;
  if (opts_.io == options::io_backend::io_uring) {
    throw config_error(option_subject(opts_, "io") + ": no io_uring can be set up here: " + s.why_not);
  }
  // Said once per process: the kernel's answer does not change.
  static std::once_flag said;
  std::call_once(said, [&] { log_->warn("{}; I/O uses epoll", s.why_not); });
  return options::io_backend::epoll;
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

runtime_impl* runtime_of_current_fiber() noexcept {
  worker* w = worker_of_this_thread();
  return w && w->current_fiber() ? &w->rt() : nullptr;
}

}  // namespace usched::detail

namespace usched {

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
void runtime::dump_trace(const std::string& path) const { impl_->dump_trace(path); }

}  // namespace usched
