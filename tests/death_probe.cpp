// death_probe: the ways a usched program is meant to die, each checked by
// ctest from its output and exit status (tests/CMakeLists.txt).
//
//   overflow   a fiber recurses without bound on a 16 KiB stack; the runtime
//              ends the process with one line naming the fiber and its stack.
//   overflow-many past-budget
//              on one worker, as many fibers block (each holding its 16 KiB
//              stack) as the mprotect guard budget has stacks (a quarter of
//              vm.max_map_count, two mappings a stack) plus 64, then one more
//              (labelled "deep recursion") overflows its stack by about 2 KiB, writing every frame
//              whole, and returns. With USCHED_GUARD_PAGES=mprotect that stack
//              is past the budget and has no guard page, and its canary
//              reports the overflow when the fiber exits; with guard regions
//              the guard page faults first. Either way: one line, then the
//              end.
//   alloca KIB a fiber on a 64 KiB stack allocates KIB KiB with alloca and
//              writes its lowest byte; with stack-clash protection the
//              allocation probes page by page and hits the guard page.
//   frame KIB  the same with a fixed frame of KIB KiB (72, 100 or 130): a
//              frame that spans the guard page and writes only its lowest
//              bytes would otherwise land in the neighbouring stack block.
//   overflow-labelled
//              the overflow, by a fiber spawned with the label "deep
//              recursion": the line names it by its id and its label.
//   unclashed KIB
//              a fiber labelled "big frame" on a 64 KiB stack enters a frame
//              of KIB KiB built without stack-clash protection and writes its
//              far end (death_probe_unclashed.cpp). The fiber is the first of
//              its slab, the lowest block: 68 KiB puts the stack pointer and
//              the write in its own guard page; 1024 KiB puts them a little
//              under 1 MiB below the slab, in memory nothing maps.
//   unclashed-neighbour
//              the same with a 141 KiB frame, by a fiber spawned from a
//              fiber (labelled "parent"): it gets the top block of the slab,
//              and its frame lands in the guard page of the block below, a
//              pooled fiber's.
//   plain-thread-fault
//              a plain thread writes through a null pointer while a runtime
//              runs: the default SIGSEGV, no overflow report.
//   fiber-fault  the same from a fiber, on its own stack: not an overflow.
//   detached   a detached fiber throws; the runtime writes one line with the
//              fiber id and the exception, then aborts.
//   detached-labelled  the same, for a fiber spawned with a label.
//   task-group-unobserved  a task_group's task throws and the group is
//              destroyed without a wait(): one line, then abort.
//   hang       destroys a runtime while fibers wait (practically) forever,
//              one in each kind of wait: channel recv and send, a mutex the
//              main thread holds, a condition variable, a wait group, a
//              sleep, a join; and one that keeps running. The destructor
//              reports them. The probe relays its own stderr and exits
//              (status 0) once two reports have named every fiber.
//   mutex-unlocked  a fiber unlocks a usched::mutex nobody holds; the
//              runtime ends the process with one line naming the fiber.
//   timed-mutex-unlocked  the same from a plain thread, on a timed_mutex.
//   mutex-other  fiber 1 holds a mutex and fiber 2 unlocks it (caught where
//              the library is built without NDEBUG).
//   recursive-other  the same on a recursive_mutex (caught in every build).
//   channel-waiters  a channel is destroyed while two fibers wait in its
//              recv(); one line says how many wait, and the rule.
//   config     only builds a runtime from the environment (bad input must be
//              one line on stderr and a non-zero exit).
//   start      builds a runtime from the environment where its threads cannot
//              all be made (an address-space limit): the constructor throws,
//              and the probe reports how many threads the process has left.
#include <alloca.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <usched/usched.hpp>

namespace death_probe {
// death_probe_unclashed.cpp
bool unclashed_frame(std::size_t kib);
}  // namespace death_probe

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

// Recurses until its stack pointer is `bytes` below where it started,
// writing each frame whole, as code that initializes its locals does.
[[gnu::noinline]] int recurse_until(const char* start, std::size_t bytes) {
  volatile char pad[512];
  for (auto& c : pad) c = 1;
  const char* here = reinterpret_cast<const char*>(__builtin_frame_address(0));
  if (static_cast<std::size_t>(start - here) >= bytes) return pad[0];
  return recurse_until(start, bytes) + pad[1];
}

// The mprotect guard budget plus 64: /proc/sys/vm/max_map_count / 8.
long past_budget() {
  long max_maps = 65530;
  std::ifstream f("/proc/sys/vm/max_map_count");
  if (long v = 0; f >> v && v > 0) max_maps = v;
  return max_maps / 8 + 64;
}

void overflow_many(usched::options opts, long n) {
  opts.stack_size = 16 * 1024;
  // One worker: the fibers that block take every stack mapped before the
  // overflowing one, guarded or not (no other worker's cache keeps some).
  opts.workers = 1;
  usched::runtime rt(opts);
  rt.run([n] {
    usched::channel<int> release(0);
    usched::wait_group blocked;
    blocked.add(n);
    std::vector<usched::join_handle<void>> hs;
    hs.reserve(static_cast<std::size_t>(n));
    for (long i = 0; i < n; ++i) {
      hs.push_back(usched::spawn([&] {
        blocked.done();
        (void)release.recv();
      }));
    }
    blocked.wait();
    // A 16 KiB stack has a little more than that to use (the rest of its
    // pages), up to 4 KiB more: 2 KiB past the rounded-up end reaches into
    // the page below the stack, not past it.
    usched::spawn_options labelled;
    labelled.label = "deep recursion";
    usched::spawn(labelled, [] {
      const char* start = reinterpret_cast<const char*>(__builtin_frame_address(0));
      return recurse_until(start, 16 * 1024 + 3 * 1024 + 512);
    }).join();
    release.close();
    for (auto& h : hs) h.join();
  });
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

// The unclashed modes: a frame of `kib` KiB without stack-clash protection,
// in the first fiber (the lowest block of the first slab) or, for the
// neighbour, in a fiber it spawns (the top block).
void unclashed(const char* kib_arg, bool neighbour) {
  usched::options opts = usched::options::from_env();
  opts.stack_size = big_frame_stack;
  usched::runtime rt(opts);
  const std::size_t kib = std::strtoul(kib_arg, nullptr, 10);
  usched::spawn_options big;
  big.label = "big frame";
  bool known = true;
  if (neighbour) {
    usched::spawn_options parent;
    parent.label = "parent";
    rt.spawn(parent, [&] { usched::spawn(big, [&] { known = death_probe::unclashed_frame(kib); }).join(); }).join();
  } else {
    rt.spawn(big, [&] { known = death_probe::unclashed_frame(kib); }).join();
  }
  if (!known) {
    std::fprintf(stderr, "death_probe: unclashed frame '%s' KiB is not one of: 68, 141, 1024\n", kib_arg);
    std::exit(2);
  }
  std::fprintf(stderr, "death_probe: the unclashed %s KiB frame returned\n", kib_arg);
}

// Where a write through it faults: a null pointer the compiler cannot see.
volatile std::uintptr_t nowhere = 0;

[[gnu::noinline]] void write_nowhere() { *reinterpret_cast<volatile int*>(nowhere) = 1; }

// Sends this process's stderr through a pipe, relaying it line by line, and
// ends the process with status 0 once `lines` lines naming a blocked fiber
// have gone by: the hang test then takes as long as the reports, no longer.
void exit_after_blocked_lines(int lines) {
  int fds[2];
  if (pipe(fds) != 0) std::exit(3);
  const int real_stderr = dup(STDERR_FILENO);
  dup2(fds[1], STDERR_FILENO);
  close(fds[1]);
  std::thread([lines, in = fds[0], real_stderr] {
    std::string line;
    int seen = 0;
    char c;
    while (read(in, &c, 1) == 1) {
      line += c;
      if (c != '\n') continue;
      if (write(real_stderr, line.data(), line.size()) < 0) std::_Exit(3);
      if (line.find(" is blocked in ") != std::string::npos && ++seen == lines) std::_Exit(0);
      line.clear();
    }
    std::_Exit(3);
  }).detach();
}

// One fiber waiting in each kind of wait, in this order (fiber ids 1..7),
// then one that never waits.
constexpr int hang_fibers = 7;

void hang() {
  // All outlive the runtime, whose destructor never returns.
  static usched::channel<int> nobody_sends;
  static usched::channel<int> nobody_receives;
  static usched::mutex held;
  static usched::mutex cv_mutex;
  static usched::condition_variable never_notified;
  static usched::wait_group never_done(1);
  held.lock();
  exit_after_blocked_lines(2 * hang_fibers);
  usched::runtime rt(usched::options::from_env());
  auto receiver = rt.spawn([] { nobody_sends.recv(); });
  rt.spawn([] {
    held.lock();
    held.unlock();
  }).detach();
  rt.spawn([] { nobody_receives.send(1); }).detach();
  rt.spawn([] {
    std::unique_lock<usched::mutex> lk(cv_mutex);
    never_notified.wait(lk);
  }).detach();
  rt.spawn([] { never_done.wait(); }).detach();
  rt.spawn([] { usched::this_fiber::sleep_for(std::chrono::hours(1)); }).detach();
  rt.spawn([h = std::move(receiver)]() mutable { h.join(); }).detach();
  // Fiber 8 never blocks in the runtime: it is running or queued. It sleeps
  // its worker's thread, so the test costs no CPU, and yields, so on a
  // single worker the others still get to block.
  rt.spawn([] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      usched::this_fiber::yield();
    }
  }).detach();
}

// One worker: a fiber spawned here runs only once the spawner blocks (or
// returns), so every fiber that was started has reached its first wait
// when the spawner runs again.
void misuse(usched::options opts, const char* mode) {
  opts.workers = 1;
  usched::runtime rt(opts);
  if (std::strcmp(mode, "mutex-unlocked") == 0) {
    rt.run([] {
      usched::mutex m;
      m.unlock();
    });
  } else if (std::strcmp(mode, "mutex-other") == 0 || std::strcmp(mode, "recursive-other") == 0) {
    const bool recursive = std::strcmp(mode, "recursive-other") == 0;
    rt.run([recursive] {
      usched::mutex m;
      usched::recursive_mutex r;
      if (recursive) {
        r.lock();
        usched::spawn([&r] { r.unlock(); }).join();
      } else {
        m.lock();
        usched::spawn([&m] { m.unlock(); }).join();
      }
    });
  } else if (std::strcmp(mode, "channel-waiters") == 0) {
    rt.run([] {
      auto* ch = new usched::channel<int>(0);
      usched::latch started(2);
      std::vector<usched::join_handle<void>> hs;
      for (int i = 0; i < 2; ++i) {
        hs.push_back(usched::spawn([ch, &started] {
          started.count_down();
          (void)ch->recv();
        }));
      }
      // Each receiver counted down, then blocked in recv() before this
      // fiber could run again.
      started.wait();
      delete ch;
    });
  }
  std::fprintf(stderr, "death_probe: the misuse of '%s' went unreported\n", mode);
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
    } else if (std::strcmp(mode, "overflow-labelled") == 0) {
      opts.stack_size = 16 * 1024;
      usched::runtime rt(opts);
      usched::spawn_options so;
      so.label = "deep recursion";
      rt.spawn(so, [] { return recurse(0); }).join();
    } else if (std::strcmp(mode, "unclashed") == 0 && argc > 2) {
      unclashed(argv[2], false);
    } else if (std::strcmp(mode, "unclashed-neighbour") == 0) {
      unclashed("141", true);
    } else if (std::strcmp(mode, "plain-thread-fault") == 0) {
      usched::runtime rt(opts);
      rt.run([] {
        std::fprintf(stderr, "death_probe: a plain thread writes through a null pointer\n");
        std::thread(write_nowhere).join();
      });
      std::fprintf(stderr, "death_probe: the plain thread's write did not fault\n");
    } else if (std::strcmp(mode, "fiber-fault") == 0) {
      usched::runtime rt(opts);
      usched::spawn_options so;
      so.label = "null writer";
      rt.spawn(so, [] {
        std::fprintf(stderr, "death_probe: a fiber writes through a null pointer\n");
        write_nowhere();
      }).join();
      std::fprintf(stderr, "death_probe: the fiber's write did not fault\n");
    } else if (std::strcmp(mode, "overflow-many") == 0 && argc > 2 && std::strcmp(argv[2], "past-budget") == 0) {
      overflow_many(opts, past_budget());
    } else if ((std::strcmp(mode, "alloca") == 0 || std::strcmp(mode, "frame") == 0) && argc > 2) {
      big_frame(mode, argv[2]);
    } else if (std::strcmp(mode, "detached") == 0) {
      usched::runtime rt(opts);
      rt.spawn([] { throw std::runtime_error("nobody joins me"); }).detach();
    } else if (std::strcmp(mode, "detached-labelled") == 0) {
      usched::runtime rt(opts);
      usched::spawn_options so;
      so.label = "request handler";
      rt.spawn(so, [] { throw std::runtime_error("nobody joins me"); }).detach();
    } else if (std::strcmp(mode, "task-group-unobserved") == 0) {
      usched::runtime rt(opts);
      rt.run([] {
        usched::task_group g;
        g.spawn([] { throw std::runtime_error("nobody waits for me"); });
        // No g.wait(): the destructor joins, then finds the exception unseen.
      });
    } else if (std::strcmp(mode, "hang") == 0) {
      hang();
    } else if (std::strcmp(mode, "self-destroy") == 0) {
      // A fiber deletes the runtime it runs on; the main thread waits.
      auto* rt = new usched::runtime(opts);
      rt->spawn([rt] { delete rt; }).detach();
      std::this_thread::sleep_for(std::chrono::seconds(30));
      return 1;
    } else if (std::strcmp(mode, "mutex-unlocked") == 0 || std::strcmp(mode, "mutex-other") == 0 ||
               std::strcmp(mode, "recursive-other") == 0 || std::strcmp(mode, "channel-waiters") == 0) {
      misuse(opts, mode);
      return 1;
    } else if (std::strcmp(mode, "timed-mutex-unlocked") == 0) {
      usched::timed_mutex m;
      m.unlock();
      std::fprintf(stderr, "death_probe: the misuse of '%s' went unreported\n", mode);
      return 1;
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
      std::fprintf(stderr, "usage: death_probe overflow|overflow-labelled|overflow-many past-budget|alloca KIB|frame KIB|unclashed KIB|unclashed-neighbour|plain-thread-fault|fiber-fault|detached|detached-labelled|task-group-unobserved|hang|self-destroy|mutex-unlocked|timed-mutex-unlocked|mutex-other|recursive-other|channel-waiters|config|start\n");
      return 2;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "death_probe: %s\n", e.what());
    return 2;
  }
}
