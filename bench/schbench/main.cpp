// main.cpp: the usched_schbench executable: parse the command line, run,
// turn bad input into one line and exit status 2 (common/cli_main.hpp).
#include <iostream>

#include "cli.hpp"
#include "common/cli_main.hpp"
#include "histogram.hpp"

int main(int argc, char** argv) {
  namespace sb = usched::schbench;
  constexpr const char* program = "usched_schbench";
  // A usage_error from parse_cli(), or from run_schbench() for a flag's
  // value that only running could check (--json's file), and a
  // usched::config_error from a runtime it cannot build are bad input.
  return bench::guarded_main(program, [&] {
    const sb::cli_options o = sb::parse_cli(argc, argv);
    if (o.help) {
      std::cout << sb::usage_text(program);
      return bench::exit_ok;
    }
    sb::run_schbench(o, std::cout);
    return bench::exit_ok;
  });
}
