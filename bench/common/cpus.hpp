// cpus.hpp: how many CPUs this process may use, for the benchmark drivers.
#pragma once

#include <sched.h>

#include <thread>

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

}  // namespace bench
