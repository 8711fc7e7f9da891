// plan.json format helpers (see plan_format.h).
#include "ops/fusion/plan_format.h"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace sluice::plan_format {

using json = nlohmann::json;

std::string HashBytes(std::string_view bytes) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a 64 offset basis
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;  // FNV 64 prime
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return std::string("fnv1a64:") + buf;
}

Result<std::string> HashFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return MakeError(ErrorCode::kNotFound, "cannot open `" + path + "`");
  std::ostringstream data;
  data << in.rdbuf();
  if (in.bad()) return MakeError(ErrorCode::kIo, "reading `" + path + "` failed");
  return HashBytes(data.str());
}

json TypeToJson(const TensorType& type) {
  return json{{"dtype", std::string(DTypeName(type.dtype))},
              {"layout", std::string(LayoutName(type.layout))},
              {"dims", type.dims},
              {"text", type.ToString()}};
}

Result<TensorType> TypeFromJson(const json& j) {
  auto bad = [&](const std::string& why) {
    return MakeError(ErrorCode::kInvalidArgument, "bad tensor type in plan.json: " + why);
  };
  if (!j.is_object() || !j.contains("dtype") || !j.contains("layout") || !j.contains("dims") ||
      !j["dtype"].is_string() || !j["layout"].is_string() || !j["dims"].is_array()) {
    return bad("needs dtype, layout (strings) and dims (array)");
  }
  TensorType type;
  auto dtype = ParseDType(j["dtype"].get<std::string>());
  if (!dtype) return bad("unknown dtype `" + j["dtype"].get<std::string>() + "`");
  auto layout = ParseLayout(j["layout"].get<std::string>());
  if (!layout) return bad("unknown layout `" + j["layout"].get<std::string>() + "`");
  type.dtype = *dtype;
  type.layout = *layout;
  for (const json& d : j["dims"]) {
    if (!d.is_number_integer()) return bad("dims must be integers");
    type.dims.push_back(d.get<int64_t>());
  }
  return type;
}

json ParamToJson(const ParamValue& value) {
  return std::visit(
      [](const auto& v) -> json {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, ParamList>) {
          return ParamsToJson(v);
        } else {
          return json(v);
        }
      },
      value.value);
}

json ParamsToJson(const ParamList& params) {
  json out = json::object();
  for (const auto& [name, value] : params) out[name] = ParamToJson(value);
  return out;
}

Result<ParamValue> ParamFromJson(const ParamDef& def, const json& j) {
  auto bad = [&](const std::string& expected) {
    return MakeError(ErrorCode::kInvalidArgument, "parameter `" + def.name +
                                                      "` in plan.json must be " + expected +
                                                      ", got " + j.dump());
  };
  switch (def.type) {
    case ParamType::kBool:
      if (!j.is_boolean()) return bad("a boolean");
      return ParamValue{j.get<bool>()};
    case ParamType::kInt:
    case ParamType::kAutoInt:
      if (!j.is_number_integer()) return bad("an integer");
      return ParamValue{j.get<int64_t>()};
    case ParamType::kFloat:
      if (!j.is_number()) return bad("a number");
      return ParamValue{j.get<double>()};
    case ParamType::kString:
    case ParamType::kEnum:
      if (!j.is_string()) return bad("a string");
      return ParamValue{j.get<std::string>()};
    case ParamType::kIntList: {
      if (!j.is_array()) return bad("a list of integers");
      std::vector<int64_t> v;
      for (const json& e : j) {
        if (!e.is_number_integer()) return bad("a list of integers");
        v.push_back(e.get<int64_t>());
      }
      return ParamValue{v};
    }
    case ParamType::kFloatList: {
      if (!j.is_array()) return bad("a list of numbers");
      std::vector<double> v;
      for (const json& e : j) {
        if (!e.is_number()) return bad("a list of numbers");
        v.push_back(e.get<double>());
      }
      return ParamValue{v};
    }
    case ParamType::kStringMap: {
      if (!j.is_object()) return bad("a map of strings");
      std::map<std::string, std::string> m;
      for (const auto& [k, e] : j.items()) {
        if (!e.is_string()) return bad("a map of strings");
        m[k] = e.get<std::string>();
      }
      return ParamValue{m};
    }
    case ParamType::kSection: {
      auto nested = ParamsFromJson(def.fields, j);
      if (!nested) return std::unexpected(nested.error());
      return ParamValue{*nested};
    }
  }
  return bad("a known parameter type");
}

Result<ParamList> ParamsFromJson(const std::vector<ParamDef>& defs, const json& j) {
  if (!j.is_object()) {
    return MakeError(ErrorCode::kInvalidArgument, "parameters in plan.json must be an object");
  }
  ParamList out;
  for (const auto& [name, value] : j.items()) {
    const ParamDef* def = nullptr;
    for (const ParamDef& d : defs) {
      if (d.name == name) def = &d;
    }
    if (def == nullptr) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "plan.json has parameter `" + name + "`, which this Sluice does not know",
                       "recompile the plan with this version of sluice");
    }
    auto v = ParamFromJson(*def, value);
    if (!v) return std::unexpected(v.error());
    out[name] = std::move(*v);
  }
  return out;
}

}  // namespace sluice::plan_format
