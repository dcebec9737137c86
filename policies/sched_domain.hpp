// sched_domain.hpp: the scheduling-domain hierarchy, in the kernel's terms
// (kernel/sched/topology.c). Each worker sees a chain of
// domains from the narrowest (SMT siblings) to the whole machine; each domain
// is split into groups, the spans of its child level. These structures are
// plain data: policies read them, the engine walks them, tests build and
// inspect them without threads. They are plain data with no dependency on
// how a topology is discovered: the engine's build_domains() (domains.hpp)
// makes them from worker places, which the hwloc layer or a test produces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace usched {

// Domain flags, named after the kernel's SD_* flags they mirror.
enum sd_flags : unsigned {
  // Groups are hardware threads of one core; they share its execution units.
  SD_SHARE_CPUCAPACITY = 1u << 0,
  // Groups share a last-level cache (set on SMT and LLC domains).
  SD_SHARE_PKG_RESOURCES = 1u << 1,
  // The domain spans more than one NUMA node.
  SD_NUMA = 1u << 2,
};

// Which hardware boundary a domain follows. Ordered from narrowest to widest.
enum class sd_level : std::uint8_t {
  smt,   // the PUs of one core
  llc,   // the cores sharing a last-level cache (the kernel's MC level)
  node,  // one NUMA node, when it is wider than an LLC and narrower than a package
  pkg,   // one package (socket)
  numa,  // the whole machine, when it has more than one NUMA node
  sys,   // the whole machine, single NUMA node but several packages
};

// Short upper-case name used in logs and stats: "SMT", "LLC", "NODE", "PKG",
// "NUMA", "SYS".
const char* to_string(sd_level level) noexcept;

// The full capacity of one PU, as in the kernel (SCHED_CAPACITY_SCALE).
inline constexpr unsigned long capacity_scale = 1024;

// shared_list<T>: an immutable vector shared by every copy. The many workers
// whose chains hold the same domain share one copy of its span and groups, as
// the kernel's sched_domains share their sched_groups, so a tree costs
// memory linear in the workers instead of quadratic. Reads like a const
// std::vector<T>, and converts to one by reference.
template <class T>
class shared_list {
 public:
  shared_list() = default;
  shared_list(std::vector<T> v)  // NOLINT(google-explicit-constructor): a list is its vector
      : p_(std::make_shared<const std::vector<T>>(std::move(v))) {}
  shared_list(std::initializer_list<T> l) : shared_list(std::vector<T>(l)) {}

  const std::vector<T>& get() const noexcept { return p_ ? *p_ : none(); }
  operator const std::vector<T>&() const noexcept { return get(); }  // NOLINT(google-explicit-constructor)

  auto begin() const noexcept { return get().begin(); }
  auto end() const noexcept { return get().end(); }
  std::size_t size() const noexcept { return get().size(); }
  bool empty() const noexcept { return get().empty(); }
  const T& operator[](std::size_t i) const noexcept { return get()[i]; }
  const T& at(std::size_t i) const { return get().at(i); }
  const T& front() const noexcept { return get().front(); }
  const T& back() const noexcept { return get().back(); }
  // Whether two lists are one shared copy (not merely equal).
  bool same_storage(const shared_list& o) const noexcept { return p_ == o.p_; }

  friend bool operator==(const shared_list& a, const shared_list& b) { return a.get() == b.get(); }
  friend bool operator==(const shared_list& a, const std::vector<T>& b) { return a.get() == b; }

 private:
  static const std::vector<T>& none() noexcept {
    static const std::vector<T> empty_list;
    return empty_list;
  }
  std::shared_ptr<const std::vector<T>> p_;
};

// A group: one child span of a domain. `cpus` are worker indices, sorted.
struct sched_group {
  std::vector<int> cpus;
  unsigned long capacity = 0;  // sum of its workers' capacities
};

// One level of one worker's hierarchy.
struct sched_domain {
  sd_level level = sd_level::smt;
  unsigned flags = 0;            // sd_flags
  // The span and the groups are shared by every worker whose chain holds this
  // domain; only local_group is the owner's own.
  shared_list<int> span;            // worker indices, sorted; includes the owner
  shared_list<sched_group> groups;  // disjoint, covering span, in ascending order of first cpu
  std::size_t local_group = 0;   // index in groups of the one holding the owner
  // Kernel-like tunables (kernel/sched/topology.c sd_init()):
  unsigned imbalance_pct = 125;    // 110 SMT, 117 LLC, 125 wider
  unsigned min_interval_ms = 1;    // = span weight
  unsigned max_interval_ms = 2;    // = 2 * span weight
  // (The kernel's sd->busy_factor is the policy's: policy_traits::busy_factor.)
  // The flags of the level below in the owner's chain (0 at the narrowest):
  // the kernel's sg->flags, which every group of the domain copies from its
  // child. SD_SHARE_CPUCAPACITY there means each group is one SMT core.
  unsigned child_flags = 0;
  // The fibers a NUMA level lets a node run before an imbalance against
  // another node counts (sd->imb_numa_nr, build_sched_domains() since v5.18):
  // on the first level above the LLC, the LLCs it spans (an eighth of its
  // span when it spans one), scaled on wider levels by how many times they
  // span the first NUMA level. 0 where the tree was not built by
  // build_domains() (hand-built test domains).
  unsigned imb_numa_nr = 0;
  // The SMT cores of each group, in the order of `groups` (sg->cores, v6.6).
  // Empty where the tree was not built by build_domains(): every worker is
  // then its own core (group_cores_of()).
  shared_list<unsigned> group_cores;

  bool has_flag(unsigned f) const noexcept { return (flags & f) != 0; }

  // group_cores_of() is the number of SMT cores of groups[g]: group_cores[g],
  // or the group's worker count when group_cores was not filled in.
  unsigned group_cores_of(std::size_t g) const noexcept {
    return g < group_cores.size() ? group_cores[g] : static_cast<unsigned>(groups[g].cpus.size());
  }
};

// The hierarchy of every worker: per_cpu[w] is worker w's chain, narrowest
// first. Degenerate levels (a span equal to the child's, or a single group)
// are dropped, so a 1-worker runtime has an empty chain.
struct domain_tree {
  std::vector<std::vector<sched_domain>> per_cpu;
  // Capacity of each worker (capacity_scale for every worker today).
  std::vector<unsigned long> cpu_capacity;
  // NUMA node of each worker (0 when unknown).
  std::vector<int> cpu_node;

  std::size_t nr_cpus() const noexcept { return per_cpu.size(); }
  // The multi-line readable tree logged at start-up, one line per distinct
  // domain at each level, e.g. "  LLC  span 0-7  groups {0-1} {2-3} {4-5} {6-7}  [SHARE_PKG_RESOURCES]".
  std::string describe() const;

  // share_llc() is true when workers a and b share a last-level cache: some
  // domain of a's chain with SD_SHARE_PKG_RESOURCES spans b (or a == b).
  bool share_llc(int a, int b) const noexcept;
};

}  // namespace usched
