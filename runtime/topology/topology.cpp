// topology.cpp: hwloc behind the topology interface (see topology.hpp).
//
// Everything the scheduler asks about is computed once at load() into a flat
// per-PU table, so place_workers() and the counters never walk hwloc's tree
// again; only bind_current_thread() goes back to hwloc, for the cpusets.
#include "topology.hpp"

#include <usched/error.hpp>
#include <usched/options.hpp>

#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

namespace usched::detail {

namespace {

// Where the description came from; decides the wording of describe() and of
// load errors.
enum class source_kind { host, xml, synthetic };

// What the scheduler needs to know about one PU, indexed by its logical index.
struct pu_info {
  int os_index = -1;
  int core = -1;
  int llc = -1;
  int package = -1;
  int numa_node = -1;
};

// The number of PUs this host has online, discovered once. Only used to decide
// whether a non-host topology can be pinned onto this machine.
unsigned host_pu_count() noexcept {
  static const unsigned count = [] {
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? static_cast<unsigned>(online) : 1u;
  }();
  return count;
}

// strerror() of a saved errno; hwloc leaves errno at 0 for some refusals, in
// which case EINVAL ("Invalid argument") is the honest description.
std::string errno_text(int saved_errno) {
  return std::strerror(saved_errno != 0 ? saved_errno : EINVAL);
}

std::string plural(unsigned n, const char* singular, const char* plural_form) {
  return std::to_string(n) + " " + (n == 1 ? singular : plural_form);
}

// An hwloc bitmap freed on every way out of the scope that allocated it.
struct bitmap_free {
  void operator()(hwloc_bitmap_t set) const noexcept { hwloc_bitmap_free(set); }
};
using bitmap_ptr = std::unique_ptr<hwloc_bitmap_s, bitmap_free>;

int logical_index_or_unknown(hwloc_obj_t obj) {
  return obj != nullptr ? static_cast<int>(obj->logical_index) : -1;
}

// The outermost CPU cache above `pu` (L3 if present, else L2, ...), or
// nullptr when the description has no cache above it (synthetic strings
// without lN levels).
hwloc_obj_t outermost_cache(hwloc_obj_t pu) {
  hwloc_obj_t found = nullptr;
  for (hwloc_obj_t obj = pu->parent; obj != nullptr; obj = obj->parent) {
    if (hwloc_obj_type_is_cache(obj->type) != 0) {
      found = obj;  // keep climbing: a wider cache further up wins
    }
  }
  return found;
}

// The NUMA node local to `pu`. In hwloc 2 NUMA nodes are memory children, not
// ancestors, and several nodes may cover one PU (a machine-wide node next to
// per-package ones, as "[numa] pack:2 [numa] ..." yields); the node with the
// smallest cpuset that still contains the PU is the most local one.
int local_numa_node(hwloc_topology_t topo, hwloc_obj_t pu) {
  int best = -1;
  int best_weight = 0;
  const int nr_nodes = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < nr_nodes; ++i) {
    const hwloc_obj_t node =
        hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
    if (node == nullptr || node->cpuset == nullptr ||
        hwloc_bitmap_isset(node->cpuset, pu->os_index) == 0) {
      continue;
    }
    const int weight = hwloc_bitmap_weight(node->cpuset);
    if (best < 0 || weight < best_weight) {
      best = static_cast<int>(node->logical_index);
      best_weight = weight;
    }
  }
  return best;
}

}  // namespace

struct topology::impl {
  hwloc_topology_t topo = nullptr;
  source_kind kind = source_kind::host;
  std::string source;
  std::vector<pu_info> pus;  // by PU logical index
  unsigned nr_cores = 0;
  unsigned nr_llcs = 0;
  unsigned nr_packages = 0;
  unsigned nr_numa_nodes = 0;
  // The machine's PUs before restrict(), and the OS indices restrict() kept
  // in hwloc's list syntax ("1", "0-3,8"); empty while nothing was narrowed.
  unsigned machine_pus = 0;
  std::string allowed_list;

  impl() = default;
  impl(const impl&) = delete;
  impl& operator=(const impl&) = delete;
  ~impl() {
    if (topo != nullptr) {
      hwloc_topology_destroy(topo);
    }
  }

  // How the source is named in errors: "USCHED_TOPOLOGY='<source>'",
  // "options::topology='<source>'" or "the host topology".
  std::string subject;

  [[noreturn]] void fail(const std::string& what, int saved_errno) const {
    throw config_error(subject + ": " + what + " (" + errno_text(saved_errno) + ")");
  }

  [[noreturn]] void fail_too_large(unsigned long long described) const {
    // synthetic_pus() stops counting one past the limit.
    const std::string count = described == max_workers + 1ULL ? "more than " + std::to_string(max_workers)
                                                        : std::to_string(described);
    throw config_error(subject + " describes " + count + " PUs; usched supports at most " +
                       std::to_string(max_workers));
  }

  // Narrows the loaded topology to the PUs of `mask` (ignoring any it does
  // not have) on a machine of `whole` PUs, when that is fewer than `whole`.
  // REMOVE_CPULESS drops what no allowed PU is under, NUMA nodes included:
  // a node left without CPUs would still be counted, and offered to
  // spawn_options::numa_node, though no worker runs near it.
  void restrict(hwloc_const_bitmap_t mask, unsigned whole) {
    const bitmap_ptr allowed(hwloc_bitmap_alloc());
    if (!allowed) fail("hwloc could not allocate a cpuset", ENOMEM);
    hwloc_bitmap_and(allowed.get(), mask, hwloc_topology_get_topology_cpuset(topo));
    const int nr_allowed = hwloc_bitmap_weight(allowed.get());
    if (nr_allowed <= 0) {
      throw config_error(subject + ": the affinity mask allows none of its PUs");
    }
    if (static_cast<unsigned>(nr_allowed) >= whole) return;
    char* list = nullptr;
    if (hwloc_bitmap_list_asprintf(&list, allowed.get()) >= 0 && list != nullptr) {
      allowed_list = list;
    }
    std::free(list);
    errno = 0;
    if (hwloc_topology_restrict(topo, allowed.get(), HWLOC_RESTRICT_FLAG_REMOVE_CPULESS) != 0) {
      fail("hwloc could not restrict the topology to the affinity mask", errno);
    }
    machine_pus = whole;
  }

  // Fills the per-PU table and the counters from the loaded hwloc topology.
  void index() {
    const int nr_pu_objs = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    pus.assign(nr_pu_objs > 0 ? static_cast<std::size_t>(nr_pu_objs) : 0, pu_info{});

    // LLC indices are made dense over the distinct cache objects in PU order:
    // on a normal machine that is the caches' logical index, and it stays
    // collision-free when different PUs have last-level caches of different
    // depths, or no cache at all and fall back to their core.
    std::map<hwloc_obj_t, int> llc_ids;
    for (std::size_t i = 0; i < pus.size(); ++i) {
      const hwloc_obj_t pu =
          hwloc_get_obj_by_type(topo, HWLOC_OBJ_PU, static_cast<unsigned>(i));
      pu_info& info = pus[i];
      info.os_index = static_cast<int>(pu->os_index);
      const hwloc_obj_t core = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_CORE, pu);
      info.core = logical_index_or_unknown(core);
      info.package = logical_index_or_unknown(
          hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, pu));
      info.numa_node = local_numa_node(topo, pu);

      // A description without caches (most synthetic strings: "pack:1
      // core:20 pu:2") gets one last-level cache per package, as every
      // multi-core x86 and Arm package has, and as the kernel builds its MC
      // domain from the cache the cores of a package share. Without a
      // package either, the core is the widest thing known to share one.
      hwloc_obj_t llc = outermost_cache(pu);
      if (llc == nullptr) {
        llc = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, pu);
      }
      if (llc == nullptr) {
        llc = core;
      }
      if (llc != nullptr) {
        const auto [it, inserted] = llc_ids.emplace(llc, static_cast<int>(llc_ids.size()));
        info.llc = it->second;
      }
    }
    nr_llcs = static_cast<unsigned>(llc_ids.size());

    const auto count = [this](hwloc_obj_type_t type) {
      const int n = hwloc_get_nbobjs_by_type(topo, type);
      return n > 0 ? static_cast<unsigned>(n) : 0u;
    };
    nr_cores = count(HWLOC_OBJ_CORE);
    nr_packages = count(HWLOC_OBJ_PACKAGE);
    nr_numa_nodes = count(HWLOC_OBJ_NUMANODE);
    if (allowed_list.empty()) machine_pus = static_cast<unsigned>(pus.size());
  }
};

topology::topology(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
topology::topology(topology&&) noexcept = default;
topology& topology::operator=(topology&&) noexcept = default;
topology::~topology() = default;

namespace {

// What a source names, decided before hwloc sees it: hwloc's own errors
// depend on which of its optional backends are installed (its XML parser
// with libxml2 or without), so what was wrong is told by us.
enum class source_shape {
  host,           // empty: this machine
  xml,            // an existing regular, non-empty file
  empty_file,     // an existing regular file with nothing in it
  directory,      // an existing directory
  special_file,   // an existing device, FIFO or socket (/dev/null)
  missing_file,   // no such file, and it reads as a path
  synthetic,      // anything else
};

// What a source may be, said after each way it is not one.
constexpr const char* accepted_sources =
    "expected an hwloc XML file or a synthetic description such as 'pack:2 core:4 pu:2'";

source_shape shape_of(const std::string& source, std::string& kind_name) {
  if (source.empty()) return source_shape::host;
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(source, ec);
  switch (st.type()) {
    case fs::file_type::regular:
      return fs::file_size(source, ec) == 0 && !ec ? source_shape::empty_file : source_shape::xml;
    case fs::file_type::directory: return source_shape::directory;
    case fs::file_type::character: kind_name = "a character device"; return source_shape::special_file;
    case fs::file_type::block: kind_name = "a block device"; return source_shape::special_file;
    case fs::file_type::fifo: kind_name = "a FIFO"; return source_shape::special_file;
    case fs::file_type::socket: kind_name = "a socket"; return source_shape::special_file;
    default: break;
  }
  // Synthetic descriptions are "type:count" words; a slash or an .xml
  // ending can only be a path.
  const bool ends_xml = source.size() >= 4 && source.compare(source.size() - 4, 4, ".xml") == 0;
  if (source.find('/') != std::string::npos || ends_xml) return source_shape::missing_file;
  return source_shape::synthetic;
}

// The PUs a synthetic description asks for: the product of the counts of
// its levels ("pack:2 core:4 pu:2" is 16), saturated just above `limit`;
// 0 when the text is not of that simple form (hwloc then judges it).
// Memory children ("[numa]") and attributes ("(memory=1GB)") add no PUs.
unsigned long long synthetic_pus(const std::string& source, unsigned long long limit) {
  unsigned long long total = 1;
  std::size_t i = 0;
  bool any = false;
  while (i < source.size()) {
    while (i < source.size() && std::isspace(static_cast<unsigned char>(source[i])) != 0) ++i;
    if (i == source.size()) break;
    const std::size_t end = source.find_first_of(" \t\n", i);
    const std::string word = source.substr(i, end == std::string::npos ? std::string::npos : end - i);
    i = end == std::string::npos ? source.size() : end;
    if (word.front() == '[' || word.front() == '(') continue;
    const std::size_t colon = word.find(':');
    if (colon == std::string::npos) return 0;
    std::size_t digits = colon + 1;
    unsigned long long count = 0;
    while (digits < word.size() && std::isdigit(static_cast<unsigned char>(word[digits])) != 0) {
      count = std::min(count * 10 + static_cast<unsigned>(word[digits] - '0'), limit + 1);
      ++digits;
    }
    if (digits == colon + 1 || (digits < word.size() && word[digits] != '(')) return 0;
    total = std::min(total * count, limit + 1);
    any = true;
  }
  return any ? total : 0;
}

}  // namespace

topology topology::load(const std::string& source, const std::string& subject) {
  auto p = std::make_unique<impl>();
  p->source = source;
  p->subject = !subject.empty() ? subject
               : source.empty() ? std::string("the host topology")
                                : "USCHED_TOPOLOGY='" + source + "'";
  std::string kind_name;
  switch (shape_of(source, kind_name)) {
    case source_shape::host: p->kind = source_kind::host; break;
    case source_shape::xml: p->kind = source_kind::xml; break;
    case source_shape::synthetic: p->kind = source_kind::synthetic; break;
    case source_shape::empty_file:
      throw config_error(p->subject + " is an empty file, not an hwloc XML topology");
    case source_shape::directory:
      throw config_error(p->subject + " is a directory; " + accepted_sources);
    case source_shape::special_file:
      throw config_error(p->subject + " is " + kind_name + ", not a regular file; " + accepted_sources);
    case source_shape::missing_file:
      throw config_error(p->subject + ": no such file; " + accepted_sources);
  }
  if (p->kind == source_kind::synthetic) {
    const unsigned long long pus = synthetic_pus(source, max_workers);
    if (pus > max_workers) p->fail_too_large(pus);
  }

  if (hwloc_topology_init(&p->topo) != 0) {
    p->topo = nullptr;
    p->fail("hwloc could not create a topology", errno);
  }

  if (p->kind == source_kind::host) {
    // RESTRICT_TO_CPUBINDING keeps hwloc's discovery inside the process's
    // binding: its x86 backend otherwise moves the loading thread onto each
    // PU in turn to read its CPUID, PUs outside the mask included (taskset -c
    // 1 saw it run on PU 0). It narrows the topology to the *process*
    // binding, which Linux reports as the union of every thread's mask;
    // restrict() below narrows it to the loading thread's own.
    hwloc_topology_set_flags(p->topo, HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM |
                                          HWLOC_TOPOLOGY_FLAG_RESTRICT_TO_CPUBINDING);
  } else {
    // hwloc gives XML and synthetic topologies binding hooks that succeed
    // without doing anything; claiming "this system" makes set_cpubind() real,
    // so a pinnable() description pins for real and a wrong one fails loudly.
    hwloc_topology_set_flags(p->topo, HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM);
    errno = 0;
    if (p->kind == source_kind::xml) {
      // hwloc reads the file at set_xml() with one backend and at load()
      // with the other: either failure is the same fault of the file.
      if (hwloc_topology_set_xml(p->topo, source.c_str()) != 0 || hwloc_topology_load(p->topo) != 0) {
        throw config_error(p->subject + " is not a valid hwloc XML topology file");
      }
    } else if (hwloc_topology_set_synthetic(p->topo, source.c_str()) != 0) {
      p->fail("not a valid hwloc synthetic description", errno);
    }
  }

  errno = 0;
  if (p->kind != source_kind::xml && hwloc_topology_load(p->topo) != 0) {
    p->fail("hwloc could not load the topology", errno);
  }
  if (p->kind == source_kind::host) {
    // The thread's mask (hwloc's THREAD binding is sched_getaffinity(0) on
    // Linux), as Go sizes GOMAXPROCS from it. The loaded topology is then
    // restricted to it (hwloc_topology_restrict) rather than filtered where
    // it is used: every count, each core's cpuset that worker_unit::core
    // binds to, the LLC and NUMA node of each PU and the dense logical
    // indices the domains are built from then describe only the allowed PUs,
    // with nothing further to keep in step. Where hwloc cannot read a
    // binding, the whole machine is used, as before.
    const bitmap_ptr mask(hwloc_bitmap_alloc());
    if (mask && hwloc_get_cpubind(p->topo, mask.get(), HWLOC_CPUBIND_THREAD) == 0) {
      p->restrict(mask.get(), host_pu_count());
    }
  }
  p->index();
  if (p->pus.empty()) {
    p->fail("the topology has no PUs", EINVAL);
  }
  if (p->pus.size() > max_workers) p->fail_too_large(p->pus.size());
  return topology(std::move(p));
}

bool topology::is_host() const noexcept { return impl_->kind == source_kind::host; }

bool topology::pinnable() const noexcept {
  return is_host() || nr_pus() <= host_pu_count();
}

unsigned topology::nr_pus() const noexcept { return static_cast<unsigned>(impl_->pus.size()); }
unsigned topology::nr_cores() const noexcept { return impl_->nr_cores; }
unsigned topology::nr_llcs() const noexcept { return impl_->nr_llcs; }
unsigned topology::nr_packages() const noexcept { return impl_->nr_packages; }
unsigned topology::nr_numa_nodes() const noexcept { return impl_->nr_numa_nodes; }
unsigned topology::nr_machine_pus() const noexcept { return impl_->machine_pus; }

void topology::restrict_to_mask(const std::vector<unsigned>& os_pus) {
  const bitmap_ptr mask(hwloc_bitmap_alloc());
  if (!mask) impl_->fail("hwloc could not allocate a cpuset", ENOMEM);
  for (const unsigned os : os_pus) hwloc_bitmap_set(mask.get(), os);
  impl_->restrict(mask.get(), impl_->machine_pus);
  impl_->index();
}

std::vector<worker_place> topology::place_workers(unsigned count, worker_unit unit,
                                                 const std::string& subject) const {
  const bool by_core = unit == worker_unit::core;
  const unsigned units = by_core ? nr_cores() : nr_pus();
  if (units == 0) {
    throw config_error((subject.empty() ? std::string("USCHED_WORKERS='cores'") : subject) +
                       ": this topology (" + describe() +
                       ") has no cores to place workers on; use 'pus'");
  }
  if (count == 0) {
    count = units;
  }

  std::vector<worker_place> places;
  places.reserve(count);
  for (unsigned w = 0; w < count; ++w) {
    // Past the last unit, workers start again from the first: an
    // oversubscribed run shares every unit between count / units workers.
    const unsigned u = w % units;
    unsigned first_pu = u;
    unsigned nr_bound = 1;
    if (by_core) {
      const hwloc_obj_t core = hwloc_get_obj_by_type(impl_->topo, HWLOC_OBJ_CORE, u);
      const hwloc_obj_t pu =
          hwloc_get_next_obj_inside_cpuset_by_type(impl_->topo, core->cpuset, HWLOC_OBJ_PU, nullptr);
      first_pu = pu->logical_index;
      nr_bound = static_cast<unsigned>(
          hwloc_get_nbobjs_inside_cpuset_by_type(impl_->topo, core->cpuset, HWLOC_OBJ_PU));
    }
    const pu_info& info = impl_->pus[first_pu];
    worker_place place;
    place.worker = static_cast<int>(w);
    place.pu = static_cast<int>(first_pu);
    place.os_pu = info.os_index;
    place.core = info.core;
    place.llc = info.llc;
    place.package = info.package;
    place.numa_node = info.numa_node;
    place.nr_pus = nr_bound;
    places.push_back(place);
  }
  return places;
}

bool topology::bind_current_thread(const worker_place& place, worker_unit unit) const {
  if (!pinnable()) {
    return false;
  }
  const bool by_core = unit == worker_unit::core;
  const int index = by_core ? place.core : place.pu;
  if (index < 0) {
    return false;
  }
  const hwloc_obj_t obj = hwloc_get_obj_by_type(
      impl_->topo, by_core ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU, static_cast<unsigned>(index));
  if (obj == nullptr || obj->cpuset == nullptr) {
    return false;
  }
  return hwloc_set_cpubind(impl_->topo, obj->cpuset, HWLOC_CPUBIND_THREAD) == 0;
}

std::string topology::describe() const {
  std::string line;
  switch (impl_->kind) {
    case source_kind::host: line = "host"; break;
    case source_kind::xml: line = "xml '" + impl_->source + "'"; break;
    case source_kind::synthetic: line = "synthetic '" + impl_->source + "'"; break;
  }
  line += ": " + plural(nr_packages(), "package", "packages") + ", " +
          plural(nr_numa_nodes(), "NUMA node", "NUMA nodes") + ", " +
          plural(nr_llcs(), "LLC", "LLCs") + ", " + plural(nr_cores(), "core", "cores") +
          ", " + plural(nr_pus(), "PU", "PUs");
  if (!impl_->allowed_list.empty()) {
    line += "; the affinity mask allows " + std::to_string(nr_pus()) + " of the machine's " +
            plural(nr_machine_pus(), "PU", "PUs") + " (cpu list " + impl_->allowed_list + ")";
  }
  return line;
}

}  // namespace usched::detail
