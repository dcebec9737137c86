// main.cpp: the usched_schbench executable: parse the command line, run,
// turn bad input into one line and exit status 2.
#include <iostream>

#include <usched/error.hpp>

#include "cli.hpp"
#include "histogram.hpp"

int main(int argc, char** argv) {
  namespace sb = usched::schbench;
  constexpr const char* program = "usched_schbench";
  sb::cli_options o;
  try {
    o = sb::parse_cli(argc, argv);
  } catch (const sb::usage_error& e) {
    std::cerr << program << ": " << e.what() << '\n';
    return 2;
  }
  if (o.help) {
    std::cout << sb::usage_text(program);
    return 0;
  }
  try {
    sb::run_schbench(o, std::cout);
  } catch (const sb::usage_error& e) {  // a flag's value that only running could check
    std::cerr << program << ": " << e.what() << '\n';
    return 2;
  } catch (const usched::config_error& e) {
    std::cerr << program << ": " << e.what() << '\n';
    return 2;
  } catch (const std::exception& e) {
    std::cerr << program << ": " << e.what() << '\n';
    return 1;
  }
  return 0;
}
