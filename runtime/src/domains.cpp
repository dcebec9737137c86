// domains.cpp: the scheduling-domain hierarchy (see domains.hpp), built the
// way kernel/sched/topology.c builds it: per worker, one candidate span per
// topology level, degenerate levels dropped, each kept level split into the
// spans of the level below it.
#include "domains.hpp"

#include "topology.hpp"

#include <algorithm>
#include <cassert>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace usched {

namespace {

using detail::worker_place;
using cpu_list = std::vector<int>;

// Tunables of the kernel's sd_init() (v5.10): imbalance_pct is 110 on SMT
// levels and 117 everywhere else (v5.9 had 125 above the LLC; the CFS
// policies that reproduce v5.9 apply that themselves, cfs_features.hpp).
constexpr unsigned smt_imbalance_pct = 110;
constexpr unsigned llc_imbalance_pct = 117;
constexpr unsigned default_imbalance_pct = 117;
// min_interval = span weight (ms), max_interval = 2 * span weight.
constexpr unsigned max_interval_per_min = 2;
// The busy-balance interval multiplier: 16, the kernel's value since it was
// lowered from 32 so that busy CPUs balance sooner.
constexpr unsigned default_busy_factor = 16;

// One candidate level: the level it becomes, and the worker_place field whose
// equal (known) values make up its span; nullptr for the whole machine.
struct candidate {
  sd_level level;
  int worker_place::*key;
};

// Narrowest to widest, the order in which build_domains() tries them.
constexpr candidate candidates[] = {
    {sd_level::smt, &worker_place::core},
    {sd_level::llc, &worker_place::llc},
    {sd_level::node, &worker_place::numa_node},
    {sd_level::pkg, &worker_place::package},
    {sd_level::sys, nullptr},  // becomes numa when it spans several nodes
};
// Index of the package candidate above, which bounds the NUMA-node level.
constexpr std::size_t pkg_candidate = 3;
static_assert(candidates[pkg_candidate].level == sd_level::pkg);

// A level kept in one worker's chain, before its groups are known.
struct kept_level {
  sd_level level;
  cpu_list span;
};

// The workers sharing `key` with worker `w`. An unknown (-1) value is shared
// with nobody, so the span is {w} alone.
cpu_list candidate_span(const std::vector<worker_place>& places, std::size_t w,
                        int worker_place::*key) {
  cpu_list span;
  const int value = key != nullptr ? places[w].*key : 0;
  for (std::size_t x = 0; x < places.size(); ++x) {
    const bool same = key == nullptr || (value >= 0 && places[x].*key == value) || x == w;
    if (same) {
      span.push_back(static_cast<int>(x));
    }
  }
  return span;
}

// Number of distinct known NUMA nodes among the workers of `span`.
std::size_t distinct_nodes(const std::vector<worker_place>& places, const cpu_list& span) {
  std::set<int> nodes;
  for (const int x : span) {
    const int node = places[static_cast<std::size_t>(x)].numa_node;
    if (node >= 0) {
      nodes.insert(node);
    }
  }
  return nodes.size();
}

bool is_subset(const cpu_list& inner, const cpu_list& outer) {
  return std::includes(outer.begin(), outer.end(), inner.begin(), inner.end());
}

// Worker w's kept levels: a candidate survives only if it strictly widens the
// span kept below it, which is the kernel's sd_degenerate() (a single-CPU
// span) and sd_parent_degenerate() (a span equal to the child's) rolled into
// one rule.
std::vector<kept_level> kept_levels(const std::vector<worker_place>& places, std::size_t w) {
  std::vector<cpu_list> spans;
  for (const candidate& c : candidates) {
    spans.push_back(candidate_span(places, w, c.key));
  }
  const cpu_list& package_span = spans[pkg_candidate];

  std::vector<kept_level> kept;
  cpu_list below{static_cast<int>(w)};
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const candidate& c = candidates[i];
    cpu_list& span = spans[i];
    bool keep = span.size() > below.size() && is_subset(below, span);
    // A NUMA node is a level of its own only inside a package (sub-NUMA
    // clustering). One that covers a whole package or several (the single
    // node of a plain machine) would hide the package level; the whole-machine
    // level already carries the cross-node boundary.
    if (c.level == sd_level::node && places[w].package >= 0) {
      keep = keep && span.size() < package_span.size() && is_subset(span, package_span);
    }
    if (!keep) {
      continue;
    }
    sd_level level = c.level;
    if (c.key == nullptr && distinct_nodes(places, span) > 1) {
      level = sd_level::numa;
    }
    below = span;
    kept.push_back({level, std::move(span)});
  }
  return kept;
}

// The child span of worker x inside a domain of `level` spanning `span`: x's
// widest kept level below `level` that fits in `span`, else x alone. Using
// x's own chain (not the owner's) keeps every owner's view of a domain the
// same when cores hold different numbers of workers.
cpu_list child_span(const std::vector<std::vector<kept_level>>& chains, int x, sd_level level,
                    const cpu_list& span) {
  cpu_list best{x};
  for (const kept_level& k : chains[static_cast<std::size_t>(x)]) {
    if (k.level >= level) {
      break;
    }
    if (is_subset(k.span, span)) {
      best = k.span;
    }
  }
  return best;
}

// Splits `span` into groups, in ascending order of first cpu. Each uncovered
// worker, taken in order, brings its child span less what is already covered;
// on any sane topology the child spans are disjoint and nothing is trimmed,
// and the trimming keeps the groups a partition when they are not.
std::vector<sched_group> make_groups(const std::vector<std::vector<kept_level>>& chains,
                                     const std::vector<unsigned long>& capacity,
                                     sd_level level, const cpu_list& span) {
  std::vector<sched_group> groups;
  std::vector<bool> covered(chains.size(), false);
  for (const int x : span) {
    if (covered[static_cast<std::size_t>(x)]) {
      continue;
    }
    sched_group group;
    for (const int y : child_span(chains, x, level, span)) {
      if (!covered[static_cast<std::size_t>(y)]) {
        covered[static_cast<std::size_t>(y)] = true;
        group.cpus.push_back(y);
        group.capacity += capacity[static_cast<std::size_t>(y)];
      }
    }
    groups.push_back(std::move(group));
  }
  return groups;
}

unsigned level_flags(const std::vector<worker_place>& places, sd_level level,
                     const cpu_list& span) {
  unsigned flags = 0;
  if (level == sd_level::smt) {
    flags |= SD_SHARE_CPUCAPACITY | SD_SHARE_PKG_RESOURCES;
  } else if (level == sd_level::llc) {
    flags |= SD_SHARE_PKG_RESOURCES;
  }
  if (distinct_nodes(places, span) > 1) {
    flags |= SD_NUMA;
  }
  return flags;
}

// sd_init()'s choice: the flags decide the imbalance threshold, not the level.
unsigned imbalance_pct_for(unsigned flags) {
  if ((flags & SD_SHARE_CPUCAPACITY) != 0) {
    return smt_imbalance_pct;
  }
  if ((flags & SD_SHARE_PKG_RESOURCES) != 0) {
    return llc_imbalance_pct;
  }
  return default_imbalance_pct;
}

// "0-3,8-11" for a sorted worker list.
std::string ranges(const cpu_list& cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) {
      ++j;
    }
    if (!out.empty()) {
      out += ',';
    }
    out += std::to_string(cpus[i]);
    if (j > i) {
      out += '-' + std::to_string(cpus[j]);
    }
    i = j + 1;
  }
  return out;
}

std::string flag_names(unsigned flags) {
  constexpr std::pair<unsigned, const char*> names[] = {
      {SD_SHARE_CPUCAPACITY, "SHARE_CPUCAPACITY"},
      {SD_SHARE_PKG_RESOURCES, "SHARE_PKG_RESOURCES"},
      {SD_NUMA, "NUMA"},
  };
  std::string out;
  for (const auto& [flag, name] : names) {
    if ((flags & flag) != 0) {
      if (!out.empty()) {
        out += '|';
      }
      out += name;
    }
  }
  return "[" + out + "]";
}

// Width of the level-name column in describe(): the longest name plus a gap.
constexpr std::size_t level_column = 6;

}  // namespace

const char* to_string(sd_level level) noexcept {
  switch (level) {
    case sd_level::smt: return "SMT";
    case sd_level::llc: return "LLC";
    case sd_level::node: return "NODE";
    case sd_level::pkg: return "PKG";
    case sd_level::numa: return "NUMA";
    case sd_level::sys: return "SYS";
  }
  return "?";
}

domain_tree build_domains(const std::vector<detail::worker_place>& places) {
  domain_tree tree;
  const std::size_t n = places.size();
  tree.cpu_capacity.assign(n, capacity_scale);
  tree.cpu_node.resize(n);
  for (std::size_t w = 0; w < n; ++w) tree.cpu_node[w] = places[w].numa_node >= 0 ? places[w].numa_node : 0;
  tree.per_cpu.resize(n);

  // Every chain's spans first: a domain's groups are its workers' child
  // spans, so all chains must be known before any groups are cut.
  std::vector<std::vector<kept_level>> chains(n);
  for (std::size_t w = 0; w < n; ++w) {
    chains[w] = kept_levels(places, w);
  }

  for (std::size_t w = 0; w < n; ++w) {
    for (const kept_level& k : chains[w]) {
      sched_domain sd;
      sd.level = k.level;
      sd.span = k.span;
      sd.flags = level_flags(places, k.level, k.span);
      sd.groups = make_groups(chains, tree.cpu_capacity, k.level, k.span);
      // A kept level strictly widens the owner's child span, so the owner's
      // group cannot be the only one.
      assert(sd.groups.size() >= 2);
      for (std::size_t g = 0; g < sd.groups.size(); ++g) {
        const cpu_list& cpus = sd.groups[g].cpus;
        if (std::binary_search(cpus.begin(), cpus.end(), static_cast<int>(w))) {
          sd.local_group = g;
        }
      }
      const auto weight = static_cast<unsigned>(k.span.size());
      sd.imbalance_pct = imbalance_pct_for(sd.flags);
      sd.min_interval_ms = weight;
      sd.max_interval_ms = max_interval_per_min * weight;
      sd.busy_factor = default_busy_factor;
      tree.per_cpu[w].push_back(std::move(sd));
    }
  }
  return tree;
}

std::string domain_tree::describe() const {
  // Many workers share each domain; list every (level, span) once, narrowest
  // level first, then by first worker.
  std::map<std::pair<sd_level, cpu_list>, const sched_domain*> distinct;
  for (const auto& chain : per_cpu) {
    for (const sched_domain& sd : chain) {
      distinct.emplace(std::make_pair(sd.level, sd.span), &sd);
    }
  }
  if (distinct.empty()) {
    return "  (no domains: " + std::to_string(nr_cpus()) +
           (nr_cpus() == 1 ? " worker)\n" : " workers)\n");
  }

  std::string out;
  for (const auto& [key, sd] : distinct) {
    std::string name = to_string(sd->level);
    name.resize(std::max(level_column, name.size() + 1), ' ');
    out += "  " + name + "span " + ranges(sd->span) + "   groups";
    for (const sched_group& g : sd->groups) {
      out += " {" + ranges(g.cpus) + "}";
    }
    out += "   " + flag_names(sd->flags) + " imbalance_pct " + std::to_string(sd->imbalance_pct) +
           " interval " + std::to_string(sd->min_interval_ms) + ".." +
           std::to_string(sd->max_interval_ms) + " ms\n";
  }
  return out;
}

bool domain_tree::share_llc(int a, int b) const noexcept {
  if (a == b) return true;
  for (const sched_domain& sd : per_cpu[static_cast<std::size_t>(a)]) {
    if (!sd.has_flag(SD_SHARE_PKG_RESOURCES)) break;
    if (std::binary_search(sd.span.begin(), sd.span.end(), b)) return true;
  }
  return false;
}

}  // namespace usched
