// schbench_model.hpp: the schbench clone's workload as simulated fibers.
//
// The same rounds as bench/schbench_core/schbench.cpp, from the same parsed
// command line (schbench::cli_options, the clone's parser and defaults):
//
//   worker round:   reset its wake word, put itself on its message thread's
//                   wake list, post the message thread, wait to be woken,
//                   record now - wake_time in whole microseconds (the
//                   clone's arithmetic), think (spin on the clock) for -c us.
//   message round:  reset its word, wake the whole list with ONE timestamp,
//                   wait to be posted, think -C us, sleep -s us plus a
//                   jitter below s/4 (drawn from the run's seed).
//
// The report follows the clone's: a block every -i s, zeroing after -w s
// and every -z s, and the final 2020 block; the histogram and its
// percentiles are the clone's code (histogram.hpp).
#pragma once

#include <iosfwd>

#include "cli.hpp"
#include "histogram.hpp"
#include "simulator.hpp"

namespace usched::sim {

// check_model_options() throws schbench::usage_error for a command line the
// simulator cannot run: -r 0 (until a signal) and --threads.
void check_model_options(const schbench::cli_options& o);

// run_schbench_model() runs one command line in `sim` for o.runtime_s
// virtual seconds, writing the clone's output to `out`, and returns the
// summary (mode "sim"). Throws what check_model_options() throws.
schbench::run_summary run_schbench_model(simulator& sim, const schbench::cli_options& o, std::ostream& out);

}  // namespace usched::sim
