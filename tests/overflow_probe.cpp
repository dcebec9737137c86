// overflow_probe: a fiber that recurses without bound on a 16 KiB stack. The
// runtime must end the process with one line naming the fiber and its stack
// size. With --no-overflow it only builds a runtime from the environment
// (used to check the bad-input path of a bundled program).
#include <cstdio>
#include <cstring>

#include <usched/usched.hpp>

namespace {

// Each frame keeps a buffer alive across the recursive call so the compiler
// cannot turn the recursion into a loop.
// The limit is far beyond what a 16 KiB stack holds; it only keeps the
// compiler from proving the recursion infinite.
volatile int depth_limit = 1 << 30;

[[gnu::noinline]] int recurse(int depth) {
  volatile char pad[512];
  pad[0] = static_cast<char>(depth);
  if (depth >= depth_limit) return pad[0];
  return recurse(depth + 1) + pad[0];
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const bool overflow = !(argc > 1 && std::strcmp(argv[1], "--no-overflow") == 0);
    usched::options opts = usched::options::from_env();
    opts.stack_size = 16 * 1024;
    usched::runtime rt(opts);
    if (overflow) rt.run([] { return recurse(0); });
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "overflow_probe: %s\n", e.what());
    return 2;
  }
}
