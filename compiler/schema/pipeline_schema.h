// The pipeline spec's JSON Schema (draft 2020-12), generated from the op
// registry so that it can never disagree with what the compiler accepts.
//
// `sluice schema -o schemas/pipeline.schema.json` writes it; a test fails when
// the checked-in copy is stale. Editors (YAML language servers) validate specs
// with it: top-level keys, `source` as a oneOf keyed by `format`, each `graph`
// step as a one-key object naming the op, with the op's params plus `in`/`out`,
// and `batch`, `sampling`, `output` from their declarations. Every parameter
// carries its type, range, choices, allowed list lengths, default and doc.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ops/param.h"

namespace sluice {

// The pattern `output.device` must match in the schema: what
// CheckDeviceString accepts (auto, cpu, cuda, cuda:N).
inline constexpr const char* kDevicePattern = "^(auto|cpu|cuda(:[0-9]+)?)$";

// The schema object.
nlohmann::json PipelineSchema();
// The schema as written to disk: 2-space indented JSON plus a final newline.
std::string PipelineSchemaText();

// The schema of one parameter (exposed for tests).
nlohmann::json ParamSchema(const ParamDef& def);
// A parameter value as JSON (kAutoInt -1 as "auto" when `def` says kAutoInt).
nlohmann::json ParamValueJson(const ParamDef* def, const ParamValue& value);

}  // namespace sluice
