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
#include <sched.h>
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

namespace {

// What the forked child reports back through the exec-error pipe when it
// cannot become the program: which step failed and its errno.
struct launch_failure {
  int step;  // 0: open the log, 1: sched_setaffinity, 2: exec
  int error;
};

// cpu_list() is "0,1": the CPUs of an error message.
std::string cpu_list(const std::vector<unsigned>& cpus) {
  std::string s;
  for (unsigned c : cpus) s += (s.empty() ? "" : ",") + std::to_string(c);
  return s;
}

}  // namespace

child_process::child_process(const std::string& exe, const std::vector<std::string>& args,
                             const std::string& log, bool search_path, const launch& how) {
  // Everything the child needs is built here, before fork(): between fork
  // and exec the child only makes system calls.
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(exe.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  std::vector<std::string> env_storage;
  for (char** e = environ; *e; ++e) {
    const std::string_view entry(*e);
    const std::string_view name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& [n, v] : how.env) replaced = replaced || n == name;
    if (!replaced) env_storage.emplace_back(entry);
  }
  for (const auto& [n, v] : how.env) env_storage.push_back(n + "=" + v);
  std::vector<char*> envp;
  for (std::string& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);

  cpu_set_t set;
  CPU_ZERO(&set);
  for (unsigned c : how.cpus) CPU_SET(c, &set);

  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    throw std::runtime_error("cannot start " + exe + ": pipe: " + std::strerror(errno));
  }
  pid_ = fork();
  if (pid_ < 0) {
    const int e = errno;
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    throw std::runtime_error("cannot start " + exe + ": fork: " + std::strerror(e));
  }
  if (pid_ == 0) {
    // The child: no signal blocked (as with posix_spawn above), stdin from
    // /dev/null, stdout and stderr into the log, the CPUs, then exec. A
    // failure is written to the pipe, which exec would have closed.
    const auto fail = [&](int step) {
      const launch_failure f{step, errno};
      ssize_t ignored = write(pipe_fds[1], &f, sizeof f);
      (void)ignored;
      _exit(127);
    };
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    const int in = open("/dev/null", O_RDONLY);
    const int out = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0) fail(0);
    if (dup2(in, STDIN_FILENO) < 0 || dup2(out, STDOUT_FILENO) < 0 || dup2(out, STDERR_FILENO) < 0) fail(0);
    if (in > STDERR_FILENO) close(in);
    if (out > STDERR_FILENO) close(out);
    if (!how.cpus.empty() && sched_setaffinity(0, sizeof set, &set) != 0) fail(1);
    if (search_path) execvpe(exe.c_str(), argv.data(), envp.data());
    else execve(exe.c_str(), argv.data(), envp.data());
    fail(2);
  }
  close(pipe_fds[1]);
  launch_failure f{};
  ssize_t got = 0;
  do {
    got = read(pipe_fds[0], &f, sizeof f);
  } while (got < 0 && errno == EINTR);
  close(pipe_fds[0]);
  if (got == static_cast<ssize_t>(sizeof f)) {
    wait();
    const std::string why = std::strerror(f.error);
    if (f.step == 0) throw std::runtime_error("cannot start " + exe + ": cannot open " + log + ": " + why);
    if (f.step == 1) throw std::runtime_error("cannot pin " + exe + " to CPUs " + cpu_list(how.cpus) + ": " + why);
    throw std::runtime_error("cannot start " + exe + ": " + why);
  }
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

std::optional<int> wait_for_child_until(child_process& c, const stop_signals& sig, bool& stopped,
                                        std::chrono::steady_clock::time_point deadline) {
  // As wait_for_child(): SIGCHLD and the stop signals in one sigtimedwait(),
  // here with the deadline as its timeout.
  sigset_t chld, old;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &chld, &old);
  sigset_t wake = sig.signals();
  sigaddset(&wake, SIGCHLD);
  std::optional<int> status;
  while (!(status = c.poll())) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) break;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
    ts.tv_nsec = static_cast<long>(ns % 1'000'000'000);
    const int got = sigtimedwait(&wake, nullptr, &ts);
    if (got > 0 && got != SIGCHLD) stopped = true;
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return status;
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

std::filesystem::path self_dir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("cannot read /proc/self/exe: " + ec.message());
  return exe.parent_path();
}

bool on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (!path) return false;
  std::istringstream in(path);
  for (std::string dir; std::getline(in, dir, ':');) {
    if (dir.empty()) dir = ".";
    if (access((dir + "/" + name).c_str(), X_OK) == 0) return true;
  }
  return false;
}

}  // namespace bench
