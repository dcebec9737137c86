// process.cpp: the drivers' child processes (process.hpp).
#include "common/process.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace bench {

child_process::child_process(const std::string& exe, const std::vector<std::string>& args,
                             const std::string& log, bool search_path) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(exe.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  const int rc = search_path ? posix_spawnp(&pid_, exe.c_str(), &fa, &attr, argv.data(), environ)
                             : posix_spawn(&pid_, exe.c_str(), &fa, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error("cannot start " + exe + ": " + std::strerror(rc));
}

child_process::~child_process() {
  if (!status_) {
    kill(pid_, SIGKILL);
    int st = 0;
    while (waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
  }
}

std::optional<int> child_process::poll() {
  if (status_) return status_;
  int st = 0;
  if (waitpid(pid_, &st, WNOHANG) == pid_) status_ = st;
  return status_;
}

int child_process::wait() {
  while (!status_) {
    int st = 0;
    const pid_t r = waitpid(pid_, &st, 0);
    if (r == pid_) {
      status_ = st;
    } else if (r < 0 && errno != EINTR) {
      throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
    }
  }
  return *status_;
}

void child_process::signal(int sig) const {
  if (!status_) kill(pid_, sig);
}

int wait_for_child(child_process& c, const stop_signals& sig, int forward_as, bool& stopped,
                   std::chrono::nanoseconds tick_every, const std::function<void()>& tick) {
  // SIGCHLD joins the stop signals in one sigtimedwait(), so that the wait
  // ends the moment the child exits, without polling. It is blocked for the
  // wait and poll() is asked before each sleep: a child that exits between
  // the two leaves its SIGCHLD pending, and the sleep returns at once. (A
  // SIGCHLD still pending afterwards is discarded when it is unblocked: its
  // default action is to be ignored.)
  sigset_t chld, old;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &chld, &old);
  sigset_t wake = sig.signals();
  sigaddset(&wake, SIGCHLD);

  using clock = std::chrono::steady_clock;
  const bool ticking = tick_every > std::chrono::nanoseconds::zero();
  auto next_tick = clock::now();
  std::optional<int> status;
  while (!(status = c.poll())) {
    timespec ts{};
    const timespec* timeout = nullptr;
    if (ticking) {
      const auto now = clock::now();
      if (now >= next_tick) {
        if (tick) tick();
        next_tick = now + tick_every;
      }
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(next_tick - now).count();
      ts.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
      ts.tv_nsec = static_cast<long>(ns % 1'000'000'000);
      timeout = &ts;
    }
    const int got = sigtimedwait(&wake, nullptr, timeout);
    // SIGCHLD, a timeout (EAGAIN) or EINTR: poll() again.
    if (got > 0 && got != SIGCHLD && !stopped) {
      stopped = true;
      c.signal(forward_as);
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return *status;
}

std::string describe_status(int st, std::string_view exited) {
  if (WIFEXITED(st)) return std::string(exited) + " " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return std::string("killed by ") + strsignal(WTERMSIG(st));
  return "ended oddly";
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

temp_dir::temp_dir(std::string_view prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/" + std::string(prefix) + "-XXXXXX";
  if (!mkdtemp(templ.data())) {
    throw std::runtime_error("cannot create a temporary folder " + templ + ": " + std::strerror(errno));
  }
  path_ = templ;
}

temp_dir::~temp_dir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace bench
