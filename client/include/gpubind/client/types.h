// The step's request and plan as the plugin holds them: the compact transport's client types.
#pragma once

#include "gpubind/protocol/step.h"

namespace gpubind::client {

using protocol::FixedTask;
using protocol::GpuPlace;
using protocol::StepPlan;
using protocol::StepRequest;
using protocol::TaskBinding;
using protocol::TaskEnv;
using protocol::TaskGpuInfo;

}  // namespace gpubind::client
