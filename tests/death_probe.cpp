// death_probe: the ways a usched program is meant to die, each checked by
// ctest from its output and exit status (tests/CMakeLists.txt).
//
//   overflow   a fiber recurses without bound on a 16 KiB stack; the runtime
//              ends the process with one line naming the fiber and its stack.
//   detached   a detached fiber throws; the runtime logs the fiber id and the
//              exception, then calls std::terminate.
//   config     only builds a runtime from the environment (bad input must be
//              one line on stderr and a non-zero exit).
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include <usched/usched.hpp>

namespace {

// Far beyond what a 16 KiB stack holds; it only keeps the compiler from
// proving the recursion infinite.
volatile int depth_limit = 1 << 30;

// Each frame keeps a buffer alive across the recursive call so the compiler
// cannot turn the recursion into a loop.
[[gnu::noinline]] int recurse(int depth) {
  volatile char pad[512];
  pad[0] = static_cast<char>(depth);
  if (depth >= depth_limit) return pad[0];
  return recurse(depth + 1) + pad[0];
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  try {
    usched::options opts = usched::options::from_env();
    if (std::strcmp(mode, "overflow") == 0) {
      opts.stack_size = 16 * 1024;
      usched::runtime rt(opts);
      rt.run([] { return recurse(0); });
    } else if (std::strcmp(mode, "detached") == 0) {
      usched::runtime rt(opts);
      rt.spawn([] { throw std::runtime_error("nobody joins me"); }).detach();
    } else if (std::strcmp(mode, "config") == 0) {
      usched::runtime rt(opts);
    } else {
      std::fprintf(stderr, "usage: death_probe overflow|detached|config\n");
      return 2;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "death_probe: %s\n", e.what());
    return 2;
  }
}
