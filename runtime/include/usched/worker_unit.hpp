// usched/worker_unit.hpp: what one worker is bound to. Its own header so
// that the topology layer, which places workers on units, shares the one
// definition options::unit uses without taking in the rest of the options.
#pragma once

namespace usched {

// What one worker is bound to.
enum class worker_unit {
  pu,    // one worker per processing unit (hardware thread)
  core,  // one worker per core, bound to all of the core's PUs
};

}  // namespace usched
