// trace_names.hpp: what every exporter prints for a record's small fields
// (the enums the record's table names, fibers' labels), and reads back.
// Internal to usched_trace.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <usched/detail/wait.hpp>
#include <usched/wake_reason.hpp>

#include "policy.hpp"
#include "trace.hpp"

namespace usched::detail::trace_names {

// The names of an enum's values, in the enum's order.
template <std::size_t N>
using name_table = std::array<std::string_view, N>;

inline constexpr name_table<6> stop_reasons = {"yield", "block", "preempt_tick", "preempt_wakeup",
                                                "preempt_balance", "exit"};
inline constexpr name_table<5> migrate_causes = {"wake", "newidle", "periodic", "active", "steal"};
inline constexpr name_table<4> balance_outcomes = {"balanced", "moved", "none_movable", "active_asked"};
inline constexpr name_table<4> idle_kinds = {"spin", "park", "unpark", "kick"};
inline constexpr name_table<wake_reason_count> wake_reasons = {
    "spawn", "join", "sync", "channel", "future", "timer", "stop", "blocking", "io", "other"};
// The kernel's names, as the policies spell them (policy.hpp).
inline constexpr name_table<3> cpu_idle_types = {"idle", "newly_idle", "not_idle"};
inline constexpr name_table<4> migration_types = {"migrate_load", "migrate_util", "migrate_task", "migrate_misfit"};
inline constexpr name_table<6> group_types = {"has_spare",    "fully_busy", "misfit_task",
                                              "asym_packing", "imbalanced", "overloaded"};
inline constexpr name_table<18> wait_kinds = {
    "none",  "channel_send", "channel_recv", "mutex",     "condition_variable", "wait_group",
    "join",  "sleep",        "future",       "latch",     "barrier",            "semaphore",
    "shared_mutex", "condition_variable_any", "select", "blocking", "io", "task_group"};

static_assert(static_cast<std::size_t>(stop_reason::count) == stop_reasons.size());
static_assert(static_cast<std::size_t>(migrate_cause::count) == migrate_causes.size());
static_assert(static_cast<std::size_t>(balance_outcome::count) == balance_outcomes.size());
static_assert(static_cast<std::size_t>(idle_kind::count) == idle_kinds.size());
static_assert(static_cast<std::size_t>(cpu_idle_type::not_idle) + 1 == cpu_idle_types.size());
static_assert(static_cast<std::size_t>(migration_type::migrate_misfit) + 1 == migration_types.size());
static_assert(static_cast<std::size_t>(group_type::overloaded) + 1 == group_types.size());
static_assert(static_cast<std::size_t>(wait_kind::task_group) + 1 == wait_kinds.size(),
              "a new wait_kind needs its name here");

// name() is value's name, or its number when the table has none (a record
// from a newer build): printed that way, it still reads back.
template <std::size_t N>
std::string name(const name_table<N>& t, unsigned value) {
  return value < N ? std::string(t[value]) : std::to_string(value);
}

// value() is what name() printed back as a number, or nothing.
template <std::size_t N>
std::optional<std::uint8_t> value(const name_table<N>& t, std::string_view s) {
  for (std::size_t i = 0; i < N; ++i) {
    if (t[i] == s) return static_cast<std::uint8_t>(i);
  }
  if (s.empty() || s.size() > 3 || s.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  const unsigned v = static_cast<unsigned>(std::stoul(std::string(s)));
  if (v > 255) return std::nullopt;
  return static_cast<std::uint8_t>(v);
}

// label_text() is the (up to) eight bytes a label record carries, less the
// zero bytes that pad its end.
std::string label_text(const trace_record& r);

// labels() is every labelled fiber's label, put together from its label
// records (chunk 0 starts a label again: a fiber labelled twice keeps the
// last).
std::unordered_map<std::uint64_t, std::string> labels(const trace_data& d);

// fiber_name() is "fiber ID" or "fiber ID (label)".
std::string fiber_name(std::uint64_t fiber, const std::unordered_map<std::uint64_t, std::string>& labels);

// cpus_of() is the number of worker tracks the trace needs: nr_cpus, or
// more when a record names a higher worker.
std::size_t cpus_of(const trace_data& d);

// A fiber's run on a worker: from the switch to it to the next switch on
// that worker (or the trace's end). A run whose start the trace never saw
// (the worker's first switch is away from a fiber: a flight recorder's
// dump) starts at the trace's first time, before_trace set.
struct run_span {
  int cpu = 0;
  std::uint64_t fiber = 0;
  std::int64_t start = 0;
  std::int64_t end = 0;
  bool before_trace = false;
};

// A wake-up and the run it led to: the fiber's first wake-up since it last
// ran, and the next switch to it.
struct wake_span {
  std::uint64_t fiber = 0;
  int waker_cpu = -1;  // -1: a thread outside the runtime
  int cpu = 0;         // where it then ran
  std::int64_t wake = 0;
  std::int64_t run = 0;
};

// spans() is every run and every wake-up that led to one, in the order
// their ends appear.
void spans(const trace_data& d, std::vector<run_span>& runs, std::vector<wake_span>& wakes);

}  // namespace usched::detail::trace_names
