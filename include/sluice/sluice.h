// Umbrella header of Sluice's public C++ API: plans, loaders, batches, errors.
#pragma once

#include "sluice/batch.h"
#include "sluice/loader.h"
#include "sluice/plan.h"
#include "sluice/result.h"
