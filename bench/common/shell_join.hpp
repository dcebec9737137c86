// shell_join.hpp: a command line as one line of text, for the messages
// that name a command (a failed run, the comparison's header). Apart from
// the child-process code (process.hpp), which the schbench clone's command
// line, and so the simulator, do not need.
#pragma once

#include <span>
#include <string>

namespace bench {

// shell_join() joins arguments into one line a shell would split back the
// same way (single-quoting where needed); the second form puts `exe` first.
std::string shell_join(std::span<const std::string> args);
std::string shell_join(const std::string& exe, std::span<const std::string> args);

}  // namespace bench
