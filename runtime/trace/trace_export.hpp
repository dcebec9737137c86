// trace_export.hpp: a recorded trace (trace.hpp's trace_data) written in
// the formats the kernel's people read, read back, summed up and drawn.
//
//   - Chrome JSON (the Trace Event Format): what ui.perfetto.dev and
//     chrome://tracing open. One track per worker, a slice per fiber run,
//     a flow arrow from each wake-up to the run it caused, instants for
//     migrations and balance passes, a counter per worker's runqueue.
//   - ftrace text: the kernel's /sys/kernel/tracing/trace as sched_switch,
//     sched_waking, sched_wakeup(_new) and sched_migrate_task lines, with
//     what the kernel has no tracepoint for on usched_* lines in the same
//     syntax. Perfetto's per-CPU view reads it; read_ftrace() reads it
//     back record for record.
//   - a `perf sched latency` table, and a PNG timeline drawn by gnuplot.
//
// Everything here is a plain function of the records: no clock, no thread,
// nothing a backend owns. The formats and how to open them are in
// docs/tracing.md.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include "trace.hpp"

namespace usched::detail {

// write_chrome_json() writes `d` as one Trace Event Format object
// ({"traceEvents": [...], "displayTimeUnit": "ns"}), ts in microseconds
// with the nanoseconds as three decimals. Process 1 is the runtime; thread
// N is worker N ("worker N"), thread nr_cpus the threads outside the
// runtime. Per record:
//   - a fiber's run is an "X" slice on its worker's track, from the switch
//     to it until the next switch on that worker, named "fiber ID" or
//     "fiber ID (label)", with how it stopped in args. A run still going at
//     the trace's end ends there. A trace that starts mid-run (a flight
//     recorder's dump) has switches away from fibers whose start it never
//     saw: that run is drawn from the trace's first time, with
//     "before_trace": true in its args, rather than dropped.
//   - a wake-up is an "i" instant on the waker's worker's track (the
//     outside track for a thread outside the runtime); the first wake-up of
//     a fiber before it runs also starts a flow ("s") that ends ("f",
//     "bp": "e") on the run slice that switch_to opens.
//   - a migration and a balance pass are "i" instants on the destination's
//     and the balancer's tracks, their decision in args.
//   - an idle park, unpark pair is an "X" slice "parked"; a spin and a kick
//     are instants.
//   - every record that carries a runqueue depth sets the "C" counter
//     "nr_running worker N".
// Label records become the fibers' names; they draw nothing of their own.
void write_chrome_json(std::ostream& out, const trace_data& d);

// write_ftrace() writes `d` as the kernel's trace file prints it: the
// "# tracer: nop" header, then one line per event,
//   COMM-PID [CPU] FLAGS SECS.NSECS: EVENT: ARGS
// where a fiber is a task (pid: its id, comm: its label with spaces as
// '_', cut to 15 bytes as TASK_COMM_LEN cuts it, or "fiber"), idle is
// <idle>-0, and every prio is 120. Timestamps carry nine decimals (the
// nanoseconds, as `trace-cmd report -t` prints them) so that nothing is
// rounded. Each record is its kernel event's lines (none for a balance
// pass, an idle event or a label) followed by one usched_* line with the
// rest of the record; read_ftrace() puts the two back together.
void write_ftrace(std::ostream& out, const trace_data& d);

// read_ftrace() reads what write_ftrace() wrote: the same records, in the
// same order, and the header's policy, nr_cpus, virtual_time and dropped.
// Lines of other events are skipped; a kernel line whose usched_* line is
// missing still gives its record, with what that line would have said at
// its defaults. Throws std::runtime_error naming the line for a line that
// is not an event line in the kernel's syntax, or a usched_* field that
// does not parse.
trace_data read_ftrace(std::istream& in);

// write_trace_file() writes `d` to `path`: Chrome JSON when the name ends
// in ".json", ftrace text otherwise. Throws std::runtime_error with a
// one-line message naming the path when the file cannot be written.
void write_trace_file(const std::string& path, const trace_data& d);

// read_raw_trace() reads what tracer::write_raw() wrote (a dump made in a
// signal handler), its records sorted by time. Throws std::runtime_error
// for a file that is not one, or is cut short inside a record.
trace_data read_raw_trace(std::istream& in);

// read_trace_file() reads an ftrace text file (read_ftrace), or a raw
// dump (read_raw_trace), whichever the file begins as. Throws
// std::runtime_error naming the path when it cannot be read, and the line
// when it does not parse.
trace_data read_trace_file(const std::string& path);

// latency_summary() is `perf sched latency` over the trace, sorted as
// `perf sched latency -s max` sorts: one row per fiber, or per label for
// fibers that have one (the row says how many fibers, "label:(N)", as perf
// merges tasks of one comm), with the run time (ms), the switches in, the
// average and maximum wake-to-run delay (ms; from each fiber's first
// wake-up to the switch that runs it), when the maximum ended (s), and the
// migrations. Then the totals, and the events the trace lost.
std::string latency_summary(const trace_data& d);

// timeline_options: what write_timeline_png() draws.
struct timeline_options {
  std::int64_t from_ns = 0;  // the window, in the trace's own time
  std::int64_t to_ns = 0;    // 0: the trace's last time
  std::string png_path;
  std::string title;         // empty: "usched trace (policy P)"
};

// write_timeline_png() draws the window as a PNG with gnuplot: a row per
// worker, each fiber's runs as boxes in the fiber's own colour (stable:
// from its id), each wake-up as a mark on the waker's row and a thin line
// on the row the fiber then runs on, from the wake-up to the run; idle is
// blank. The busiest fibers (by run time in the window) are named in the
// key. gnuplot's files go to a temporary folder, removed afterwards.
// Throws std::runtime_error in one line naming the path when gnuplot is
// not on PATH, fails (with its complaint), or the PNG cannot be written.
void write_timeline_png(const trace_data& d, const timeline_options& o);

// The same, with the window and the names as arguments.
void write_timeline_png(const trace_data& d, std::int64_t from_ns, std::int64_t to_ns,
                        const std::string& png_path, const std::string& title);

}  // namespace usched::detail
