// cpus.hpp: how many CPUs this process may use, and which, for the
// benchmark drivers.
#pragma once

#include <sched.h>

#include <thread>
#include <vector>

namespace bench {

// affinity_cpus() is how many CPUs the kernel may run this process's
// threads on (its affinity mask), or the online count when the mask cannot
// be read.
inline unsigned affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return static_cast<unsigned>(n);
  }
  const unsigned hc = std::thread::hardware_concurrency();
  return hc ? hc : 1;
}

// affinity_cpu_list() is the CPUs in this process's affinity mask,
// ascending (a driver pins its children to some of them), or 0..N-1 for
// affinity_cpus()'s N when the mask cannot be read.
inline std::vector<unsigned> affinity_cpu_list() {
  std::vector<unsigned> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (unsigned c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
  }
  if (cpus.empty()) {
    for (unsigned c = 0; c < affinity_cpus(); ++c) cpus.push_back(c);
  }
  return cpus;
}

}  // namespace bench
