// domains.cpp: the scheduling-domain hierarchy (see domains.hpp), built the
// way kernel/sched/topology.c builds it: per worker, one candidate span per
// topology level, degenerate levels dropped, each kept level split into the
// spans of the level below it.
#include "domains.hpp"

#include <algorithm>
#include <cassert>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <tuple>
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

// The candidate spans of one level: every worker belongs to exactly one.
// Workers sharing a known value of the level's key share a span; a worker
// whose value is unknown (-1) has a span of its own.
struct level_spans {
  std::vector<std::size_t> of;        // span id of each worker
  std::vector<cpu_list> members;      // sorted workers of each span
  std::vector<std::size_t> nr_nodes;  // distinct known NUMA nodes of each span
};

level_spans spans_of_level(const std::vector<worker_place>& places, int worker_place::*key) {
  level_spans ls;
  const std::size_t n = places.size();
  ls.of.resize(n);
  std::map<int, std::size_t> by_value;
  for (std::size_t w = 0; w < n; ++w) {
    const int value = key != nullptr ? places[w].*key : 0;
    std::size_t id = ls.members.size();
    if (value >= 0) {
      id = by_value.emplace(value, ls.members.size()).first->second;
    }
    if (id == ls.members.size()) ls.members.emplace_back();
    ls.members[id].push_back(static_cast<int>(w));  // w ascending: sorted
    ls.of[w] = id;
  }
  ls.nr_nodes.reserve(ls.members.size());
  for (const cpu_list& span : ls.members) {
    std::set<int> nodes;
    for (const int x : span) {
      const int node = places[static_cast<std::size_t>(x)].numa_node;
      if (node >= 0) nodes.insert(node);
    }
    ls.nr_nodes.push_back(nodes.size());
  }
  return ls;
}

// A span named by its candidate level and its id there.
struct span_ref {
  std::size_t cand = 0;
  std::size_t id = 0;
  bool operator<(const span_ref& o) const noexcept {
    return cand != o.cand ? cand < o.cand : id < o.id;
  }
};

// Every candidate level's spans, and whether one span lies inside another.
// A span is inside another of level j when all its workers have that span
// at level j; the answers are kept, so each pair costs its size once and
// building a tree is linear in workers x levels on any topology whose levels
// nest.
class span_table {
 public:
  explicit span_table(const std::vector<worker_place>& places) {
    for (const candidate& c : candidates) levels_.push_back(spans_of_level(places, c.key));
  }

  span_ref of(std::size_t cand, std::size_t w) const { return {cand, levels_[cand].of[w]}; }
  const cpu_list& members(span_ref s) const { return levels_[s.cand].members[s.id]; }
  std::size_t nr_nodes(span_ref s) const { return levels_[s.cand].nr_nodes[s.id]; }

  bool inside(span_ref inner, span_ref outer) {
    const auto key = std::make_pair(inner, outer);
    if (const auto it = known_.find(key); it != known_.end()) return it->second;
    bool in = true;
    for (const int x : members(inner)) {
      if (levels_[outer.cand].of[static_cast<std::size_t>(x)] != outer.id) {
        in = false;
        break;
      }
    }
    known_.emplace(key, in);
    return in;
  }

 private:
  std::vector<level_spans> levels_;
  std::map<std::pair<span_ref, span_ref>, bool> known_;
};

// A level kept in one worker's chain, before its groups are known.
struct kept_level {
  sd_level level;
  span_ref span;
};

// Worker w's kept levels: a candidate survives only if it strictly widens the
// span kept below it, which is the kernel's sd_degenerate() (a single-CPU
// span) and sd_parent_degenerate() (a span equal to the child's) rolled into
// one rule. The worker alone is the span below the first level.
std::vector<kept_level> kept_levels(const std::vector<worker_place>& places, span_table& spans,
                                    std::size_t w) {
  const span_ref package = spans.of(pkg_candidate, w);
  std::vector<kept_level> kept;
  std::optional<span_ref> below;
  for (std::size_t i = 0; i < std::size(candidates); ++i) {
    const candidate& c = candidates[i];
    const span_ref span = spans.of(i, w);
    const std::size_t below_size = below ? spans.members(*below).size() : 1;
    bool keep = spans.members(span).size() > below_size && (!below || spans.inside(*below, span));
    // A NUMA node is a level of its own only inside a package (sub-NUMA
    // clustering). One that covers a whole package or several (the single
    // node of a plain machine) would hide the package level; the whole-machine
    // level already carries the cross-node boundary.
    if (c.level == sd_level::node && places[w].package >= 0) {
      keep = keep && spans.members(span).size() < spans.members(package).size() &&
             spans.inside(span, package);
    }
    if (!keep) {
      continue;
    }
    sd_level level = c.level;
    if (c.key == nullptr && spans.nr_nodes(span) > 1) {
      level = sd_level::numa;
    }
    below = span;
    kept.push_back({level, span});
  }
  return kept;
}

// The child span of worker x inside a domain of `level` spanning `span`: x's
// widest kept level below `level` that fits in `span`, else none (x alone).
// Using x's own chain (not the owner's) keeps every owner's view of a domain
// the same when cores hold different numbers of workers.
std::optional<span_ref> child_span(const std::vector<std::vector<kept_level>>& chains,
                                   span_table& spans, int x, sd_level level, span_ref span) {
  std::optional<span_ref> best;
  for (const kept_level& k : chains[static_cast<std::size_t>(x)]) {
    if (k.level >= level) {
      break;
    }
    if (spans.inside(k.span, span)) {
      best = k.span;
    }
  }
  return best;
}

// A domain as every worker holding it sees it; only local_group differs,
// looked up through group_of (the group of each worker of the span, by
// position in the span).
struct shared_domain {
  shared_list<int> span;
  shared_list<sched_group> groups;
  std::vector<std::size_t> group_of;
  unsigned flags = 0;
};

// Cuts the domain of `level` over `ref` into groups, in ascending order of
// first cpu. Each uncovered worker, taken in order, brings its child span
// less what is already covered; on any sane topology the child spans are
// disjoint and nothing is trimmed, and the trimming keeps the groups a
// partition when they are not. `covered` is scratch, one flag per worker,
// all clear on entry and on return.
shared_domain make_domain(const std::vector<std::vector<kept_level>>& chains, span_table& spans,
                          const std::vector<unsigned long>& capacity, sd_level level, span_ref ref,
                          std::vector<char>& covered) {
  const cpu_list& span = spans.members(ref);
  std::vector<sched_group> groups;
  std::vector<std::size_t> group_of(span.size(), 0);
  const auto take = [&](int y, sched_group& group) {
    if (covered[static_cast<std::size_t>(y)] != 0) return;
    covered[static_cast<std::size_t>(y)] = 1;
    group.cpus.push_back(y);
    group.capacity += capacity[static_cast<std::size_t>(y)];
    const auto at = std::lower_bound(span.begin(), span.end(), y) - span.begin();
    group_of[static_cast<std::size_t>(at)] = groups.size();
  };
  for (const int x : span) {
    if (covered[static_cast<std::size_t>(x)] != 0) {
      continue;
    }
    sched_group group;
    if (const auto child = child_span(chains, spans, x, level, ref)) {
      for (const int y : spans.members(*child)) take(y, group);
    } else {
      take(x, group);
    }
    groups.push_back(std::move(group));
  }
  for (const int x : span) covered[static_cast<std::size_t>(x)] = 0;

  shared_domain d;
  d.span = span;
  d.groups = std::move(groups);
  d.group_of = std::move(group_of);
  if (level == sd_level::smt) {
    d.flags |= SD_SHARE_CPUCAPACITY | SD_SHARE_PKG_RESOURCES;
  } else if (level == sd_level::llc) {
    d.flags |= SD_SHARE_PKG_RESOURCES;
  }
  if (spans.nr_nodes(ref) > 1) {
    d.flags |= SD_NUMA;
  }
  return d;
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

// The cores of every group of `sd` (init_sched_groups_capacity(), v6.6):
// a worker counts once for its SMT core, whose span is the narrowest
// SD_SHARE_CPUCAPACITY level of its own chain (itself without one).
std::vector<unsigned> cores_of_groups(const domain_tree& tree, const sched_domain& sd) {
  std::vector<unsigned> cores;
  cores.reserve(sd.groups.size());
  for (const sched_group& g : sd.groups) {
    unsigned n = 0;
    for (const int c : g.cpus) {
      int first = c;
      for (const sched_domain& own : tree.per_cpu[static_cast<std::size_t>(c)]) {
        if (own.has_flag(SD_SHARE_CPUCAPACITY)) first = own.span.front();
      }
      if (first == c) ++n;
    }
    cores.push_back(n);
  }
  return cores;
}

// link_levels() fills in what a domain knows of the levels around it: its
// child's flags, its groups' cores, and build_sched_domains()'s
// imb_numa_nr (v5.18). Balancers before v6 read none of it.
void link_levels(domain_tree& tree) {
  // One cores list per distinct group list, shared as the groups are.
  std::map<const sched_group*, shared_list<unsigned>> cores;
  for (std::vector<sched_domain>& chain : tree.per_cpu) {
    unsigned imb = 0;
    std::size_t imb_span = 1;
    for (std::size_t i = 0; i < chain.size(); ++i) {
      sched_domain& sd = chain[i];
      const sched_domain* child = i > 0 ? &chain[i - 1] : nullptr;
      sd.child_flags = child != nullptr ? child->flags : 0;
      auto it = cores.find(sd.groups.get().data());
      if (it == cores.end()) it = cores.emplace(sd.groups.get().data(), cores_of_groups(tree, sd)).first;
      sd.group_cores = it->second;

      // The first level above the LLC tolerates as many fibers as it has
      // LLCs before one LLC of a node shares its cache while another
      // node's idles (an eighth of its span if it has one LLC: SMT and
      // memory channels); wider levels scale that by how many first NUMA
      // levels they span.
      if (!sd.has_flag(SD_SHARE_PKG_RESOURCES) && child != nullptr && child->has_flag(SD_SHARE_PKG_RESOURCES)) {
        const std::size_t nr_llcs = sd.span.size() / child->span.size();
        imb = static_cast<unsigned>(nr_llcs == 1 ? sd.span.size() >> 3 : nr_llcs);
        imb = std::max(1U, imb);
        sd.imb_numa_nr = imb;
        imb_span = sd.span.size();
        for (std::size_t j = i + 1; j < chain.size(); ++j) {
          if (chain[j].has_flag(SD_NUMA)) {
            imb_span = chain[j].span.size();
            break;
          }
        }
      } else {
        const auto factor = std::max<std::size_t>(1, sd.span.size() / imb_span);
        sd.imb_numa_nr = static_cast<unsigned>(imb * factor);
      }
    }
  }
}

}  // namespace

domain_tree build_domains(const std::vector<detail::worker_place>& places) {
  domain_tree tree;
  const std::size_t n = places.size();
  tree.cpu_capacity.assign(n, capacity_scale);
  tree.cpu_node.resize(n);
  for (std::size_t w = 0; w < n; ++w) tree.cpu_node[w] = places[w].numa_node >= 0 ? places[w].numa_node : 0;
  tree.per_cpu.resize(n);

  // Every chain's spans first: a domain's groups are its workers' child
  // spans, so all chains must be known before any groups are cut.
  span_table spans(places);
  std::vector<std::vector<kept_level>> chains(n);
  for (std::size_t w = 0; w < n; ++w) {
    chains[w] = kept_levels(places, spans, w);
  }

  // Each distinct domain is cut into groups once, however many workers
  // hold it.
  std::map<span_ref, shared_domain> domains;
  std::vector<char> covered(n, 0);
  for (std::size_t w = 0; w < n; ++w) {
    tree.per_cpu[w].reserve(chains[w].size());
    for (const kept_level& k : chains[w]) {
      auto it = domains.find(k.span);
      if (it == domains.end()) {
        it = domains
                 .emplace(k.span, make_domain(chains, spans, tree.cpu_capacity, k.level, k.span, covered))
                 .first;
      }
      const shared_domain& d = it->second;
      sched_domain sd;
      sd.level = k.level;
      sd.span = d.span;
      sd.groups = d.groups;
      sd.flags = d.flags;
      // A kept level strictly widens the owner's child span, so the owner's
      // group cannot be the only one.
      assert(sd.groups.size() >= 2);
      const cpu_list& span = d.span;
      const auto at = std::lower_bound(span.begin(), span.end(), static_cast<int>(w)) - span.begin();
      sd.local_group = d.group_of[static_cast<std::size_t>(at)];
      const auto weight = static_cast<unsigned>(span.size());
      sd.imbalance_pct = imbalance_pct_for(sd.flags);
      sd.min_interval_ms = weight;
      sd.max_interval_ms = max_interval_per_min * weight;
      tree.per_cpu[w].push_back(std::move(sd));
    }
  }
  link_levels(tree);
  return tree;
}

}  // namespace usched
