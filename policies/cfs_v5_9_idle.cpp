// cfs_v5_9_idle.cpp: `cfs-v5.9-idle`, candidate fix C of
// seeds/000 (Rik van Riel): v5.9, except that detach skips the util check
// when the destination is idle (env->idle != CPU_NOT_IDLE), so an idle
// worker takes a CPU-bound fiber whatever its util.
//
// In the thread it brought p99 back to 761 us, but Vincent rejected it as
// too aggressive above the LLC: it throws away util-based balancing between
// packages and NUMA nodes whenever the puller is idle.
#include "cfs_family.hpp"

namespace usched {

std::unique_ptr<policy> make_cfs_v5_9_idle() {
  return std::make_unique<cfs_policy>("cfs-v5.9-idle",
                                      with(cfs_v5_9_features(), &cfs_features::idle_skips_util_check, true));
}

}  // namespace usched
