// fatal.cpp: the process-ending reports. Where the runtime cannot go on
// (an uncaught exception nobody will see, a task_group dropped with an error
// unobserved, a runtime destroyed from its own fiber), it says why in one
// line on stderr and aborts.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <exception>
#include <string>

#include <usched/task_group.hpp>

#include "fatal.hpp"
#include "runtime_impl.hpp"

namespace usched::detail {

// The end of a process the runtime cannot go on in: one line to stderr with
// a plain write, whatever the log level (the process is about to die and this
// is the only account of why), then abort(), not std::terminate(): there is
// no active exception, and the C++ runtime's terminate handler would add a
// misleading "without an active exception" line.
[[noreturn]] void die(std::string line) noexcept {
  // One line, however long the parts are: a newline in one would split it.
  for (char& c : line) {
    if (c == '\n') c = ' ';
  }
  line = "usched: " + line + "\n";
  for (std::size_t off = 0; off < line.size();) {
    const ssize_t n = write(STDERR_FILENO, line.data() + off, line.size() - off);
    if (n <= 0) break;
    off += static_cast<std::size_t>(n);
  }
  // The trace of the runtime it happened in, if it records one: the last
  // events before the end (docs/tracing.md).
  if (runtime_impl* rt = runtime_of_current_fiber()) rt->dump_trace_for_report("the report above");
  std::abort();
}

std::string fiber_name(std::uint64_t id, const char* label) {
  std::string s = std::to_string(id);
  if (label) s += " (\"" + std::string(label) + "\")";
  return s;
}

std::string fiber_name(const fiber* f) {
  return fiber_name(f->id.load(std::memory_order_relaxed), f->label.load(std::memory_order_relaxed));
}

char* put_fiber_name(char* p, char* end, const fiber* f) noexcept {
  char digits[24];
  int n = 0;
  for (std::uint64_t v = f->id.load(std::memory_order_relaxed); n == 0 || v != 0; v /= 10) {
    digits[n++] = static_cast<char>('0' + v % 10);
  }
  while (n) *p++ = digits[--n];
  const char* label = f->label.load(std::memory_order_relaxed);
  if (!label) return p;
  // ` ("` before the label, `")` after it, and room for a cut: "...".
  constexpr std::size_t frame = 3 + 2 + 3;
  if (static_cast<std::size_t>(end - p) <= frame) return p;
  char* const last = end - 2 - 3;
  *p++ = ' ';
  *p++ = '(';
  *p++ = '"';
  for (; *label && p < last; ++label) *p++ = *label == '\n' ? ' ' : *label;
  if (*label) {
    for (int i = 0; i < 3; ++i) *p++ = '.';
  }
  *p++ = '"';
  *p++ = ')';
  return p;
}

namespace {

// what_of(): an exception's what(), for the one-line reports.
std::string what_of(const std::exception_ptr& e) noexcept {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
  }
  return "unknown exception";
}

}  // namespace

// The runtime's log goes first, if the caller is one of its fibers: what it
// said before the end. (A handle dropped on another thread, perhaps after
// its runtime, has no log to flush.)
[[noreturn]] void report_detached_exception(const join_state* s) noexcept {
  if (runtime_impl* rt = runtime_of_current_fiber()) rt->log().flush();
  die("detached fiber " + fiber_name(s->id, s->label) + " ended with an uncaught exception: " +
      what_of(s->error) + "; aborting");
}

void report_unobserved_group_exception(const std::exception_ptr& e) noexcept {
  die("a task_group was destroyed without a wait() after a task threw: " + what_of(e) + "; aborting");
}

}  // namespace usched::detail
