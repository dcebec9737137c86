// topology.hpp: the machine as hwloc describes it (this host, a synthetic
// description, or an XML file), reduced to what the scheduler needs: where
// each worker sits (PU, core, LLC, package, NUMA node) and how to pin it.
// This host is the part of it the loading thread's CPU affinity mask allows.
//
// hwloc stays inside topology.cpp; nothing here exposes its types.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <usched/worker_unit.hpp>

#include "domains.hpp"

namespace usched::detail {

class topology {
 public:
  // load() reads the topology from `source`: empty = this host; a path to an
  // existing regular file = hwloc XML; anything else = a hwloc synthetic
  // description such as "pack:2 l3:2 core:4 pu:2". A synthetic description
  // of more than max_workers PUs is refused before hwloc builds it, an XML
  // one once it is read. Throws usched::config_error whose one line begins
  // with `subject` (default "USCHED_TOPOLOGY='<source>'") and says what is
  // wrong in usched's words: no such file, a directory, not a regular file,
  // an empty file, not valid hwloc XML, not a valid synthetic description
  // (with hwloc's errno text), too many PUs.
  //
  // This host (source empty) is the PUs the calling thread's affinity mask
  // allows (sched_getaffinity, read once here), so taskset, numactl,
  // systemd's CPUAffinity= and a container's cpuset all narrow it; the caches,
  // cores, packages and NUMA nodes left are those holding an allowed PU. An
  // XML or synthetic source describes another machine and is taken whole.
  static topology load(const std::string& source, const std::string& subject = "");

  topology(topology&&) noexcept;
  topology& operator=(topology&&) noexcept;
  ~topology();

  // True when this describes the machine we run on (source was empty).
  bool is_host() const noexcept;
  // True when pinning to this topology's PUs makes sense on this host: it is
  // the host, or it has no more PUs than the host does. A larger synthetic
  // topology runs unpinned.
  bool pinnable() const noexcept;

  unsigned nr_pus() const noexcept;
  unsigned nr_cores() const noexcept;
  unsigned nr_llcs() const noexcept;
  unsigned nr_packages() const noexcept;
  unsigned nr_numa_nodes() const noexcept;
  // The PUs of the whole machine, before an affinity mask narrowed it; equal
  // to nr_pus() when nothing was narrowed.
  unsigned nr_machine_pus() const noexcept;

  // restrict_to_mask() narrows the topology to the PUs whose OS indices are
  // in `os_pus`, as load() does to this host with the thread's affinity mask:
  // a core, cache, package or NUMA node with no allowed PU is gone, a core
  // keeps only its allowed PUs, and logical indices are dense again, so
  // place_workers() and the domains see only what is left. OS indices the
  // topology does not have are ignored. Throws usched::config_error when no
  // PU of the topology is in `os_pus`. Call it before place_workers().
  void restrict_to_mask(const std::vector<unsigned>& os_pus);

  // place_workers() assigns `count` workers to units in logical order: worker
  // i gets PU i (worker_unit::pu) or core i (worker_unit::core), modulo the
  // number of units, so more workers than units share them round-robin (the
  // caller decides not to pin them). count == 0 means one worker per unit.
  // The units are those left after restrict_to_mask(): on a host narrowed by
  // its affinity mask, every worker, oversubscribed or not, is placed inside
  // the mask.
  // Throws usched::config_error, beginning with `subject` (how the worker
  // setting is named), when the topology has no units of that kind.
  std::vector<worker_place> place_workers(unsigned count, worker_unit unit,
                                          const std::string& subject = "") const;

  // The units place_workers() spreads workers over: PUs or cores.
  unsigned nr_units(worker_unit unit) const noexcept {
    return unit == worker_unit::core ? nr_cores() : nr_pus();
  }

  // bind_current_thread() pins the calling OS thread to the PU (or the whole
  // core's cpuset for worker_unit::core) of `place`. Returns false (and leaves
  // the thread unbound) when hwloc refuses, e.g. on a topology that is not
  // pinnable().
  bool bind_current_thread(const worker_place& place, worker_unit unit) const;

  // One readable line, e.g. "host: 1 package, 1 NUMA node, 1 LLC, 2 cores, 2 PUs"
  // or "synthetic 'pack:2 l3:2 core:4 pu:2': 2 packages, ...". A topology an
  // affinity mask narrowed says so: "host: ..., 1 PU; the affinity mask
  // allows 1 of the machine's 2 PUs (cpu list 1)".
  std::string describe() const;

 private:
  struct impl;
  explicit topology(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace usched::detail
