// usched/usched.hpp: the whole public API.
//
//   usched::runtime rt;                       // workers per USCHED_* settings
//   int v = rt.run([] {                       // a fiber; blocks until it returns
//     auto h = usched::spawn([] { return 41; });
//     return h.join() + 1;
//   });
#pragma once

#include <usched/barrier.hpp>
#include <usched/blocking.hpp>
#include <usched/channel.hpp>
#include <usched/condition_variable.hpp>
#include <usched/error.hpp>
#include <usched/fiber.hpp>
#include <usched/fiber_local.hpp>
#include <usched/future.hpp>
#include <usched/latch.hpp>
#include <usched/mutex.hpp>
#include <usched/options.hpp>
#include <usched/runtime.hpp>
#include <usched/select.hpp>
#include <usched/semaphore.hpp>
#include <usched/shared_mutex.hpp>
#include <usched/task_group.hpp>
#include <usched/wait_group.hpp>
#include <usched/wake_reason.hpp>
#include <usched/worker_unit.hpp>

