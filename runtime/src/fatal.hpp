// fatal.hpp: the process-ending reports (fatal.cpp), and how they and the
// hang report name a fiber.
#pragma once

#include <string>

#include "fiber_impl.hpp"

namespace usched::detail {

// die() ends a process the runtime cannot go on in: `line`, prefixed with
// "usched: ", on stderr (one line, whatever the log level), then abort().
// Any thread.
[[noreturn]] void die(std::string line) noexcept;

// fiber_name(): the fiber's id, and its label if it was spawned with one:
// `12 ("http accept loop")`.
std::string fiber_name(const fiber* f);

// report_detached_exception() ends the process for a detached fiber `f`
// that finished with an uncaught exception: the exception was caught into
// the task, and nobody else will see it. Flushes the runtime's log first.
[[noreturn]] void report_detached_exception(fiber* f) noexcept;

}  // namespace usched::detail
