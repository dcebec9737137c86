// workload.hpp: a simulated workload read from a small text file, so that a
// new experiment needs no C++.
//
// Grammar (one statement per line; '#' starts a comment; blank lines are
// ignored; durations are whole numbers with ns, us, ms or s):
//
//   runtime DURATION           how long to simulate (default 10s)
//   fiber NAME [xN] [pin=W] [on=W] [node=N] [slice=DURATION]
//                              a fiber definition; N copies start at time 0
//                              (x0: only started by `spawn`), pinned to
//                              worker W if given, or queued on worker W at
//                              the start without asking the policy (on=W: a
//                              starting state; balancing may move them),
//                              preferring NUMA node N, asking for an EEVDF
//                              slice (100us..100ms; spawn_options::slice).
//                              The steps below it, up to the next `fiber`,
//                              are its program:
//     run DURATION             use the CPU (with preempt points)
//     sleep DURATION           block on a timer
//     wait EVENT               block until EVENT is posted (a post nobody
//                              waits for is kept, once: schbench's fpost)
//     post EVENT               wake EVENT's waiter
//     spawn NAME [xN]          start N copies of fiber NAME
//     join                     wait for every fiber this one spawned
//     repeat [N]               run the steps above it again, N times in
//                              all (default: until the end of the run);
//                              must be the fiber's last step
//
// Every wake-up (from a sleep, a wait or a join) is a sample of the run's
// latency histogram: from the instant the fiber was made runnable to the
// instant it runs, in whole microseconds, as schbench counts it. A wake-up
// served within the microsecond is a sample of 0 (schbench drops those; a
// block of every wake-up keeps them). A wait that finds its post already
// there, or a join of a fiber already gone, ends at once: no wake-up, no
// sample.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <stdexcept>
#include <string>
#include <vector>

#include "histogram.hpp"
#include "simulator.hpp"

namespace usched::sim {

// workload_error: a malformed file; what() is one line,
// "FILE:LINE: what is wrong".
class workload_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct workload_step {
  enum class kind { run, sleep, wait, post, spawn, join };
  kind what = kind::run;
  std::int64_t ns = 0;
  std::string name;     // event or fiber
  unsigned count = 1;   // spawn xN
};

struct fiber_def {
  std::string name;
  unsigned count = 1;
  int pin = -1;
  int on = -1;
  int node = -1;  // preferred NUMA node (spawn_options::numa_node)
  std::int64_t slice_ns = 0;  // the slice it asks for under EEVDF (spawn_options::slice); 0: the base
  std::vector<workload_step> steps;
  std::uint64_t repeat = 1;  // 0: until the end of the run
  int line = 0;
};

struct workload {
  std::int64_t runtime_ns = 10'000'000'000;
  std::vector<fiber_def> fibers;
};

// parse_workload() reads `in` (named `file` in messages). Throws
// workload_error.
workload parse_workload(std::istream& in, const std::string& file);

// run_workload() runs it in `sim`, prints the latency block to `out` and
// returns the summary.
schbench::run_summary run_workload(simulator& sim, const workload& w, std::ostream& out);

}  // namespace usched::sim
