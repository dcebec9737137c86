// cli_main.hpp: how the bundled benchmark programs end on bad input or a
// failure: one line naming the program and what went wrong, and an exit
// status that says which (DESIGN.md: "a one-line error ... and a non-zero
// exit"). Shared by the schbench clone and both comparison drivers.
#pragma once

#include <functional>
#include <stdexcept>
#include <string_view>

namespace bench {

// usage_error is a bad command line; what() is one line naming the flag and
// what it accepts. Each program's parser throws it (schbench::usage_error
// and micro_compare::usage_error are this type).
class usage_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// The exit statuses: success, a failure while running, bad input.
inline constexpr int exit_ok = 0;
inline constexpr int exit_failure = 1;
inline constexpr int exit_usage = 2;

// guarded_main() runs body() and returns its exit status. An exception that
// escapes it becomes one line on stderr, "<program>: <what()>", and the
// status: exit_usage for a usage_error or a usched::config_error (a bad
// flag, or a USCHED_* setting the runtime refused), exit_failure for any
// other std::exception.
int guarded_main(std::string_view program, const std::function<int()>& body);

}  // namespace bench
