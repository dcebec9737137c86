// monitor.cpp: the runtime's monitor thread (its decisions are monitor.hpp's
// monitor::step): when it sleeps, what it reads of the workers, and its
// stall and hang reports.
#include <algorithm>
#include <string>
#include <system_error>
#include <vector>

#include "clock.hpp"
#include "fatal.hpp"
#include "futex.hpp"
#include "runtime_impl.hpp"

namespace usched::detail {

// What monitor::step reads and does, on this runtime: every read an atomic
// of a worker or of the engine (the monitor holds no lock of theirs).
struct monitor_host {
  runtime_impl& rt;
  std::size_t nr_workers() const noexcept { return rt.workers_.size(); }
  worker& at(std::size_t i) const noexcept { return *rt.workers_[i]; }
  std::uint64_t run_mark(std::size_t i) const noexcept { return at(i).run_mark(); }
  std::uint64_t looks(std::size_t i) const noexcept { return at(i).looks(); }
  std::uint64_t next_tick(std::size_t i) const noexcept { return at(i).next_tick_cycles(); }
  bool resched_asked(std::size_t i) const noexcept { return rt.engine_.resched_asked(static_cast<int>(i)); }
  bool has_queued(std::size_t i) const noexcept { return rt.engine_.has_queued(static_cast<int>(i)); }
  void request(std::size_t i, std::uint64_t bits, std::uint64_t mark) noexcept { at(i).request_by_monitor(bits, mark); }
  void stalled(std::size_t i, std::uint64_t mark, std::uint64_t quiet) { rt.report_stall(i, mark, quiet); }
  bool all_parked() const noexcept {
    return rt.nr_parked.load(std::memory_order_seq_cst) == static_cast<int>(rt.workers_.size());
  }
  std::uint64_t park_epoch() const noexcept {
    std::uint64_t parks = 0;
    for (const auto& w : rt.workers_) parks += w->parks();
    return parks;
  }
  bool hang_possible() { return rt.hang_possible(); }
  void hung(std::uint64_t quiet) { rt.report_idle_hang(quiet); }
};

monitor::config runtime_impl::monitor_config() const noexcept {
  const auto to_cycles = [this](std::int64_t ns) {
    return static_cast<std::uint64_t>(static_cast<double>(ns) * cycles_per_ns_);
  };
  monitor::config c;
  c.slice = engine_.fair() ? 0 : to_cycles(engine_.config().fifo_slice_ns);
  const std::int64_t stall_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(opts_.stall).count();
  c.stall = to_cycles(stall_ns);
  const std::int64_t quiet_ns = std::max<std::int64_t>(
      stall_ns, std::chrono::duration_cast<std::chrono::nanoseconds>(hang_quiet_after).count());
  c.hang_quiet = to_cycles(quiet_ns);
  c.period = std::max<std::uint64_t>(tick_cycles_, 1);
  return c;
}

void runtime_impl::start_monitor() { monitor_thread_ = std::thread([this] { monitor_main(); }); }

void runtime_impl::stop_monitor() noexcept {
  monitor_stop_.store(true, std::memory_order_seq_cst);
  wake_monitor();
  if (monitor_thread_.joinable()) monitor_thread_.join();
}

void runtime_impl::wake_monitor() noexcept {
  if (monitor_word_.exchange(monitor_awake, std::memory_order_seq_cst) != monitor_awake) futex_wake(monitor_word_);
}

// The monitor looks when step() asks (the next tick, a slice's end, a stall
// threshold: at most a tick apart while a fiber runs) and otherwise sleeps.
// With every worker parked it sleeps until a worker unparks
// (wake_monitor_if_asleep), or until a hang's quiet time has passed: an
// idle runtime does not wake it at all.
void runtime_impl::monitor_main() noexcept {
  monitor m(monitor_config(), workers_.size());
  monitor_host host{*this};
  while (!monitor_stop_.load(std::memory_order_seq_cst)) {
    const std::uint64_t now = cycles();
    const monitor::outcome o = m.step(host, now);
    const long long timeout_ns =
        o.next == monitor::never_again
            ? -1
            : static_cast<long long>(static_cast<double>(o.next > now ? o.next - now : 0) * ns_per_cycle_);
    if (timeout_ns == 0) continue;
    if (o.all_parked) {
      // Announce, then look again: a worker that unparks after the look
      // reads the announcement and wakes us.
      monitor_word_.store(monitor_asleep, std::memory_order_seq_cst);
      if (nr_parked.load(std::memory_order_seq_cst) == static_cast<int>(workers_.size()) &&
          !monitor_stop_.load(std::memory_order_seq_cst)) {
        futex_wait(monitor_word_, monitor_asleep, timeout_ns);
      }
    } else {
      // A nap of at most a tick: nobody needs to end it but the destructor.
      monitor_word_.store(monitor_napping, std::memory_order_seq_cst);
      if (!monitor_stop_.load(std::memory_order_seq_cst)) futex_wait(monitor_word_, monitor_napping, timeout_ns);
    }
    monitor_word_.store(monitor_awake, std::memory_order_seq_cst);
  }
}

void runtime_impl::report_stall(std::size_t i, std::uint64_t mark, std::uint64_t quiet) {
  const worker& w = *workers_[i];
  const fiber* f = w.run_fiber();
  // The fiber was published before its mark; a mark changed since is a
  // switch after all.
  if (f == nullptr || w.run_mark() != mark) return;
  stall_info s;
  s.worker = static_cast<int>(i);
  s.fiber_id = f->id.load(std::memory_order_relaxed);
  s.label = f->label.load(std::memory_order_relaxed);
  s.quiet_ns = static_cast<std::int64_t>(static_cast<double>(quiet) * ns_per_cycle_);
  log_->warn("fiber {} has run on worker {} for {} ms without a switch or a preempt point: every fiber "
             "queued there waits for it (USCHED_STALL_MS={})",
             fiber_name(s.fiber_id, s.label), s.worker, s.quiet_ns / 1'000'000, opts_.stall.count());
  log_->flush();
  on_stall(s);
}

// A stall's report leaves the flight recorder's last events behind, where
// USCHED_TRACE says (a whole run's trace is written at the end anyway).
void runtime_impl::on_stall(const stall_info& s) noexcept {
  if (!tracer_ || tracer_->cfg().kind != tracer::mode::flight) return;
  dump_trace_for_report(("the stall of fiber " + fiber_name(s.fiber_id, s.label)).c_str(), false);
}

bool runtime_impl::hang_possible() {
  if (draining_.load(std::memory_order_seq_cst)) return false;
  for (const auto& w : workers_) {
    if (w->earliest_timer() != far_deadline_ns || w->parked_in_io()) return false;
  }
  {
    // A call on the blocking pool resumes its fiber when it returns.
    std::lock_guard<std::mutex> g(blocking_.mutex);
    if (blocking_.queued != 0 || blocking_.idle != blocking_.threads.size()) return false;
  }
  return !all_done();
}

void runtime_impl::report_idle_hang(std::uint64_t quiet) {
  std::uint64_t live = 0;
  const std::vector<blocked_fiber> blocked = blocked_fibers(live);
  if (live == 0) return;
  const auto ms = static_cast<std::int64_t>(static_cast<double>(quiet) * ns_per_cycle_) / 1'000'000;
  log_->warn("every worker has been parked for {} ms while {} fiber{} wait{} with nothing in the runtime to "
             "wake them (no timer, no I/O, no blocking call): only a thread outside it can",
             ms, live, live == 1 ? "" : "s", live == 1 ? "s" : "");
  log_blocked(blocked);
  log_->flush();
  if (tracer_ && tracer_->cfg().kind == tracer::mode::flight) dump_trace_for_report("the hang", false);
}

}  // namespace usched::detail
