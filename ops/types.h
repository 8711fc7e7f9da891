// The tensor types (DType, Layout, TensorType) are part of the public API
// (a Batch's fields are typed by them): include/sluice/types.h. This header
// keeps the include path the op registry, the IR and the runtime use.
#pragma once

#include "sluice/types.h"
