// death_probe: the ways a usched program is meant to die, each checked by
// ctest from its output and exit status (tests/CMakeLists.txt).
//
//   overflow   a fiber recurses without bound on a 16 KiB stack; the runtime
//              ends the process with one line naming the fiber and its stack.
//   alloca KIB a fiber on a 64 KiB stack allocates KIB KiB with alloca and
//              writes its lowest byte; with stack-clash protection the
//              allocation probes page by page and hits the guard page.
//   frame KIB  the same with a fixed frame of KIB KiB (72, 100 or 130): a
//              frame that spans the guard page and writes only its lowest
//              bytes would otherwise land in the neighbouring stack block.
//   detached   a detached fiber throws; the runtime writes one line with the
//              fiber id and the exception, then aborts.
//   config     only builds a runtime from the environment (bad input must be
//              one line on stderr and a non-zero exit).
//   start      builds a runtime from the environment where its threads cannot
//              all be made (an address-space limit): the constructor throws,
//              and the probe reports how many threads the process has left.
#include <alloca.h>

#include <cstdio>
#include <cstdlib>
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

// The stack the big-frame modes run on: the default stack size outside the
// sanitizer builds, given explicitly so the sizes below mean the same there.
constexpr std::size_t big_frame_stack = 64 * 1024;

[[gnu::noinline]] void alloca_frame(std::size_t bytes) {
  auto* p = static_cast<volatile char*>(alloca(bytes));
  p[0] = 1;
}

// A frame of `KiB` KiB that writes its lowest byte only.
template <std::size_t KiB>
[[gnu::noinline]] int fixed_frame() {
  volatile char buf[KiB * 1024];
  buf[0] = 1;
  return buf[0];
}

void big_frame(const char* how, const char* kib) {
  usched::options opts = usched::options::from_env();
  opts.stack_size = big_frame_stack;
  usched::runtime rt(opts);
  const std::size_t n = std::strtoul(kib, nullptr, 10);
  if (std::strcmp(how, "alloca") == 0) {
    rt.run([n] { alloca_frame(n * 1024); });
  } else if (n == 72) {
    rt.run([] { fixed_frame<72>(); });
  } else if (n == 100) {
    rt.run([] { fixed_frame<100>(); });
  } else if (n == 130) {
    rt.run([] { fixed_frame<130>(); });
  } else {
    std::fprintf(stderr, "death_probe: frame '%s' KiB is not one of: 72, 100, 130\n", kib);
    std::exit(2);
  }
  std::fprintf(stderr, "death_probe: the %s KiB frame returned\n", kib);
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
    } else if ((std::strcmp(mode, "alloca") == 0 || std::strcmp(mode, "frame") == 0) && argc > 2) {
      big_frame(mode, argv[2]);
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
      std::fprintf(stderr, "usage: death_probe overflow|alloca KIB|frame KIB|detached|config|start\n");
      return 2;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "death_probe: %s\n", e.what());
    return 2;
  }
}
