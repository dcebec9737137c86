// test_affinity.cpp: the runtime follows the CPU affinity mask it is started
// under (taskset, numactl, CPUAffinity=, a container's cpuset): one worker
// per allowed PU by default, each pinned inside the mask, and a topology, its
// counts and its domains narrowed to the allowed PUs. A mask is a property
// of the process, so each case on the host narrows a forked child's and
// checks there; the child's exit status carries the verdict back. The same
// narrowing is checked exactly on synthetic machines, on any host.
#include "domains.hpp"
#include "topology.hpp"

#include <usched/error.hpp>
#include <usched/usched.hpp>

#include <catch2/catch.hpp>

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

using usched::build_domains;
using usched::config_error;
using usched::domain_tree;
using usched::sd_level;
using usched::worker_unit;
using usched::detail::topology;

using cpu_list = std::vector<int>;

// The CPUs the calling thread may run on, in increasing order.
cpu_list affinity_of_this_thread() {
  cpu_set_t set;
  CPU_ZERO(&set);
  cpu_list out;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) out.push_back(c);
  }
  return out;
}

bool set_affinity_of_this_thread(const cpu_list& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (const int c : cpus) CPU_SET(c, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
}

// The PUs the machine has online: what a narrowed topology counts as the
// machine's.
unsigned online_pus() { return static_cast<unsigned>(sysconf(_SC_NPROCESSORS_ONLN)); }

std::string text_of(const cpu_list& cpus) {
  std::string s = "{";
  for (std::size_t i = 0; i < cpus.size(); ++i) s += (i ? "," : "") + std::to_string(cpus[i]);
  return s + "}";
}

// What a forked child found, reported on stderr (the test's log) and
// counted into its exit status; Catch's assertions stay in the parent.
class child_checks {
 public:
  void expect(bool ok, const std::string& what) {
    if (!ok) {
      std::fprintf(stderr, "in the child: expected %s\n", what.c_str());
      ++failed_;
    }
  }
  int status() const { return failed_ == 0 ? 0 : std::min(failed_, 100); }

 private:
  int failed_ = 0;
};

// in_child() forks; the child narrows its only thread to `cpus`, runs
// body(checks) and exits with checks.status() (101 when it could not set the
// mask, 102 when body threw). Returns the child's exit status, or -1 when it
// did not exit normally.
template <class Body>
int in_child(const cpu_list& cpus, Body body) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid == 0) {
    int code = 0;
    if (!set_affinity_of_this_thread(cpus)) {
      code = 101;
    } else {
      try {
        child_checks checks;
        body(checks);
        code = checks.status();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "in the child: %s\n", e.what());
        code = 102;
      }
    }
    std::fflush(stderr);
    _exit(code);
  }
  REQUIRE(pid > 0);
  int wstatus = 0;
  REQUIRE(waitpid(pid, &wstatus, 0) == pid);
  return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
}

// The affinity of each of rt's workers, read by a fiber pinned to it.
std::vector<cpu_list> worker_affinities(usched::runtime& rt) {
  std::vector<cpu_list> out(rt.workers());
  for (unsigned w = 0; w < rt.workers(); ++w) {
    usched::spawn_options on;
    on.pin = static_cast<int>(w);
    out[w] = rt.spawn(on, [] { return affinity_of_this_thread(); }).join();
  }
  return out;
}

// What describe() adds for a host narrowed to `cpu_list_text` ("1", "0-1")
// on this machine; nothing when the mask allows every PU.
std::string narrowed_clause(unsigned allowed, const std::string& cpu_list_text) {
  if (allowed >= online_pus()) return "";
  return "; the affinity mask allows " + std::to_string(allowed) + " of the machine's " +
         std::to_string(online_pus()) + (online_pus() == 1 ? " PU" : " PUs") + " (cpu list " +
         cpu_list_text + ")";
}

// The siblings of `cpu` as the kernel lists them ("0,32", "0-1"); empty if
// the file cannot be read.
cpu_list thread_siblings(int cpu) {
  std::ifstream in("/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/thread_siblings_list");
  std::string text;
  cpu_list out;
  if (!std::getline(in, text)) return out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto dash = item.find('-');
    const int first = std::stoi(item.substr(0, dash));
    const int last = dash == std::string::npos ? first : std::stoi(item.substr(dash + 1));
    for (int c = first; c <= last; ++c) out.push_back(c);
  }
  return out;
}

}  // namespace

TEST_CASE("affinity: a one-CPU mask gives one worker, pinned to that CPU", "[affinity]") {
  const cpu_list allowed = affinity_of_this_thread();
  REQUIRE_FALSE(allowed.empty());
  // The last allowed CPU: worker 0 was pinned to CPU 0 whatever the mask.
  const int cpu = allowed.back();

  const int status = in_child({cpu}, [&](child_checks& c) {
    usched::runtime rt{usched::options{}};
    c.expect(rt.workers() == 1, "1 worker, got " + std::to_string(rt.workers()));
    const std::vector<cpu_list> seen = worker_affinities(rt);
    c.expect(seen.size() == 1 && seen[0] == cpu_list{cpu},
             "worker 0 pinned to exactly " + text_of({cpu}) + ", got " +
                 (seen.empty() ? std::string("no worker") : text_of(seen[0])));
    const std::string want = "policy 'cfs', 1 worker (pinned to PUs)";
    c.expect(rt.describe().rfind(want, 0) == 0, "describe() to begin '" + want + "'");
    const std::string line = "topology: host: 1 package, 1 NUMA node, 1 LLC, 1 core, 1 PU" +
                             narrowed_clause(1, std::to_string(cpu)) + "\n";
    c.expect(rt.describe().find(line) != std::string::npos,
             "describe() to hold '" + line + "', got:\n" + rt.describe());
  });
  CHECK(status == 0);
}

TEST_CASE("affinity: the host topology under a one-CPU mask has one of everything", "[affinity]") {
  const int cpu = affinity_of_this_thread().back();
  const int status = in_child({cpu}, [&](child_checks& c) {
    const topology topo = topology::load("");
    c.expect(topo.nr_pus() == 1, "1 PU, got " + std::to_string(topo.nr_pus()));
    c.expect(topo.nr_cores() == 1, "1 core, got " + std::to_string(topo.nr_cores()));
    c.expect(topo.nr_llcs() == 1, "1 LLC, got " + std::to_string(topo.nr_llcs()));
    c.expect(topo.nr_packages() == 1, "1 package, got " + std::to_string(topo.nr_packages()));
    c.expect(topo.nr_numa_nodes() == 1, "1 NUMA node, got " + std::to_string(topo.nr_numa_nodes()));
    c.expect(topo.nr_machine_pus() == online_pus(),
             "the machine's " + std::to_string(online_pus()) + " PUs, got " +
                 std::to_string(topo.nr_machine_pus()));
    const auto places = topo.place_workers(0, worker_unit::pu);
    c.expect(places.size() == 1 && places[0].os_pu == cpu && places[0].pu == 0,
             "one place, on PU " + std::to_string(cpu));
    // One worker has no domain to balance in.
    const domain_tree tree = build_domains(places);
    c.expect(tree.per_cpu.size() == 1 && tree.per_cpu[0].empty(), "no domain for one worker");
  });
  CHECK(status == 0);
}

TEST_CASE("affinity: worker_unit::core pins a worker to the allowed PUs of its core only", "[affinity]") {
  const int cpu = affinity_of_this_thread().back();
  const int status = in_child({cpu}, [&](child_checks& c) {
    usched::options o;
    o.unit = worker_unit::core;
    usched::runtime rt{o};
    c.expect(rt.workers() == 1, "1 worker, got " + std::to_string(rt.workers()));
    const std::vector<cpu_list> seen = worker_affinities(rt);
    // On an SMT machine the core has a sibling; it is outside the mask, and
    // the worker must not be bound to it.
    c.expect(seen.size() == 1 && seen[0] == cpu_list{cpu},
             "worker 0 bound to exactly " + text_of({cpu}) + ", got " +
                 (seen.empty() ? std::string("no worker") : text_of(seen[0])));
    const std::string want = "policy 'cfs', 1 worker (pinned to cores)";
    c.expect(rt.describe().rfind(want, 0) == 0, "describe() to begin '" + want + "'");
  });
  CHECK(status == 0);
}

TEST_CASE("affinity: more workers than the mask allows share its PUs, unpinned", "[affinity]") {
  const int cpu = affinity_of_this_thread().back();
  const int status = in_child({cpu}, [&](child_checks& c) {
    usched::options o;
    o.workers = 3;
    o.log_level = "off";  // the oversubscription warning is expected here
    usched::runtime rt{o};
    c.expect(rt.workers() == 3, "3 workers, got " + std::to_string(rt.workers()));
    // Unpinned, each keeps the mask it was started under.
    const std::vector<cpu_list> seen = worker_affinities(rt);
    for (std::size_t w = 0; w < seen.size(); ++w) {
      c.expect(seen[w] == cpu_list{cpu}, "worker " + std::to_string(w) + " on exactly " +
                                             text_of({cpu}) + ", got " + text_of(seen[w]));
    }
    const std::string want = "policy 'cfs', 3 workers (unpinned)";
    c.expect(rt.describe().rfind(want, 0) == 0, "describe() to begin '" + want + "'");

    // Round-robin over the allowed PUs: all three take the one there is.
    const auto places = topology::load("").place_workers(3, worker_unit::pu);
    c.expect(places.size() == 3, "3 places");
    for (const auto& p : places) {
      c.expect(p.pu == 0 && p.os_pu == cpu, "worker " + std::to_string(p.worker) + " placed on PU " +
                                                std::to_string(cpu) + ", got " + std::to_string(p.os_pu));
    }
  });
  CHECK(status == 0);
}

TEST_CASE("affinity: a two-CPU mask gives two workers, one on each", "[affinity]") {
  const cpu_list allowed = affinity_of_this_thread();
  if (allowed.size() < 2) {
    WARN("skipped: this process may run on " << allowed.size() << " CPU; the case needs 2");
    return;
  }
  const cpu_list two{allowed[allowed.size() - 2], allowed.back()};
  const int status = in_child(two, [&](child_checks& c) {
    usched::runtime rt{usched::options{}};
    c.expect(rt.workers() == 2, "2 workers, got " + std::to_string(rt.workers()));
    std::vector<cpu_list> seen = worker_affinities(rt);
    std::sort(seen.begin(), seen.end());
    c.expect(seen == std::vector<cpu_list>{{two[0]}, {two[1]}},
             "one worker pinned to each of " + text_of(two));
    const std::string list = two[1] == two[0] + 1 ? std::to_string(two[0]) + "-" + std::to_string(two[1])
                                                  : std::to_string(two[0]) + "," + std::to_string(two[1]);
    c.expect(rt.describe().find(" 2 PUs" + narrowed_clause(2, list) + "\n") != std::string::npos,
             "describe() to count 2 PUs" + narrowed_clause(2, list) + ", got:\n" + rt.describe());
  });
  CHECK(status == 0);
}

TEST_CASE("affinity: a mask of one core's two PUs gives one SMT domain", "[affinity]") {
  // Any core of the allowed set with two allowed PUs.
  const cpu_list allowed = affinity_of_this_thread();
  cpu_list pair;
  for (const int cpu : allowed) {
    cpu_list sib = thread_siblings(cpu);
    sib.erase(std::remove_if(sib.begin(), sib.end(),
                             [&](int s) { return !std::binary_search(allowed.begin(), allowed.end(), s); }),
              sib.end());
    if (sib.size() >= 2) {
      pair = {sib[0], sib[1]};
      break;
    }
  }
  if (pair.empty()) {
    WARN("skipped: no core of this host has two PUs this process may run on");
    return;
  }
  const int status = in_child(pair, [&](child_checks& c) {
    const topology topo = topology::load("");
    c.expect(topo.nr_pus() == 2 && topo.nr_cores() == 1, "2 PUs of 1 core");
    const domain_tree tree = build_domains(topo.place_workers(0, worker_unit::pu));
    c.expect(tree.per_cpu.size() == 2, "2 workers");
    for (const auto& chain : tree.per_cpu) {
      c.expect(chain.size() == 1 && chain[0].level == sd_level::smt &&
                   chain[0].span == cpu_list{0, 1},
               "one SMT domain over both workers");
    }
  });
  CHECK(status == 0);
}

TEST_CASE("affinity: a synthetic topology is another machine, which the mask does not narrow", "[affinity]") {
  const int cpu = affinity_of_this_thread().back();
  const int status = in_child({cpu}, [&](child_checks& c) {
    usched::options o;
    o.topology = "pack:1 core:4 pu:1";
    o.log_level = "off";
    usched::runtime rt{o};
    c.expect(rt.workers() == 4, "4 workers, got " + std::to_string(rt.workers()));
    const std::string line = "topology: synthetic 'pack:1 core:4 pu:1': 1 package, 1 NUMA node, "
                             "1 LLC, 4 cores, 4 PUs\n";
    c.expect(rt.describe().find(line) != std::string::npos,
             "describe() to hold '" + line + "', got:\n" + rt.describe());
  });
  CHECK(status == 0);
}

TEST_CASE("affinity: narrowing a synthetic SMT machine to one core leaves one SMT domain", "[affinity]") {
  topology topo = topology::load("pack:2 l3:2 core:4 pu:2");
  topo.restrict_to_mask({0, 1});
  CHECK(topo.nr_pus() == 2);
  CHECK(topo.nr_cores() == 1);
  CHECK(topo.nr_llcs() == 1);
  CHECK(topo.nr_packages() == 1);
  CHECK(topo.nr_machine_pus() == 32);
  CHECK(topo.describe() == "synthetic 'pack:2 l3:2 core:4 pu:2': 1 package, 1 NUMA node, 1 LLC, "
                           "1 core, 2 PUs; the affinity mask allows 2 of the machine's 32 PUs "
                           "(cpu list 0-1)");
  const domain_tree tree = build_domains(topo.place_workers(0, worker_unit::pu));
  REQUIRE(tree.per_cpu.size() == 2);
  for (const auto& chain : tree.per_cpu) {
    REQUIRE(chain.size() == 1);
    CHECK(chain[0].level == sd_level::smt);
    CHECK(chain[0].span == cpu_list{0, 1});
    CHECK(chain[0].groups.size() == 2);
  }
}

TEST_CASE("affinity: a narrowed machine keeps the levels its allowed PUs span", "[affinity]") {
  // PUs 1 and 2 are in different cores of the first L3; PU 9 is in the
  // second L3 of the same package.
  topology topo = topology::load("pack:2 l3:2 core:4 pu:2");
  topo.restrict_to_mask({1, 2, 9, 4096});  // 4096 is no PU of it: ignored
  CHECK(topo.nr_pus() == 3);
  CHECK(topo.nr_cores() == 3);
  CHECK(topo.nr_llcs() == 2);
  CHECK(topo.nr_packages() == 1);
  CHECK_THAT(topo.describe(), Catch::EndsWith("(cpu list 1-2,9)"));

  const auto places = topo.place_workers(0, worker_unit::pu);
  REQUIRE(places.size() == 3);
  CHECK(places[0].os_pu == 1);
  CHECK(places[1].os_pu == 2);
  CHECK(places[2].os_pu == 9);
  const domain_tree tree = build_domains(places);
  const auto& chain = tree.per_cpu[0];
  REQUIRE(chain.size() == 2);
  CHECK(chain[0].level == sd_level::llc);
  CHECK(chain[0].span == cpu_list{0, 1});
  CHECK(chain[1].level == sd_level::pkg);
  CHECK(chain[1].span == cpu_list{0, 1, 2});
  CHECK(tree.per_cpu[2].size() == 1);
  CHECK(tree.per_cpu[2][0].level == sd_level::pkg);
}

TEST_CASE("affinity: a core counts when any of its PUs is allowed, bound to those only", "[affinity]") {
  topology topo = topology::load("pack:1 core:4 pu:2");
  topo.restrict_to_mask({0, 1, 3});
  CHECK(topo.nr_cores() == 2);
  const auto places = topo.place_workers(0, worker_unit::core);
  REQUIRE(places.size() == 2);
  CHECK(places[0].os_pu == 0);
  CHECK(places[0].nr_pus == 2);
  CHECK(places[1].os_pu == 3);
  CHECK(places[1].nr_pus == 1);
}

TEST_CASE("affinity: narrowing to one package leaves its NUMA node only", "[affinity]") {
  topology topo = topology::load("pack:2 [numa] core:4 pu:1");
  topo.restrict_to_mask({4, 5, 6, 7});
  CHECK(topo.nr_packages() == 1);
  CHECK(topo.nr_numa_nodes() == 1);
  const auto places = topo.place_workers(0, worker_unit::pu);
  REQUIRE(places.size() == 4);
  CHECK(places[0].os_pu == 4);
  CHECK(places[0].numa_node == 0);
  const domain_tree tree = build_domains(places);
  REQUIRE(tree.per_cpu[0].size() == 1);
  CHECK(tree.per_cpu[0][0].level == sd_level::llc);
}

TEST_CASE("affinity: a mask with none of the machine's PUs is refused", "[affinity]") {
  topology topo = topology::load("pack:1 core:2 pu:1");
  CHECK_THROWS_MATCHES(topo.restrict_to_mask({5}), config_error,
                       Catch::Message("USCHED_TOPOLOGY='pack:1 core:2 pu:1': the affinity mask "
                                      "allows none of its PUs"));
  CHECK(topo.nr_pus() == 2);
}
