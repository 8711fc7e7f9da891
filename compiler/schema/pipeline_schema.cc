#include "compiler/schema/pipeline_schema.h"

#include <algorithm>

#include "ops/registry.h"

namespace sluice {
namespace {

using nlohmann::json;

// A bound as an integer when it is one (so integer params read `"minimum": 1`).
json Bound(double v) {
  if (v == static_cast<double>(static_cast<int64_t>(v))) return static_cast<int64_t>(v);
  return v;
}

void AddRange(json& s, const ParamDef& def) {
  if (def.min) s["minimum"] = Bound(*def.min);
  if (def.max) s["maximum"] = Bound(*def.max);
}

json ElementSchema(const ParamDef& def, const char* type) {
  json s = {{"type", type}};
  AddRange(s, def);
  return s;
}

// An array of `item` whose length is one of `lengths` (any length when empty).
json ListSchema(const json& item, const std::vector<int>& lengths) {
  json s = {{"type", "array"}, {"items", item}};
  if (lengths.empty()) return s;
  std::vector<int> sorted = lengths;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  bool contiguous = sorted.back() - sorted.front() + 1 == static_cast<int>(sorted.size());
  if (contiguous) {
    s["minItems"] = sorted.front();
    s["maxItems"] = sorted.back();
  } else {
    json any = json::array();
    for (int n : sorted) any.push_back({{"minItems", n}, {"maxItems", n}});
    s["anyOf"] = any;
  }
  return s;
}

json ObjectSchema(const std::vector<ParamDef>& defs) {
  json props = json::object();
  json required = json::array();
  for (const ParamDef& def : defs) {
    props[def.name] = ParamSchema(def);
    if (def.required) required.push_back(def.name);
  }
  json s = {{"type", "object"}, {"properties", props}, {"additionalProperties", false}};
  if (!required.empty()) s["required"] = required;
  return s;
}

json SourceSchema(const OpDef& op) {
  json s = ObjectSchema(op.params);
  json props = {{"format", {{"const", op.name}, {"description", op.doc}}}};
  props.update(s["properties"]);
  s["properties"] = props;
  json required = {"format"};
  if (s.contains("required")) {
    for (const auto& r : s["required"]) required.push_back(r);
  }
  s["required"] = required;
  s["title"] = op.name;
  s["description"] = op.doc;
  return s;
}

json GraphOpSchema(const OpDef& op) {
  json s = ObjectSchema(op.params);
  const json name = {{"type", "string"}, {"pattern", "^[A-Za-z_][A-Za-z0-9_]*$"}};
  s["properties"]["in"] = {
      {"anyOf", {name, json{{"type", "array"}, {"items", name}, {"minItems", 1}}}},
      {"description", "tensor(s) this step reads; defaults to the previous step's output"}};
  json out = name;
  out["description"] = "name of the tensor this step writes; defaults to its input's name";
  s["properties"]["out"] = out;
  s["title"] = op.name;
  s["description"] = std::string(OpClassName(op.op_class)) + " op. " + op.doc;
  return s;
}

}  // namespace

json ParamValueJson(const ParamDef* def, const ParamValue& value) {
  if (def != nullptr && def->type == ParamType::kAutoInt &&
      std::holds_alternative<int64_t>(value.value) && value.AsInt() == -1) {
    return "auto";
  }
  struct Visitor {
    const ParamDef* def;
    json operator()(bool b) const { return b; }
    json operator()(int64_t i) const { return i; }
    json operator()(double d) const { return d; }
    json operator()(const std::string& s) const { return s; }
    json operator()(const std::vector<int64_t>& v) const { return v; }
    json operator()(const std::vector<double>& v) const { return v; }
    json operator()(const std::map<std::string, std::string>& m) const { return m; }
    json operator()(const ParamList& m) const {
      json out = json::object();
      for (const auto& [k, v] : m) {
        const ParamDef* field = nullptr;
        if (def != nullptr) {
          for (const ParamDef& f : def->fields) {
            if (f.name == k) field = &f;
          }
        }
        out[k] = ParamValueJson(field, v);
      }
      return out;
    }
  };
  return std::visit(Visitor{def}, value.value);
}

json ParamSchema(const ParamDef& def) {
  json s;
  switch (def.type) {
    case ParamType::kBool:
      s = {{"type", "boolean"}};
      break;
    case ParamType::kInt:
      s = ElementSchema(def, "integer");
      break;
    case ParamType::kFloat:
      s = ElementSchema(def, "number");
      break;
    case ParamType::kString:
      s = {{"type", "string"}};
      break;
    case ParamType::kEnum:
      s = {{"type", "string"}, {"enum", def.choices}};
      break;
    case ParamType::kIntList:
    case ParamType::kFloatList: {
      json item = ElementSchema(def, def.type == ParamType::kIntList ? "integer" : "number");
      json list = ListSchema(item, def.list_lengths);
      bool scalar_ok =
          std::find(def.list_lengths.begin(), def.list_lengths.end(), 1) != def.list_lengths.end();
      s = scalar_ok ? json{{"anyOf", {item, list}}} : list;
      break;
    }
    case ParamType::kAutoInt:
      s = {{"anyOf", {json{{"const", "auto"}}, ElementSchema(def, "integer")}}};
      break;
    case ParamType::kStringMap:
      s = {
          {"type", "object"}, {"additionalProperties", {{"type", "string"}}}, {"minProperties", 1}};
      break;
    case ParamType::kSection:
      s = ObjectSchema(def.fields);
      break;
  }
  if (!def.doc.empty()) s["description"] = def.doc;
  if (def.default_value) s["default"] = ParamValueJson(&def, *def.default_value);
  return s;
}

json PipelineSchema() {
  json sources = json::array();
  for (const OpDef* op : OpsOfClass(OpClass::kSource)) sources.push_back(SourceSchema(*op));

  json steps = json::array();
  json defs = json::object();
  for (const OpDef* op : AllOps()) {
    if (op->op_class == OpClass::kSource || op->op_class == OpClass::kBatch) continue;
    defs[op->name] = GraphOpSchema(*op);
    json ref = {{"$ref", "#/$defs/" + op->name}};
    steps.push_back({{"type", "object"},
                     {"properties", {{op->name, {{"anyOf", {ref, json{{"type", "null"}}}}}}}},
                     {"required", {op->name}},
                     {"additionalProperties", false}});
  }

  json batch = json::object();
  if (const OpDef* op = FindOp("batch")) {
    batch = ObjectSchema(op->params);
    batch["description"] = op->doc;
  }
  json sampling = ObjectSchema(SamplingParams());
  sampling["description"] = "How samples are ordered and split across ranks.";
  json output = ObjectSchema(OutputParams());
  if (output["properties"].contains("device")) {
    // The same forms CheckDeviceString accepts (a test keeps the two in step).
    output["properties"]["device"]["pattern"] = kDevicePattern;
  }
  output["description"] = "Where batches go and how many resources the loader may take.";

  json schema = {
      {"$schema", "https://json-schema.org/draft/2020-12/schema"},
      {"$id", "https://sluice.dev/schemas/pipeline.schema.json"},
      {"title", "Sluice pipeline spec"},
      {"description", "Generated by `sluice schema` from the op registry; do not edit by hand."},
      {"type", "object"},
      {"required", {"sluice", "name", "source", "graph", "batch"}},
      {"additionalProperties", false},
      {"properties",
       {{"sluice", {{"const", 1}, {"description", "spec language version"}}},
        {"name", {{"type", "string"}, {"description", "pipeline name"}}},
        {"source",
         {{"description", "where samples come from; `format` picks the source"},
          {"oneOf", sources}}},
        {"sampling", sampling},
        {"graph",
         {{"type", "array"},
          {"description",
           "per-sample DAG: one op per step; `in` defaults to the previous step's output"},
          {"items", {{"oneOf", steps}}}}},
        {"batch", batch},
        {"output", output}}},
      {"$defs", defs},
  };
  return schema;
}

std::string PipelineSchemaText() { return PipelineSchema().dump(2) + "\n"; }

}  // namespace sluice
