// netbench.cpp: usched_netbench, HTTP/1.1 servers under wrk on loopback,
// side by side in one run.
//
//   usched_netbench [-r N] [-d SECONDS] [-c LIST] [--servers LIST] [--policies LIST] ...
//
// The rows: floor_server (C, one epoll loop: the least a server can do per
// request), Go's net/http (go_server), and usched_http_server once per I/O
// backend and policy on one worker, and once on two workers. Each server
// runs pinned to the server CPU and wrk (-t1) to the client CPU, so that a
// row measures the server's work per request on one CPU, not how the two
// share one; the two-worker row gives the server both CPUs and says so.
// Rounds take every server in turn, each round starting one server further,
// so that drift (thermal, the neighbours of a VM) falls on all rows alike.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "common/cli_main.hpp"
#include "common/cpus.hpp"
#include "common/process.hpp"
#include "common/stop_signals.hpp"
#include "netbench_cli.hpp"
#include "report.hpp"
#include "servers.hpp"
#include "wrk.hpp"

namespace {

namespace fs = std::filesystem;
namespace nb = bench::netbench;

constexpr const char* program = "usched_netbench";

// A run's start-up, warm-up and stop beyond its -d, for the time estimate.
constexpr double run_overhead_s = nb::warmup_seconds + 0.5;

bool executable(const fs::path& p) { return access(p.c_str(), X_OK) == 0 && !fs::is_directory(p); }

// check_plot_file() refuses a --plot whose folder does not exist or cannot
// be written, before the first run rather than after the last.
void check_plot_file(const std::string& png) {
  const fs::path parent = fs::path(png).parent_path();
  const fs::path dir = parent.empty() ? fs::path(".") : parent;
  if (!fs::is_directory(dir)) {
    throw nb::usage_error("--plot '" + png + "' is not valid: no folder " + dir.string());
  }
  if (access(dir.c_str(), W_OK) != 0) {
    throw nb::usage_error("--plot '" + png + "' is not valid: cannot write in " + dir.string() + " (" +
                          std::strerror(errno) + ")");
  }
}

// servers_of() is the rows of this run, in table order: those `o` asks for
// that are built; each row left out is one line on stdout saying why.
std::vector<nb::server> servers_of(const nb::options& o, const fs::path& self) {
  std::vector<nb::server> out;
  if (o.runs("floor")) {
    const fs::path exe = self / "net" / "floor_server";
    if (!executable(exe)) {
      throw std::runtime_error("cannot run " + exe.string() + "; build the floor_server target");
    }
    out.push_back({"floor", "floor (C, epoll)", exe.string(), "--port", {o.server_cpu}, {}});
  }
  if (o.runs("go")) {
    const fs::path exe = self / "net" / "go_server";
    if (executable(exe)) {
      out.push_back({"go", "Go net/http", exe.string(), "-port", {o.server_cpu}, {}});
    } else {
      std::cout << "Go rows skipped: " << exe.string()
                << " is not built (go was not found when the build was configured)\n";
    }
  }
  if (!o.runs("usched") && !o.runs("usched-2w")) return out;

  fs::path exe = o.usched_server;
  if (exe.empty()) {
    exe = (self.parent_path() / "examples" / "net" / "usched_http_server").lexically_normal();
    if (!executable(exe)) {
      std::cout << "usched rows skipped: " << exe.string()
                << " is not built (build examples/net, or pass --usched-server PATH)\n";
      return out;
    }
  }
  const auto usched_row = [&](const std::string& kind, const std::string& label, const std::string& policy,
                              const std::string& io, std::vector<unsigned> cpus) {
    const std::string workers = std::to_string(cpus.size());
    out.push_back({kind, label, exe.string(), "--port", std::move(cpus),
                   {{"USCHED_POLICY", policy}, {"USCHED_WORKERS", workers}, {"USCHED_IO", io}}});
  };
  if (o.runs("usched")) {
    for (const std::string& io : o.io) {
      for (const std::string& policy : o.policies) {
        usched_row("usched", "usched " + policy + " " + io, policy, io, {o.server_cpu});
      }
    }
  }
  if (o.runs("usched-2w")) {
    if (o.server_cpu == o.client_cpu) {
      std::cout << "usched 2-worker row skipped: it needs a second CPU, and the server and wrk share CPU "
                << o.server_cpu << "\n";
    } else {
      const std::string& policy = o.policies.front();
      const std::string& io = o.io.front();
      usched_row("usched-2w",
                 "usched " + policy + " " + io + ", 2 workers (CPUs " + std::to_string(o.server_cpu) + "," +
                     std::to_string(o.client_cpu) + ", wrk sharing " + std::to_string(o.client_cpu) + ")",
                 policy, io, {o.server_cpu, o.client_cpu});
    }
  }
  return out;
}

int run(const nb::options& o, const std::vector<unsigned>& cpus) {
  const bench::stop_signals sig;
  if (!bench::on_path("wrk")) {
    throw std::runtime_error("wrk is not on PATH; install it (scripts/bootstrap.sh installs wrk)");
  }
  if (!o.plot.empty()) {
    if (!bench::on_path("gnuplot")) {
      throw nb::usage_error("--plot '" + o.plot + "': gnuplot is not on PATH; install gnuplot, or leave out --plot");
    }
    check_plot_file(o.plot);
  }
  if (!o.usched_server.empty() && !executable(o.usched_server)) {
    throw nb::usage_error("--usched-server '" + o.usched_server +
                          "' is not valid; expected an executable usched_http_server");
  }

  const std::vector<nb::server> servers = servers_of(o, bench::self_dir());
  if (servers.empty()) throw std::runtime_error("no server to run: every row chosen by --servers is skipped");

  const bench::temp_dir tmp("usched-netbench");
  const std::string script = (tmp.path() / "report.lua").string();
  {
    std::ofstream s(script);
    s << nb::report_script;
    if (!s) throw std::runtime_error("cannot write " + script);
  }

  if (cpus.size() == 1) {
    std::cout << "only CPU " << cpus.front() << " is available: the servers and wrk share it\n";
  } else if (o.server_cpu == o.client_cpu) {
    std::cout << "--server-cpu and --client-cpu are both " << o.server_cpu << ": the servers and wrk share it\n";
  }
  const std::size_t total = std::size_t{o.rounds} * o.connections.size() * servers.size();
  const double expected_s = static_cast<double>(total) * (o.seconds + run_overhead_s);
  std::cout << "HTTP/1.1 keep-alive, GET / answered with 13 bytes, on 127.0.0.1: server on CPU "
            << o.server_cpu << ", wrk -t1 -d" << o.seconds << "s --latency on CPU " << o.client_cpu << ", "
            << o.rounds << (o.rounds == 1 ? " round" : " rounds") << " of " << servers.size()
            << (servers.size() == 1 ? " server" : " servers") << ", about " << static_cast<long>(expected_s + 0.5) << " s\n"
            << std::flush;

  std::vector<nb::count_runs> tables;
  for (unsigned c : o.connections) tables.push_back({c, std::vector<std::vector<nb::run_outcome>>(servers.size())});
  nb::port_picker ports;
  bool stopped = false;
  std::size_t done = 0;
  for (unsigned round = 0; round < o.rounds && !stopped; ++round) {
    for (std::size_t ci = 0; ci < o.connections.size() && !stopped; ++ci) {
      nb::run_setup setup;
      setup.connections = o.connections[ci];
      setup.seconds = o.seconds;
      setup.wrk_script = script;
      setup.client_cpu = o.client_cpu;
      setup.dir = tmp.path();
      for (std::size_t k = 0; k < servers.size() && !stopped; ++k) {
        const std::size_t si = (k + round) % servers.size();
        nb::run_outcome r = nb::measure(servers[si], setup, ports.next(), done, sig, stopped);
        if (stopped) break;
        ++done;
        std::cerr << "[" << done << "/" << total << "] round " << round + 1 << ", -c" << setup.connections << ", "
                  << servers[si].label << ": ";
        if (r.result) {
          std::cerr << static_cast<long long>(r.result->requests_per_s() + 0.5) << " req/s, p99 "
                    << r.result->p99_us << " us";
        }
        if (!r.errors.empty()) std::cerr << (r.result ? "; " : "") << "ERRORS: " << r.errors.front();
        std::cerr << "\n";
        tables[ci].runs[si].push_back(std::move(r));
      }
    }
  }

  bool errors = false;
  for (const nb::count_runs& t : tables) errors = nb::print_table(std::cout, servers, t) || errors;
  std::cout << "\n(requests/s: median [min..max] over rounds; vs Go, vs floor: the row's requests/s over the "
               "peer's in the same round, median over rounds; latencies: wrk's, medians over rounds; "
               "(!): a run with errors, listed under its table)\n";
  if (stopped) {
    std::cout << "interrupted: " << done << " of " << total << " runs done\n";
    return 130;
  }
  bool plotted = true;
  if (!o.plot.empty()) {
    const std::string title = "latency under load: wrk -t1 -c" + std::to_string(o.connections.front()) + " -d" +
                              std::to_string(o.seconds) + "s, 127.0.0.1, server on CPU " +
                              std::to_string(o.server_cpu) + ", wrk on CPU " + std::to_string(o.client_cpu);
    plotted = nb::plot(servers, tables.front(), o.plot, title, tmp.path());
  }
  return errors || !plotted ? bench::exit_failure : bench::exit_ok;
}

}  // namespace

int main(int argc, char** argv) {
  return bench::guarded_main(program, [&] {
    const std::vector<unsigned> cpus = bench::affinity_cpu_list();
    const nb::options o =
        nb::parse_options(std::vector<std::string>(argv + std::min(argc, 1), argv + argc), cpus);
    if (o.help) {
      std::cout << nb::usage_text(cpus);
      return bench::exit_ok;
    }
    return run(o, cpus);
  });
}
