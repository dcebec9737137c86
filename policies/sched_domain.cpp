// sched_domain.cpp: names and the readable form of a domain tree.
#include "sched_domain.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace usched {

namespace {

using cpu_list = std::vector<int>;

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

std::string domain_tree::describe() const {
  // Many workers share each domain; list every (level, span) once, narrowest
  // level first, then by first worker. Workers holding one domain share its
  // span's storage, which makes it one key without comparing spans.
  using domain_key = std::tuple<sd_level, int, std::size_t, const int*>;
  std::map<domain_key, const sched_domain*> distinct;
  for (const auto& chain : per_cpu) {
    for (const sched_domain& sd : chain) {
      distinct.emplace(domain_key{sd.level, sd.span.front(), sd.span.size(), sd.span.get().data()}, &sd);
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
