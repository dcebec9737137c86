// hang_report.cpp: what a runtime whose destructor has waited long for its
// last fibers says about them: which are blocked, in what, and on what (the
// listing the monitor's hang report shares, monitor.cpp).
#include <algorithm>
#include <string>
#include <vector>

#include "fatal.hpp"
#include "runtime_impl.hpp"

namespace usched::detail {
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
    case wait_kind::io: return "an I/O call";
    case wait_kind::task_group: return "task_group::wait";
  }
  return "an unknown wait";
}

// Blocked fibers the hang report names one by one; the rest are counted.
constexpr std::size_t hang_report_max_fibers = 32;

}  // namespace

// blocked_fibers(): a fiber whose wait token is armed (odd) is blocked, in
// what prepare_wait recorded; the other live fibers are running or queued.
// The fibers are found in the stack pool, which holds every fiber ever
// mapped, so neither spawn nor exit keeps a list of live ones for this.
// Everything read here is a snapshot taken while the workers run; after a
// second or more without progress it is stable.
std::vector<runtime_impl::blocked_fiber> runtime_impl::blocked_fibers(std::uint64_t& live) const {
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
  live = spawned > exited ? spawned - exited : 0;
  std::sort(blocked.begin(), blocked.end(),
            [](const blocked_fiber& a, const blocked_fiber& b) { return a.id < b.id; });
  return blocked;
}

void runtime_impl::log_blocked(const std::vector<blocked_fiber>& blocked) {
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
}

// report_hang(): which live fibers the destructor is waiting for.
void runtime_impl::report_hang(std::chrono::milliseconds waited) {
  std::uint64_t live = 0;
  const std::vector<blocked_fiber> blocked = blocked_fibers(live);
  const std::uint64_t others = live > blocked.size() ? live - blocked.size() : 0;
  log_->warn("~runtime has waited {:.1f} s for {} fiber{} to finish: {} blocked, {} running or queued",
             static_cast<double>(waited.count()) / 1000.0, live, live == 1 ? "" : "s", blocked.size(),
             others);
  log_blocked(blocked);
  log_->flush();
  // The first report of this wait leaves the flight recorder's last events
  // behind, as the monitor's stall and hang reports do; the later ones
  // would only write the same quiet over it.
  if (waited < 2 * hang_report_after && tracer_ && tracer_->cfg().kind == tracer::mode::flight) {
    dump_trace_for_report("the wait for the last fibers", false);
  }
}

}  // namespace usched::detail
