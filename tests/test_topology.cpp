// test_topology.cpp: topology loading (host, synthetic, XML), worker
// placement and the scheduling-domain hierarchy built from it, checked
// structure by structure on synthetic machines.
#include "domains.hpp"
#include "topology.hpp"

#include <usched/options.hpp>

#include <usched/error.hpp>

#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using usched::build_domains;
using usched::capacity_scale;
using usched::config_error;
using usched::domain_tree;
using usched::sched_domain;
using usched::sd_level;
using usched::detail::topology;
using usched::detail::worker_place;
using usched::worker_unit;

using cpu_list = std::vector<int>;
using group_list = std::vector<cpu_list>;

// Two packages, each with two L3s of four 2-way SMT cores: 32 PUs.
const char* const smt_machine = "pack:2 l3:2 core:4 pu:2";
// Two packages, one NUMA node each, four single-PU cores per package, no caches.
const char* const numa_machine = "pack:2 [numa] core:4 pu:1";

constexpr unsigned smt_flags = usched::SD_SHARE_CPUCAPACITY | usched::SD_SHARE_PKG_RESOURCES;
constexpr unsigned llc_flags = usched::SD_SHARE_PKG_RESOURCES;

cpu_list range(int first, int last) {
  cpu_list out;
  for (int i = first; i <= last; ++i) {
    out.push_back(i);
  }
  return out;
}

group_list groups_of(const sched_domain& sd) {
  group_list out;
  for (const auto& g : sd.groups) {
    out.push_back(g.cpus);
  }
  return out;
}

// Checks the invariants every domain must hold, whatever the topology: the
// span contains the owner, groups are disjoint, ordered, cover the span, the
// local group holds the owner, capacities add up, intervals follow the span.
void check_domain_invariants(const domain_tree& tree, std::size_t owner, const sched_domain& sd) {
  REQUIRE(sd.groups.size() >= 2);
  cpu_list covered;
  for (const auto& g : sd.groups) {
    REQUIRE_FALSE(g.cpus.empty());
    if (!covered.empty()) {
      CHECK(g.cpus.front() > covered.back());
    }
    unsigned long capacity = 0;
    for (const int c : g.cpus) {
      capacity += tree.cpu_capacity[static_cast<std::size_t>(c)];
    }
    CHECK(g.capacity == capacity);
    covered.insert(covered.end(), g.cpus.begin(), g.cpus.end());
  }
  std::sort(covered.begin(), covered.end());
  CHECK(covered == sd.span);
  const auto& local = sd.groups.at(sd.local_group).cpus;
  CHECK(std::find(local.begin(), local.end(), static_cast<int>(owner)) != local.end());
  CHECK(sd.min_interval_ms == sd.span.size());
  CHECK(sd.max_interval_ms == 2 * sd.span.size());
}

void check_tree_invariants(const domain_tree& tree) {
  for (std::size_t w = 0; w < tree.nr_cpus(); ++w) {
    const auto& chain = tree.per_cpu[w];
    for (std::size_t i = 0; i < chain.size(); ++i) {
      check_domain_invariants(tree, w, chain[i]);
      if (i > 0) {
        // Each level strictly widens the one below, whose span is its local group.
        CHECK(chain[i].level > chain[i - 1].level);
        CHECK(chain[i].span.size() > chain[i - 1].span.size());
        CHECK(chain[i].groups[chain[i].local_group].cpus == chain[i - 1].span);
      }
    }
  }
}

domain_tree domains_for(const topology& topo, unsigned count, worker_unit unit) {
  const domain_tree tree = build_domains(topo.place_workers(count, unit));
  check_tree_invariants(tree);
  return tree;
}

// A file in the temp directory, removed when the test ends.
class temp_file {
 public:
  temp_file(const std::string& name, const std::string& contents)
      : path_(std::filesystem::temp_directory_path() /
              ("usched-test-" + std::to_string(getpid()) + "-" + name)) {
    std::ofstream(path_) << contents;
  }
  temp_file(const temp_file&) = delete;
  temp_file& operator=(const temp_file&) = delete;
  ~temp_file() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// "pack:1 core:2 pu:1" as hwloc 2.9 exports it, trimmed to the objects.
const char* const two_core_xml = R"(<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x00000003" complete_cpuset="0x00000003" allowed_cpuset="0x00000003" nodeset="0x00000001" complete_nodeset="0x00000001" allowed_nodeset="0x00000001" gp_index="1">
    <object type="Package" os_index="0" cpuset="0x00000003" complete_cpuset="0x00000003" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="6">
      <object type="NUMANode" os_index="0" cpuset="0x00000003" complete_cpuset="0x00000003" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="7" local_memory="1073741824"/>
      <object type="Core" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="3">
        <object type="PU" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="2"/>
      </object>
      <object type="Core" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="5">
        <object type="PU" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="4"/>
      </object>
    </object>
  </object>
</topology>
)";

}  // namespace

TEST_CASE("topology: a synthetic SMT machine is counted and placed", "[topology]") {
  const topology topo = topology::load(smt_machine);
  CHECK_FALSE(topo.is_host());
  CHECK(topo.nr_packages() == 2);
  CHECK(topo.nr_llcs() == 4);
  CHECK(topo.nr_cores() == 16);
  CHECK(topo.nr_pus() == 32);
  // hwloc gives a synthetic description without [numa] one machine-wide node.
  CHECK(topo.nr_numa_nodes() == 1);

  SECTION("one worker per PU, count 0 meaning all") {
    const auto places = topo.place_workers(0, worker_unit::pu);
    REQUIRE(places.size() == 32);
    for (int w = 0; w < 32; ++w) {
      const worker_place& p = places[static_cast<std::size_t>(w)];
      CHECK(p.worker == w);
      CHECK(p.pu == w);
      CHECK(p.os_pu == w);
      CHECK(p.core == w / 2);
      CHECK(p.llc == w / 8);
      CHECK(p.package == w / 16);
      CHECK(p.numa_node == 0);
      CHECK(p.nr_pus == 1);
    }
  }
  SECTION("one worker per core") {
    const auto places = topo.place_workers(0, worker_unit::core);
    REQUIRE(places.size() == 16);
    for (int w = 0; w < 16; ++w) {
      const worker_place& p = places[static_cast<std::size_t>(w)];
      CHECK(p.worker == w);
      CHECK(p.core == w);
      CHECK(p.pu == 2 * w);
      CHECK(p.os_pu == 2 * w);
      CHECK(p.llc == w / 4);
      CHECK(p.package == w / 8);
      CHECK(p.nr_pus == 2);
    }
  }
  SECTION("an explicit count takes the first units") {
    CHECK(topo.place_workers(5, worker_unit::pu).size() == 5);
    CHECK(topo.place_workers(16, worker_unit::core).size() == 16);
  }
}

TEST_CASE("domains: one worker per PU on an SMT machine", "[topology]") {
  const topology topo = topology::load(smt_machine);
  const domain_tree tree = domains_for(topo, 32, worker_unit::pu);
  REQUIRE(tree.nr_cpus() == 32);
  CHECK(tree.cpu_capacity == std::vector<unsigned long>(32, capacity_scale));

  SECTION("worker 0") {
    const auto& chain = tree.per_cpu[0];
    REQUIRE(chain.size() == 4);

    CHECK(chain[0].level == sd_level::smt);
    CHECK(chain[0].span == cpu_list{0, 1});
    CHECK(groups_of(chain[0]) == group_list{{0}, {1}});
    CHECK(chain[0].local_group == 0);
    CHECK(chain[0].flags == smt_flags);
    CHECK(chain[0].imbalance_pct == 110);
    CHECK(chain[0].groups[0].capacity == capacity_scale);

    CHECK(chain[1].level == sd_level::llc);
    CHECK(chain[1].span == range(0, 7));
    CHECK(groups_of(chain[1]) == group_list{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
    CHECK(chain[1].local_group == 0);
    CHECK(chain[1].flags == llc_flags);
    CHECK(chain[1].imbalance_pct == 117);
    CHECK(chain[1].groups[3].capacity == 2 * capacity_scale);

    CHECK(chain[2].level == sd_level::pkg);
    CHECK(chain[2].span == range(0, 15));
    CHECK(groups_of(chain[2]) == group_list{range(0, 7), range(8, 15)});
    CHECK(chain[2].local_group == 0);
    CHECK(chain[2].flags == 0);
    CHECK(chain[2].imbalance_pct == 117);
    CHECK(chain[2].min_interval_ms == 16);
    CHECK(chain[2].max_interval_ms == 32);

    // One NUMA node (see the counts above): the machine level is SYS.
    CHECK(chain[3].level == sd_level::sys);
    CHECK(chain[3].span == range(0, 31));
    CHECK(groups_of(chain[3]) == group_list{range(0, 15), range(16, 31)});
    CHECK(chain[3].local_group == 0);
    CHECK(chain[3].flags == 0);
    CHECK_FALSE(chain[3].has_flag(usched::SD_NUMA));
    CHECK(chain[3].imbalance_pct == 117);
    CHECK(chain[3].groups[1].capacity == 16 * capacity_scale);
  }
  SECTION("worker 13") {
    const auto& chain = tree.per_cpu[13];
    REQUIRE(chain.size() == 4);
    CHECK(chain[0].span == cpu_list{12, 13});
    CHECK(chain[0].local_group == 1);
    CHECK(chain[1].span == range(8, 15));
    CHECK(groups_of(chain[1]) == group_list{{8, 9}, {10, 11}, {12, 13}, {14, 15}});
    CHECK(chain[1].local_group == 2);
    CHECK(chain[2].span == range(0, 15));
    CHECK(chain[2].local_group == 1);
    CHECK(chain[3].level == sd_level::sys);
    CHECK(chain[3].local_group == 0);
  }
  SECTION("worker 31 sees the far halves") {
    const auto& chain = tree.per_cpu[31];
    REQUIRE(chain.size() == 4);
    CHECK(chain[0].local_group == 1);
    CHECK(chain[1].local_group == 3);
    CHECK(chain[2].span == range(16, 31));
    CHECK(chain[2].local_group == 1);
    CHECK(chain[3].local_group == 1);
  }
}

TEST_CASE("domains: one worker per core has no SMT level", "[topology]") {
  const topology topo = topology::load(smt_machine);
  const domain_tree tree = domains_for(topo, 0, worker_unit::core);
  REQUIRE(tree.nr_cpus() == 16);

  const auto& chain = tree.per_cpu[5];
  REQUIRE(chain.size() == 3);
  CHECK(chain[0].level == sd_level::llc);
  CHECK(chain[0].span == range(4, 7));
  CHECK(groups_of(chain[0]) == group_list{{4}, {5}, {6}, {7}});
  CHECK(chain[0].local_group == 1);
  CHECK(chain[0].flags == llc_flags);
  CHECK(chain[0].imbalance_pct == 117);

  CHECK(chain[1].level == sd_level::pkg);
  CHECK(groups_of(chain[1]) == group_list{range(0, 3), range(4, 7)});
  CHECK(chain[1].local_group == 1);

  CHECK(chain[2].level == sd_level::sys);
  CHECK(groups_of(chain[2]) == group_list{range(0, 7), range(8, 15)});
  CHECK(chain[2].local_group == 0);
}

TEST_CASE("domains: two NUMA nodes make the machine level NUMA", "[topology]") {
  const topology topo = topology::load(numa_machine);
  CHECK(topo.nr_packages() == 2);
  CHECK(topo.nr_numa_nodes() == 2);
  CHECK(topo.nr_cores() == 8);
  CHECK(topo.nr_pus() == 8);
  // No caches in the description: each package stands in as one LLC.
  CHECK(topo.nr_llcs() == 2);

  const auto places = topo.place_workers(0, worker_unit::pu);
  CHECK(places[3].numa_node == 0);
  CHECK(places[4].numa_node == 1);

  const domain_tree tree = build_domains(places);
  check_tree_invariants(tree);
  const auto& chain = tree.per_cpu[6];
  // The NODE and PKG levels (as wide as the LLC) are degenerate.
  REQUIRE(chain.size() == 2);
  CHECK(chain[0].level == sd_level::llc);
  CHECK(chain[0].span == range(4, 7));
  CHECK(groups_of(chain[0]) == group_list{{4}, {5}, {6}, {7}});
  CHECK(chain[0].local_group == 2);
  CHECK(chain[0].flags == llc_flags);
  CHECK(chain[0].imbalance_pct == 117);

  CHECK(chain[1].level == sd_level::numa);
  CHECK(chain[1].span == range(0, 7));
  CHECK(groups_of(chain[1]) == group_list{range(0, 3), range(4, 7)});
  CHECK(chain[1].local_group == 1);
  CHECK(chain[1].flags == usched::SD_NUMA);
  CHECK(chain[1].imbalance_pct == 117);
}

TEST_CASE("domains: a description with private caches only has no LLC level", "[topology]") {
  // An L1 per core and nothing shared: every core is its own LLC, so the
  // package level is the first that spans two, and it shares no cache.
  const topology topo = topology::load("pack:1 core:4 l1:1 pu:1");
  CHECK(topo.nr_llcs() == 4);
  const domain_tree tree = domains_for(topo, 4, worker_unit::pu);
  const auto& chain = tree.per_cpu[1];
  REQUIRE(chain.size() == 1);
  CHECK(chain[0].level == sd_level::pkg);
  CHECK(chain[0].flags == 0);
  CHECK_FALSE(tree.share_llc(0, 1));
}

TEST_CASE("domains: a NUMA node inside a package gets a NODE level", "[topology]") {
  // Sub-NUMA clustering: one package split into two nodes of two L3s each
  // ("[numa]" attaches a node to every object of the level before it).
  const topology topo = topology::load("pack:1 group:2 [numa] l3:2 core:2 pu:1");
  CHECK(topo.nr_numa_nodes() == 2);
  const auto places = topo.place_workers(0, worker_unit::pu);
  REQUIRE(places.size() == 8);
  const domain_tree tree = build_domains(places);
  check_tree_invariants(tree);

  const auto& chain = tree.per_cpu[0];
  REQUIRE(chain.size() == 3);
  CHECK(chain[0].level == sd_level::llc);
  CHECK(chain[0].span == range(0, 1));
  CHECK(chain[1].level == sd_level::node);
  CHECK(chain[1].span == range(0, 3));
  CHECK(groups_of(chain[1]) == group_list{{0, 1}, {2, 3}});
  CHECK(chain[1].flags == 0);
  CHECK(chain[2].level == sd_level::pkg);
  CHECK(chain[2].span == range(0, 7));
  CHECK(chain[2].flags == usched::SD_NUMA);
  CHECK(chain[2].imbalance_pct == 117);
}

TEST_CASE("domains: fewer workers than PUs drop the degenerate levels", "[topology]") {
  SECTION("no caches: only the package's LLC remains") {
    const topology topo = topology::load("pack:1 core:4 pu:1");
    const domain_tree tree = domains_for(topo, 3, worker_unit::pu);
    REQUIRE(tree.nr_cpus() == 3);
    for (std::size_t w = 0; w < 3; ++w) {
      const auto& chain = tree.per_cpu[w];
      REQUIRE(chain.size() == 1);
      CHECK(chain[0].level == sd_level::llc);
      CHECK(chain[0].span == range(0, 2));
      CHECK(groups_of(chain[0]) == group_list{{0}, {1}, {2}});
      CHECK(chain[0].local_group == w);
    }
  }
  SECTION("a shared L3: only the LLC remains") {
    const topology topo = topology::load("pack:1 l3:1 core:4 pu:1");
    const domain_tree tree = domains_for(topo, 3, worker_unit::pu);
    const auto& chain = tree.per_cpu[1];
    REQUIRE(chain.size() == 1);
    CHECK(chain[0].level == sd_level::llc);
    CHECK(chain[0].flags == llc_flags);
    CHECK(chain[0].local_group == 1);
  }
  SECTION("a half-filled core: every worker sees the same groups") {
    const topology topo = topology::load("pack:1 core:2 pu:2");
    const domain_tree tree = domains_for(topo, 3, worker_unit::pu);
    const auto& first = tree.per_cpu[0];
    REQUIRE(first.size() == 2);
    CHECK(first[0].level == sd_level::smt);
    CHECK(first[0].span == cpu_list{0, 1});
    CHECK(first[1].level == sd_level::llc);
    CHECK(groups_of(first[1]) == group_list{{0, 1}, {2}});
    CHECK(first[1].local_group == 0);

    const auto& lone = tree.per_cpu[2];
    REQUIRE(lone.size() == 1);
    CHECK(lone[0].level == sd_level::llc);
    CHECK(groups_of(lone[0]) == group_list{{0, 1}, {2}});
    CHECK(lone[0].local_group == 1);
  }
}

TEST_CASE("domains: a single worker has an empty chain", "[topology]") {
  const topology topo = topology::load(smt_machine);
  const domain_tree tree = domains_for(topo, 1, worker_unit::pu);
  REQUIRE(tree.nr_cpus() == 1);
  CHECK(tree.per_cpu[0].empty());
  CHECK(tree.describe().find("no domains") != std::string::npos);
}

TEST_CASE("domains: unknown indices share nothing", "[topology]") {
  // Hand-built places, as a topology without cores or caches would give.
  std::vector<worker_place> places(4);
  for (int w = 0; w < 4; ++w) {
    worker_place& p = places[static_cast<std::size_t>(w)];
    p.worker = w;
    p.pu = w;
    p.package = w / 2;
  }
  const domain_tree tree = build_domains(places);
  check_tree_invariants(tree);
  const auto& chain = tree.per_cpu[3];
  REQUIRE(chain.size() == 2);
  CHECK(chain[0].level == sd_level::pkg);
  CHECK(chain[0].span == cpu_list{2, 3});
  CHECK(chain[1].level == sd_level::sys);
  CHECK(groups_of(chain[1]) == group_list{{0, 1}, {2, 3}});
}

TEST_CASE("topology: bad input is a one-line config_error", "[topology]") {
  SECTION("a malformed synthetic description") {
    try {
      (void)topology::load("pack:x core:2");
      FAIL("load accepted a malformed description");
    } catch (const config_error& e) {
      const std::string what = e.what();
      CHECK(what.find("'pack:x core:2'") != std::string::npos);
      CHECK(what.find("not a valid hwloc synthetic description") != std::string::npos);
      CHECK(what.find('\n') == std::string::npos);
    }
  }
  // The messages are usched's own: hwloc's wording (and whether it reads the
  // file when it is given or when it loads) depends on which of its optional
  // backends are installed.
  const auto message = [](const std::string& source) {
    try {
      (void)topology::load(source);
    } catch (const config_error& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  SECTION("an existing file that is not hwloc XML") {
    const temp_file garbage("garbage.xml", "this is not a topology\n");
    CHECK(message(garbage.path()) ==
          "USCHED_TOPOLOGY='" + garbage.path() + "' is not a valid hwloc XML topology file");
    const temp_file truncated("truncated.xml", std::string(two_core_xml).substr(0, 300));
    CHECK(message(truncated.path()) ==
          "USCHED_TOPOLOGY='" + truncated.path() + "' is not a valid hwloc XML topology file");
  }
  SECTION("an empty file") {
    const temp_file empty("empty.xml", "");
    CHECK(message(empty.path()) ==
          "USCHED_TOPOLOGY='" + empty.path() + "' is an empty file, not an hwloc XML topology");
  }
  SECTION("a path to nothing, a directory, a device") {
    CHECK(message("/nonexistent/machine.xml") ==
          "USCHED_TOPOLOGY='/nonexistent/machine.xml': no such file; expected an hwloc XML file or "
          "a synthetic description such as 'pack:2 core:4 pu:2'");
    CHECK(message("machine.xml") ==
          "USCHED_TOPOLOGY='machine.xml': no such file; expected an hwloc XML file or a synthetic "
          "description such as 'pack:2 core:4 pu:2'");
    CHECK(message("/tmp") ==
          "USCHED_TOPOLOGY='/tmp' is a directory; expected an hwloc XML file or a synthetic "
          "description such as 'pack:2 core:4 pu:2'");
    CHECK(message("/dev/null") ==
          "USCHED_TOPOLOGY='/dev/null' is a character device, not a regular file; expected an hwloc "
          "XML file or a synthetic description such as 'pack:2 core:4 pu:2'");
  }
  SECTION("more PUs than usched supports, refused before hwloc builds them") {
    CHECK(message("core:100000 pu:1") ==
          "USCHED_TOPOLOGY='core:100000 pu:1' describes more than 4096 PUs; usched supports at most 4096");
    CHECK(message("pack:64 core:64 pu:4") ==
          "USCHED_TOPOLOGY='pack:64 core:64 pu:4' describes more than 4096 PUs; usched supports at most 4096");
    CHECK(message("pack:2 [numa(memory=1GB)] core:99999999999999999999(indexes=0) pu:2")
              .find("describes more than 4096 PUs") != std::string::npos);
    CHECK(topology::load("pack:32 core:64 pu:2").nr_pus() == usched::max_workers);
  }
  SECTION("the subject is the caller's") {
    try {
      (void)topology::load("pack:x", "options::topology='pack:x'");
      FAIL("accepted");
    } catch (const config_error& e) {
      CHECK_THAT(e.what(), Catch::StartsWith("options::topology='pack:x': not a valid hwloc synthetic"));
    }
  }
  SECTION("more workers than PUs share them round-robin") {
    const topology topo = topology::load("pack:1 core:2 pu:1");
    const auto places = topo.place_workers(5, worker_unit::pu);
    REQUIRE(places.size() == 5);
    for (const auto& p : places) {
      CHECK(p.pu == p.worker % 2);
      CHECK(p.core == p.worker % 2);
    }
  }
  SECTION("worker per core on a description without cores") {
    const topology topo = topology::load("pack:2 pu:2");
    CHECK(topo.nr_cores() == 0);
    CHECK_THROWS_WITH(topo.place_workers(0, worker_unit::core, "USCHED_WORKERS='cores'"),
                      Catch::StartsWith("USCHED_WORKERS='cores': this topology") &&
                          Catch::Contains("has no cores to place workers on; use 'pus'"));
    CHECK(topo.place_workers(0, worker_unit::pu).size() == 4);
  }
}

// pack:64 core:64 pu:4 by hand (hwloc is not asked to build more than
// max_workers PUs): the domain tree itself has no bound but memory.
TEST_CASE("domains: workers holding one domain share its span and groups", "[topology][domains]") {
  std::vector<usched::detail::worker_place> places;
  constexpr int packages = 64, cores = 64, threads = 4;
  for (int w = 0; w < packages * cores * threads; ++w) {
    usched::detail::worker_place p;
    p.worker = p.pu = p.os_pu = w;
    p.core = w / threads;
    p.llc = p.package = w / (cores * threads);
    p.numa_node = 0;
    places.push_back(p);
  }
  const domain_tree tree = usched::build_domains(places);
  REQUIRE(tree.nr_cpus() == 16384);
  const auto& first = tree.per_cpu.front();
  const auto& last = tree.per_cpu.back();
  REQUIRE(first.size() == 3);  // SMT, LLC (= package), SYS
  CHECK(first[0].level == sd_level::smt);
  CHECK(first[1].level == sd_level::llc);
  CHECK(first[2].level == sd_level::sys);
  // One machine-wide domain: every worker's copy is the same storage.
  CHECK(first[2].span.same_storage(last[2].span));
  CHECK(first[2].groups.same_storage(last[2].groups));
  CHECK(first[2].groups.size() == 64);
  CHECK(first[2].local_group == 0);
  CHECK(last[2].local_group == 63);
  // Package 0's workers share its LLC domain; package 63's is another.
  CHECK(first[1].span.same_storage(tree.per_cpu[255][1].span));
  CHECK_FALSE(first[1].span.same_storage(last[1].span));
  CHECK(tree.per_cpu[255][1].local_group == 63);
  CHECK(last[1].groups.size() == 64);
  CHECK(last[0].span == std::vector<int>{16380, 16381, 16382, 16383});
  for (const auto& sd : tree.per_cpu[777]) check_domain_invariants(tree, 777, sd);
}

TEST_CASE("topology: an XML file is loaded", "[topology]") {
  const temp_file xml("two-core.xml", two_core_xml);
  const topology topo = topology::load(xml.path());
  CHECK_FALSE(topo.is_host());
  CHECK(topo.pinnable());
  CHECK(topo.nr_pus() == 2);
  CHECK(topo.nr_cores() == 2);
  CHECK(topo.nr_packages() == 1);
  CHECK(topo.describe().rfind("xml '" + xml.path() + "': ", 0) == 0);
}

TEST_CASE("topology: the host loads and can pin", "[topology]") {
  topology topo = topology::load("");
  CHECK(topo.is_host());
  CHECK(topo.pinnable());
  CHECK(topo.nr_pus() >= 1);
  CHECK(topo.nr_cores() >= 1);
  CHECK(topo.describe().rfind("host: ", 0) == 0);

  const auto places = topo.place_workers(0, worker_unit::pu);
  REQUIRE(places.size() == topo.nr_pus());
  // Pin a scratch thread, not the test runner's.
  bool bound = false;
  std::thread([&] { bound = topo.bind_current_thread(places.back(), worker_unit::pu); }).join();
  CHECK(bound);

  // Moving keeps the loaded topology usable.
  topology moved = std::move(topo);
  CHECK(moved.nr_pus() == places.size());
}

TEST_CASE("topology: a synthetic machine larger than the host runs unpinned", "[topology]") {
  const topology topo = topology::load("pack:32 core:64 pu:2");
  CHECK_FALSE(topo.pinnable());
  const auto places = topo.place_workers(1, worker_unit::pu);
  bool bound = true;
  std::thread([&] { bound = topo.bind_current_thread(places[0], worker_unit::pu); }).join();
  CHECK_FALSE(bound);
}

TEST_CASE("describe() names the machine and every level", "[topology]") {
  const topology topo = topology::load(smt_machine);
  CHECK(topo.describe() == "synthetic 'pack:2 l3:2 core:4 pu:2': 2 packages, 1 NUMA node, "
                           "4 LLCs, 16 cores, 32 PUs");

  const std::string tree = domains_for(topo, 0, worker_unit::pu).describe();
  CHECK_THAT(tree, Catch::Contains("SMT") && Catch::Contains("LLC") && Catch::Contains("PKG") &&
                       Catch::Contains("SYS"));
  CHECK_THAT(tree, Catch::Contains("span 0-7   groups {0-1} {2-3} {4-5} {6-7}   "
                                   "[SHARE_PKG_RESOURCES] imbalance_pct 117"));
  CHECK_THAT(tree, Catch::Contains("[SHARE_CPUCAPACITY|SHARE_PKG_RESOURCES] imbalance_pct 110"));
  // Each distinct domain once: 16 SMT + 4 LLC + 2 PKG + 1 SYS lines.
  CHECK(std::count(tree.begin(), tree.end(), '\n') == 23);

  const std::string numa = domains_for(topology::load(numa_machine), 0, worker_unit::pu).describe();
  CHECK_THAT(numa, Catch::Contains("NUMA  span 0-7") && Catch::Contains("[NUMA]"));

  CHECK(std::string(usched::to_string(sd_level::node)) == "NODE");
  CHECK(std::string(usched::to_string(sd_level::numa)) == "NUMA");
}
