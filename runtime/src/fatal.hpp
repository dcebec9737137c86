// fatal.hpp: the process-ending reports (fatal.cpp), and how they and the
// hang report name a fiber.
#pragma once

#include <cstdint>
#include <string>

#include "fiber_impl.hpp"

namespace usched::detail {

// die() ends a process the runtime cannot go on in: `line`, prefixed with
// "usched: ", on stderr (one line, whatever the log level), then abort().
// Any thread.
[[noreturn]] void die(std::string line) noexcept;

// fiber_name(): the fiber's id, and its label if it was spawned with one:
// `12 ("http accept loop")`.
// The second form names it by its parts (a join state keeps them).
std::string fiber_name(const fiber* f);
std::string fiber_name(std::uint64_t id, const char* label);

// put_fiber_name() writes what fiber_name() returns into [p, end) without
// allocating or locking, for the reports made inside a signal handler (the
// stack overflow's); returns the end of what it wrote. A label too long for
// the room is cut short and ends in "...", a newline in it is a space (the
// report is one line). Requires end - p >= 32 (room for the id). Any
// thread; async-signal-safe.
char* put_fiber_name(char* p, char* end, const fiber* f) noexcept;

// report_detached_exception() ends the process for a detached fiber that
// finished with an uncaught exception, kept in its join state `s`, which
// nobody else will see. Flushes the log of the caller's runtime first.
[[noreturn]] void report_detached_exception(const join_state* s) noexcept;

}  // namespace usched::detail
