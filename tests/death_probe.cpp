// death_probe: the ways a usched program is meant to die, each checked by
// ctest from its output and exit status (tests/CMakeLists.txt).
//
//   overflow   a fiber recurses without bound on a 16 KiB stack; the runtime
//              ends the process with one line naming the fiber and its stack.
//   detached   a detached fiber throws; the runtime logs the fiber id and the
//              exception, then calls std::terminate.
//   config     only builds a runtime from the environment (bad input must be
//              one line on stderr and a non-zero exit).
//   start      builds a runtime from the environment where its threads cannot
//              all be made (an address-space limit): the constructor throws,
//              and the probe reports how many threads the process has left.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>

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

// The threads of this process, from /proc/self/status.
int thread_count() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
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
    } else if (std::strcmp(mode, "start") == 0) {
      try {
        usched::runtime rt(opts);
      } catch (const std::system_error& e) {
        std::fprintf(stderr, "death_probe: %s; %d thread(s) left\n", e.what(), thread_count());
        return 3;
      }
      std::fprintf(stderr, "death_probe: every worker started\n");
    } else {
      std::fprintf(stderr, "usage: death_probe overflow|detached|config|start\n");
      return 2;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "death_probe: %s\n", e.what());
    return 2;
  }
}
