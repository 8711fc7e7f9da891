// The plan.json format pieces shared by the plan writer (compiler/plan) and the
// plan loader (runtime/plan): the format version, the content hash, and the
// JSON forms of tensor types and parameter values.
//
// JSON forms:
//   TensorType  {"dtype": "uint8", "layout": "HWC", "dims": [-1, -1, 3], "text": "uint8[?,?,3] HWC"}
//               (dims: -1 = known only at run time; "text" is informative)
//   ParamValue  bool / integer / number / string / array / object, by its variant;
//               kAutoInt "auto" is -1, as in the IR.
// Reading a ParamValue is guided by its ParamDef (the registry's declaration),
// so that the value read equals the value the front end made (an int written
// for a kFloat parameter reads back as a double, and so on).
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ops/param.h"
#include "ops/types.h"
#include "sluice/result.h"

namespace sluice::plan_format {

// Bumped whenever plan.json changes incompatibly; a loader accepts only its own.
// 2: the kernel ABI's per-step draw slots (draw0..draw15) replace the fixed
//    brightness / contrast / saturation arguments (ops/fusion/kernel_abi.h).
inline constexpr int kFormatVersion = 2;
inline constexpr const char* kPlanFile = "plan.json";
inline constexpr const char* kKernelsFile = "kernels.so";
inline constexpr const char* kReportFile = "report.txt";

// "fnv1a64:<16 hex digits>": 64-bit FNV-1a of `bytes` (detects a changed or
// truncated file; not a defence against tampering).
std::string HashBytes(std::string_view bytes);
// HashBytes of a file's content. Errors: kNotFound, kIo.
Result<std::string> HashFile(const std::string& path);

nlohmann::json TypeToJson(const TensorType& type);
Result<TensorType> TypeFromJson(const nlohmann::json& j);

nlohmann::json ParamToJson(const ParamValue& value);
nlohmann::json ParamsToJson(const ParamList& params);
// `def` gives the expected type; errors (kInvalidArgument) name the parameter.
Result<ParamValue> ParamFromJson(const ParamDef& def, const nlohmann::json& j);
// Every entry of the object `j`, each declared in `defs`.
Result<ParamList> ParamsFromJson(const std::vector<ParamDef>& defs, const nlohmann::json& j);

}  // namespace sluice::plan_format
