// io_refused_probe: a runtime where the kernel refuses io_uring, as a
// container's seccomp profile does (Docker's default denies
// io_uring_setup). The probe installs such a filter on itself, then:
//   insist   builds a runtime with USCHED_IO=io_uring: one line on stderr
//            saying why it cannot, exit status 2;
//   auto     builds one with the default (auto): one warning that says
//            why, the description's io line, and an echo over loopback on
//            the epoll backend it fell back to; exit status 0.
// tests/CMakeLists.txt checks the output.
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include <usched/io.hpp>
#include <usched/net.hpp>
#include <usched/usched.hpp>

namespace {

bool refuse_io_uring() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
#if defined(__x86_64__)
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
#elif defined(__aarch64__)
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_AARCH64, 1, 0),
#endif
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "insist" && mode != "auto") {
    std::cerr << "io_refused_probe: mode '" << mode << "' is not valid; expected insist or auto\n";
    return 64;
  }
  if (!refuse_io_uring()) {
    std::cerr << "io_refused_probe: could not install the seccomp filter: " << std::strerror(errno) << "\n";
    return 65;
  }
  try {
    usched::options o = usched::options::from_env();
    o.workers = 2;
    if (mode == "insist") o.io = usched::options::io_backend::io_uring;
    usched::runtime rt(o);
    const std::string d = rt.describe();
    const auto io_line = d.find("io: ");
    std::cout << d.substr(io_line, d.find('\n', io_line) - io_line) << "\n";
    const bool ok = rt.run([] {
      auto l = usched::net::tcp_listener::bind(usched::net::endpoint::loopback_v4(0));
      auto server = usched::spawn([&] {
        auto s = l.accept(usched::io::within(std::chrono::seconds(10)));
        char b[4];
        const std::size_t n = s.read_exactly(b, 4, usched::io::within(std::chrono::seconds(10)));
        s.write_all(b, n);
      });
      auto c = usched::net::tcp_stream::connect(l.local_endpoint(), usched::io::within(std::chrono::seconds(10)));
      c.write_all("ping", 4);
      char back[4];
      const bool echoed = c.read_exactly(back, 4, usched::io::within(std::chrono::seconds(10))) == 4 &&
                          std::memcmp(back, "ping", 4) == 0;
      server.join();
      return echoed && std::string(usched::io::backend()) == "epoll";
    });
    std::cout << (ok ? "round trip ok on epoll" : "round trip failed") << std::endl;
    return ok ? 0 : 1;
  } catch (const usched::config_error& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
}
