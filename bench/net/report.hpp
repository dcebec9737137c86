// report.hpp: usched_netbench's output: one Markdown table per connection
// count, the notes that mark its rows, and the latency plot.
#pragma once

#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "servers.hpp"

namespace bench::netbench {

// floor_server's reply, 78 bytes, which every server is asked to send; a
// row whose responses average another size is noted under its table.
inline constexpr double reply_bytes = 78;

// count_runs is every run of one connection count: runs[i][r] is server
// i's run in round r (rounds not reached, after a stop signal, are absent).
struct count_runs {
  unsigned connections = 0;
  std::vector<std::vector<run_outcome>> runs;
};

// print_table() writes `c`'s table for `servers` (in the order of
// c.runs) to `out`: requests/s median [min..max], the ratios to Go and to
// the floor (medians of per-round ratios; "-" without that peer), the
// medians of p50, p99 and p99.9 ("failed" when no run measured, "not
// run" when a stop signal came first); then a note per problem, a row with
// errors marked "(!)". Returns whether any run had errors.
bool print_table(std::ostream& out, const std::vector<server>& servers, const count_runs& c);

// plot() draws p50/p99/p99.9 per server of `c` as grouped bars on a log
// scale into `png` with gnuplot (on PATH), its files in `dir`. Prints
// "plot: wrote FILE" on success; a failure is one line on stderr and a
// false return.
bool plot(const std::vector<server>& servers, const count_runs& c, const std::string& png,
          const std::string& title, const std::filesystem::path& dir);

}  // namespace bench::netbench
