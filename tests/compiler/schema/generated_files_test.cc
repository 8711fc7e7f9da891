// The generated files checked into the repository must match what the
// generators produce now, and the schema must accept real specs and reject
// broken ones.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "compiler/schema/op_reference.h"
#include "compiler/schema/pipeline_schema.h"
#include "ops/registry.h"

namespace sluice {
namespace {

using nlohmann::json;

std::string ReadSource(const std::string& relative) {
  std::ifstream in(std::string(SLUICE_SOURCE_DIR) + "/" + relative, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(GeneratedFilesTest, CheckedInSchemaIsCurrent) {
  std::string on_disk = ReadSource("schemas/pipeline.schema.json");
  EXPECT_TRUE(on_disk == PipelineSchemaText())
      << "schemas/pipeline.schema.json is stale (the op registry changed); regenerate it with:\n"
         "  build/sluice schema -o schemas/pipeline.schema.json";
}

TEST(GeneratedFilesTest, CheckedInOpReferenceIsCurrent) {
  std::string doc = ReadSource("docs/spec.md");
  Result<std::string> section = ExtractGenerated(doc);
  ASSERT_TRUE(section.has_value()) << "docs/spec.md: " << section.error().message;
  EXPECT_TRUE(*section == OpReferenceMarkdown())
      << "the op reference in docs/spec.md is stale (the op registry changed); regenerate it "
         "with:\n  build/sluice ops --markdown --splice docs/spec.md";
}

TEST(GeneratedFilesTest, SpliceReplacesOnlyBetweenMarkers) {
  std::string doc = std::string("# Title\nintro\n") + kGeneratedBegin + "\nold\ntext\n" +
                    kGeneratedEnd + "\ntail\n";
  Result<std::string> out = SpliceGenerated(doc, "new\n");
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(*out, std::string("# Title\nintro\n") + kGeneratedBegin + "\nnew\n" + kGeneratedEnd +
                      "\ntail\n");
  EXPECT_EQ(*ExtractGenerated(*out), "new\n");
  EXPECT_FALSE(ExtractGenerated("no markers here").has_value());
  EXPECT_FALSE(ExtractGenerated(std::string(kGeneratedBegin) + "\nx\n").has_value());
}

TEST(GeneratedFilesTest, OpReferenceDocumentsEveryOpAndParam) {
  std::string md = OpReferenceMarkdown();
  for (const OpDef* op : AllOps()) {
    EXPECT_NE(md.find("#### `" + op->name + "`"), std::string::npos) << op->name;
    for (const ParamDef& p : op->params) {
      EXPECT_NE(md.find("| `" + p.name + "` |"), std::string::npos) << op->name << "." << p.name;
    }
  }
  for (const ParamDef& p : OutputParams())
    EXPECT_NE(md.find("| `" + p.name + "` |"), std::string::npos);
  for (const ParamDef& p : SamplingParams()) {
    EXPECT_NE(md.find("| `" + p.name + "` |"), std::string::npos);
  }
}

// ---- a small JSON Schema (2020-12 subset) validator for the tests below -----
// Supports exactly the keywords the generator emits; an unknown keyword fails
// the test so that the subset cannot silently fall behind the generator.
class Validator {
 public:
  explicit Validator(const json& root) : root_(root) {}

  bool Valid(const json& schema, const json& v, std::string& why) const {
    static const std::set<std::string> known = {"$schema",
                                                "$id",
                                                "$defs",
                                                "$ref",
                                                "title",
                                                "description",
                                                "default",
                                                "type",
                                                "properties",
                                                "required",
                                                "additionalProperties",
                                                "enum",
                                                "const",
                                                "oneOf",
                                                "anyOf",
                                                "items",
                                                "minItems",
                                                "maxItems",
                                                "minimum",
                                                "maximum",
                                                "pattern",
                                                "minProperties"};
    for (const auto& [k, _] : schema.items()) {
      if (!known.contains(k)) {
        why = "validator does not know keyword " + k;
        ADD_FAILURE() << why;
        return false;
      }
    }
    if (schema.contains("$ref")) {
      std::string ref = schema["$ref"];
      const std::string prefix = "#/$defs/";
      if (!ref.starts_with(prefix)) return Fail(why, "bad $ref " + ref);
      if (!Valid(root_["$defs"][ref.substr(prefix.size())], v, why)) return false;
    }
    if (schema.contains("type") && !TypeOk(schema["type"], v)) {
      return Fail(why, v.dump() + " is not of type " + schema["type"].dump());
    }
    if (schema.contains("const") && v != schema["const"]) {
      return Fail(why, v.dump() + " != " + schema["const"].dump());
    }
    if (schema.contains("enum")) {
      bool found = false;
      for (const auto& e : schema["enum"]) found = found || e == v;
      if (!found) return Fail(why, v.dump() + " not in " + schema["enum"].dump());
    }
    if (v.is_number()) {
      if (schema.contains("minimum") && v.get<double>() < schema["minimum"].get<double>()) {
        return Fail(why, v.dump() + " < minimum");
      }
      if (schema.contains("maximum") && v.get<double>() > schema["maximum"].get<double>()) {
        return Fail(why, v.dump() + " > maximum");
      }
    }
    if (v.is_string() && schema.contains("pattern") &&
        !std::regex_search(v.get<std::string>(),
                           std::regex(schema["pattern"].get<std::string>()))) {
      return Fail(why, v.dump() + " does not match " + schema["pattern"].dump());
    }
    if (v.is_array()) {
      if (schema.contains("minItems") && v.size() < schema["minItems"].get<size_t>()) {
        return Fail(why, v.dump() + " too short");
      }
      if (schema.contains("maxItems") && v.size() > schema["maxItems"].get<size_t>()) {
        return Fail(why, v.dump() + " too long");
      }
      if (schema.contains("items")) {
        for (const auto& e : v) {
          if (!Valid(schema["items"], e, why)) return false;
        }
      }
    }
    if (v.is_object()) {
      if (schema.contains("minProperties") && v.size() < schema["minProperties"].get<size_t>()) {
        return Fail(why, "too few properties");
      }
      if (schema.contains("required")) {
        for (const auto& r : schema["required"]) {
          if (!v.contains(r.get<std::string>())) return Fail(why, "missing " + r.dump());
        }
      }
      const json props = schema.value("properties", json::object());
      for (const auto& [k, e] : v.items()) {
        if (props.contains(k)) {
          if (!Valid(props[k], e, why)) {
            why = k + ": " + why;
            return false;
          }
        } else if (schema.contains("additionalProperties")) {
          const json& ap = schema["additionalProperties"];
          if (ap.is_boolean() && !ap.get<bool>()) return Fail(why, "unexpected key " + k);
          if (ap.is_object() && !Valid(ap, e, why)) return false;
        }
      }
    }
    if (schema.contains("anyOf")) {
      bool any = false;
      std::string sub;
      for (const auto& s : schema["anyOf"]) any = any || Valid(s, v, sub);
      if (!any) return Fail(why, v.dump() + " matches no anyOf branch (" + sub + ")");
    }
    if (schema.contains("oneOf")) {
      int n = 0;
      std::string sub, last;
      for (const auto& s : schema["oneOf"]) {
        if (Valid(s, v, sub)) {
          ++n;
        } else {
          last = sub;
        }
      }
      if (n != 1) {
        return Fail(why, v.dump().substr(0, 80) + " matches " + std::to_string(n) +
                             " oneOf branches" + (n == 0 ? " (" + last + ")" : ""));
      }
    }
    return true;
  }

 private:
  static bool Fail(std::string& why, std::string message) {
    why = std::move(message);
    return false;
  }
  static bool TypeOk(const json& type, const json& v) {
    std::string t = type;
    if (t == "object") return v.is_object();
    if (t == "array") return v.is_array();
    if (t == "string") return v.is_string();
    if (t == "boolean") return v.is_boolean();
    if (t == "integer") return v.is_number_integer();
    if (t == "number") return v.is_number();
    if (t == "null") return v.is_null();
    return false;
  }
  const json& root_;
};

// YAML as JSON, reading plain scalars as YAML 1.2 core types would.
json YamlToJson(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& e : n) a.push_back(YamlToJson(e));
      return a;
    }
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : n) o[kv.first.Scalar()] = YamlToJson(kv.second);
      return o;
    }
    case YAML::NodeType::Scalar: {
      const std::string& s = n.Scalar();
      if (n.Tag() == "!") return s;  // quoted
      if (s == "true") return true;
      if (s == "false") return false;
      if (std::regex_match(s, std::regex("-?[0-9]+"))) return std::stoll(s);
      if (std::regex_match(s, std::regex("-?[0-9]*\\.?[0-9]+([eE][-+]?[0-9]+)?"))) {
        return std::stod(s);
      }
      return s;
    }
  }
  return nullptr;
}

class SchemaTest : public ::testing::Test {
 protected:
  SchemaTest() : schema_(json::parse(ReadSource("schemas/pipeline.schema.json"), nullptr, false)) {}
  bool Accepts(const std::string& yaml, std::string& why) {
    return Validator(schema_).Valid(schema_, YamlToJson(YAML::Load(yaml)), why);
  }
  json schema_;
};

TEST_F(SchemaTest, IsValidJsonDraft2020) {
  ASSERT_FALSE(schema_.is_discarded()) << "schemas/pipeline.schema.json is not valid JSON";
  EXPECT_EQ(schema_["$schema"], "https://json-schema.org/draft/2020-12/schema");
  EXPECT_EQ(schema_["type"], "object");
}

TEST_F(SchemaTest, CoversEveryOpAndSection) {
  ASSERT_FALSE(schema_.is_discarded());
  std::set<std::string> formats;
  for (const auto& s : schema_["properties"]["source"]["oneOf"]) {
    formats.insert(s["properties"]["format"]["const"].get<std::string>());
  }
  for (const OpDef* op : AllOps()) {
    std::vector<ParamDef> params = op->params;
    json props;
    if (op->op_class == OpClass::kSource) {
      EXPECT_TRUE(formats.contains(op->name)) << op->name;
      continue;
    } else if (op->op_class == OpClass::kBatch) {
      props = schema_["properties"]["batch"]["properties"];
    } else {
      ASSERT_TRUE(schema_["$defs"].contains(op->name)) << op->name;
      props = schema_["$defs"][op->name]["properties"];
      EXPECT_TRUE(props.contains("in") && props.contains("out")) << op->name;
    }
    for (const ParamDef& p : params) {
      ASSERT_TRUE(props.contains(p.name)) << op->name << "." << p.name;
      EXPECT_EQ(props[p.name].value("description", ""), p.doc) << op->name << "." << p.name;
      if (p.type == ParamType::kEnum) {
        EXPECT_EQ(props[p.name]["enum"].get<std::vector<std::string>>(), p.choices);
      }
    }
  }
  for (const ParamDef& p : SamplingParams()) {
    EXPECT_TRUE(schema_["properties"]["sampling"]["properties"].contains(p.name)) << p.name;
  }
  for (const ParamDef& p : OutputParams()) {
    EXPECT_TRUE(schema_["properties"]["output"]["properties"].contains(p.name)) << p.name;
  }
}

TEST_F(SchemaTest, AcceptsExamplesAndGoldenSpecs) {
  ASSERT_FALSE(schema_.is_discarded());
  int checked = 0;
  for (const char* dir : {"examples", "tests/compiler/golden"}) {
    for (const auto& entry :
         std::filesystem::directory_iterator(std::string(SLUICE_SOURCE_DIR) + "/" + dir)) {
      if (entry.path().extension() != ".yaml") continue;
      std::ifstream in(entry.path());
      std::stringstream text;
      text << in.rdbuf();
      YAML::Node doc = YAML::Load(text.str());
      if (!doc["graph"]) continue;  // not a pipeline spec (e.g. a hardware profile)
      std::string why;
      EXPECT_TRUE(Accepts(text.str(), why)) << entry.path() << ": " << why;
      ++checked;
    }
  }
  EXPECT_GE(checked, 7);
}

TEST_F(SchemaTest, RejectsBrokenSpecs) {
  ASSERT_FALSE(schema_.is_discarded());
  const std::string head = "sluice: 1\nname: t\nsource: {format: image_folder, path: /d}\n";
  const std::string tail = "batch: {size: 4, fields: {image: image, label: cls}}\n";
  std::string why;
  EXPECT_TRUE(Accepts(head + "graph:\n  - decode_jpeg: {in: jpg, out: image}\n" + tail, why))
      << why;
  EXPECT_TRUE(Accepts(head + "graph:\n  - decode_jpeg:\n" + tail, why)) << why;
  // Unknown op, misspelled param, bad enum, out-of-range value, wrong list length.
  EXPECT_FALSE(Accepts(head + "graph:\n  - random_resize_crop: {size: 224}\n" + tail, why));
  EXPECT_FALSE(Accepts(head + "graph:\n  - decode_jpeg: {colour: rgb}\n" + tail, why));
  EXPECT_FALSE(Accepts(head + "graph:\n  - decode_jpeg: {color: cmyk}\n" + tail, why));
  EXPECT_FALSE(Accepts(head + "graph:\n  - center_crop: {size: 0}\n" + tail, why));
  EXPECT_FALSE(Accepts(head + "graph:\n  - center_crop: {size: [1, 2, 3]}\n" + tail, why));
  EXPECT_FALSE(Accepts(head + "graph:\n  - center_crop: {out: a.b, size: 3}\n" + tail, why));
  // Unknown source format, missing required path, unknown top-level key, bad device.
  EXPECT_FALSE(
      Accepts("sluice: 1\nname: t\nsource: {format: tarball, path: /d}\ngraph: []\n" + tail, why));
  EXPECT_FALSE(
      Accepts("sluice: 1\nname: t\nsource: {format: image_folder}\ngraph: []\n" + tail, why));
  EXPECT_FALSE(Accepts(head + "graph: []\n" + tail + "bogus: 1\n", why));
  EXPECT_FALSE(Accepts(head + "graph: []\n" + tail + "output: {device: gpu}\n", why));
  EXPECT_TRUE(Accepts(head + "graph: []\n" + tail + "output: {device: cuda:1, threads: 8}\n", why))
      << why;
  EXPECT_FALSE(Accepts(head + "graph: []\n" + tail + "output: {threads: many}\n", why));
}

TEST(PipelineSchemaTest, DevicePatternMatchesCheckDeviceString) {
  std::regex pattern(kDevicePattern);
  for (const char* d : {"auto", "cpu", "cuda", "cuda:0", "cuda:12", "gpu", "cuda:", "cuda:x", "CPU",
                        "cuda:-1", "cuda:1 "}) {
    EXPECT_EQ(std::regex_search(std::string(d), pattern), CheckDeviceString(d).has_value()) << d;
  }
}

TEST(PipelineSchemaTest, ParamSchemaShapes) {
  ParamDef size{.name = "size", .type = ParamType::kIntList, .doc = "d", .min = 1};
  size.list_lengths = {1, 2};
  json s = ParamSchema(size);
  ASSERT_TRUE(s.contains("anyOf"));  // a scalar is accepted for length-1 lists
  EXPECT_EQ(s["anyOf"][0]["type"], "integer");
  EXPECT_EQ(s["anyOf"][1]["minItems"], 1);
  EXPECT_EQ(s["anyOf"][1]["maxItems"], 2);
  EXPECT_EQ(s["description"], "d");

  ParamDef pad{.name = "padding", .type = ParamType::kIntList};
  pad.list_lengths = {2, 4};
  s = ParamSchema(pad);
  EXPECT_FALSE(s.contains("minItems"));
  ASSERT_TRUE(s.contains("anyOf"));
  EXPECT_EQ(s["anyOf"].size(), 2u);

  ParamDef threads{.name = "threads", .type = ParamType::kAutoInt};
  threads.default_value = ParamValue{int64_t{-1}};
  s = ParamSchema(threads);
  EXPECT_EQ(s["default"], "auto");
}

}  // namespace
}  // namespace sluice
