// plan.json and report.txt for the example specs, without running the code
// generator (the kernel record is made up): plan.json must conform to
// schemas/plan.schema.json and carry the fusion group as the passes formed it.
#include "compiler/plan/plan_writer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "compiler/cost/cost_model.h"
#include "compiler/driver/compile_spec.h"
#include "compiler/ir/ir.h"
#include "compiler/passes/pass.h"
#include "compiler/spec/diagnostics.h"
#include "compiler/spec/spec.h"
#include "ops/fusion/plan_format.h"
#include "tests/compiler/plan/plan_test_specs.h"
#include "tests/compiler/synthetic_profile.h"

namespace sluice {
namespace {

using json = nlohmann::json;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Graph CompileExample(const std::string& name, std::string* text) {
  const std::string path = std::string(SLUICE_SOURCE_DIR) + "/examples/" + name;
  *text = ReadFile(path);
  auto graph = CheckedGraph(*text, name);  // the compile driver
  EXPECT_TRUE(graph.has_value()) << graph.error().ToString();
  return graph ? std::move(*graph) : Graph{};
}

KernelRecord FakeKernels() {
  KernelRecord k;
  k.artifact.cpu_targets = {"x86-64-linux-sse41"};
  k.artifact.kernels = {{"sluice_chain_0", "sluice_chain_0_cuda"}};
  k.artifact.cuda_target = "x86-64-linux-cuda-cuda_capability_80";
  k.artifact.arg_names = {"y.flip", "x.flip", "fill"};
  k.hash = plan_format::HashBytes("not a library");
  k.bytes = 13;
  return k;
}

// A structural JSON Schema check: type, required, properties, items, $ref
// (#/$defs/...), enum, const, pattern, minimum. Appends "path: problem" lines.
void Check(const json& schema, const json& root, const json& v, const std::string& path,
           std::vector<std::string>& problems) {
  if (schema.contains("$ref")) {
    std::string ref = schema["$ref"].get<std::string>();
    const std::string prefix = "#/$defs/";
    ASSERT_TRUE(ref.starts_with(prefix)) << ref;
    Check(root["$defs"][ref.substr(prefix.size())], root, v, path, problems);
    return;
  }
  auto is = [&](const std::string& t) {
    if (t == "object") return v.is_object();
    if (t == "array") return v.is_array();
    if (t == "string") return v.is_string();
    if (t == "integer") return v.is_number_integer();
    if (t == "number") return v.is_number();
    if (t == "boolean") return v.is_boolean();
    if (t == "null") return v.is_null();
    return false;
  };
  if (schema.contains("type")) {
    bool ok = false;
    if (schema["type"].is_array()) {
      for (const json& t : schema["type"]) ok = ok || is(t.get<std::string>());
    } else {
      ok = is(schema["type"].get<std::string>());
    }
    if (!ok) {
      problems.push_back(path + ": expected " + schema["type"].dump() + ", got " + v.dump());
      return;
    }
  }
  if (schema.contains("const") && v != schema["const"]) {
    problems.push_back(path + ": expected " + schema["const"].dump());
  }
  if (schema.contains("enum")) {
    bool found = false;
    for (const json& e : schema["enum"]) found = found || e == v;
    if (!found) problems.push_back(path + ": " + v.dump() + " not in " + schema["enum"].dump());
  }
  if (schema.contains("pattern") && v.is_string() &&
      !std::regex_search(v.get<std::string>(), std::regex(schema["pattern"].get<std::string>()))) {
    problems.push_back(path + ": " + v.dump() + " does not match " + schema["pattern"].dump());
  }
  if (schema.contains("minimum") && v.is_number() &&
      v.get<double>() < schema["minimum"].get<double>()) {
    problems.push_back(path + ": below minimum");
  }
  if (v.is_object()) {
    for (const json& key : schema.value("required", json::array())) {
      if (!v.contains(key.get<std::string>())) {
        problems.push_back(path + ": missing required `" + key.get<std::string>() + "`");
      }
    }
    if (schema.contains("properties")) {
      for (const auto& [key, sub] : schema["properties"].items()) {
        if (v.contains(key)) Check(sub, root, v[key], path + "." + key, problems);
      }
    }
  }
  if (v.is_array() && schema.contains("items")) {
    for (size_t i = 0; i < v.size(); ++i) {
      Check(schema["items"], root, v[i], path + "[" + std::to_string(i) + "]", problems);
    }
  }
}

std::vector<std::string> Validate(const json& plan) {
  json schema = json::parse(ReadFile(std::string(SLUICE_SOURCE_DIR) + "/schemas/plan.schema.json"));
  std::vector<std::string> problems;
  Check(schema, schema, plan, "$", problems);
  return problems;
}

std::string Lines(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += s + "\n";
  return out;
}

TEST(PlanWriter, ImagenetTrainConformsToTheSchema) {
  std::string text;
  Graph graph = CompileExample("imagenet_train.yaml", &text);
  json plan = PlanJson(graph, text, FakeKernels());
  std::vector<std::string> problems = Validate(plan);
  EXPECT_TRUE(problems.empty()) << Lines(problems);

  EXPECT_EQ(plan["format_version"], plan_format::kFormatVersion);
  EXPECT_EQ(plan["spec_hash"], plan_format::HashBytes(text));
  EXPECT_EQ(plan["name"], "imagenet_train");
  EXPECT_EQ(plan["source"]["format"], "image_folder");
  EXPECT_EQ(plan["source"]["params"]["path"], "${DATA}/train");  // still symbolic
  EXPECT_EQ(plan["batch"]["size"], 256);
  ASSERT_EQ(plan["fusion_groups"].size(), 1u);
  const json& g = plan["fusion_groups"][0];
  EXPECT_EQ(g["symbol"], "sluice_chain_0");
  EXPECT_EQ(g["cuda_symbol"], "sluice_chain_0_cuda");
  EXPECT_EQ(g["nodes"], json({2, 3, 4, 5, 6}));
  EXPECT_EQ(g["input"], "image");
  EXPECT_EQ(g["output"], "image.5");
  EXPECT_EQ(g["batch_field"], "image");
  EXPECT_EQ(g["output_type"]["dims"], json({3, 224, 224}));
  EXPECT_EQ(g["input_type"]["dims"], json({-1, -1, 3}));
  EXPECT_EQ(g["steps"][0]["op"], "random_resized_crop");
  EXPECT_EQ(g["steps"][0]["params"]["size"], json({224, 224}));
  EXPECT_EQ(g["abi"]["args"], json({"y.flip", "x.flip", "fill"}));
  EXPECT_EQ(plan["graph"]["nodes"][2]["group"], 0);
  EXPECT_EQ(plan["graph"]["nodes"][1]["group"], -1);
  EXPECT_EQ(plan["placement"]["requested"], "auto");
  EXPECT_EQ(plan["placement"]["device"], "cpu");
  EXPECT_NE(plan["placement"]["reason"].get<std::string>().find("no hardware profile"),
            std::string::npos);
  EXPECT_TRUE(plan["placement"]["predicted"].is_null());
  EXPECT_EQ(g["gpu_from"], -1);
  EXPECT_TRUE(g["staging_type"].is_null());
  EXPECT_TRUE(g["gpu_batch_symbol"].is_null());
}

TEST(PlanWriter, SchemaCheckCatchesAMissingKey) {
  std::string text;
  Graph graph = CompileExample("imagenet_eval.yaml", &text);
  json plan = PlanJson(graph, text, FakeKernels());
  EXPECT_TRUE(Validate(plan).empty()) << Lines(Validate(plan));
  plan["fusion_groups"][0].erase("symbol");
  plan["kernels"]["hash"] = "md5:abc";
  std::vector<std::string> problems = Validate(plan);
  EXPECT_EQ(problems.size(), 2u) << Lines(problems);
}

TEST(PlanWriter, ReportStatesGroupsPushdownAndCostModel) {
  std::string text;
  Graph graph = CompileExample("imagenet_eval.yaml", &text);
  std::string report = PlanReport(graph, FakeKernels());
  EXPECT_NE(report.find("fusion groups: 1"), std::string::npos) << report;
  EXPECT_NE(report.find("resize (line"), std::string::npos) << report;
  EXPECT_NE(report.find("center_crop (line"), std::string::npos) << report;
  EXPECT_NE(report.find("float32[3,224,224] CHW, written straight into batch field `image`"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("region of interest"), std::string::npos) << report;
  EXPECT_NE(
      report.find(
          "DCT-scaled decode (1/2, 1/4, 1/8) of large downscales is available but off by default"),
      std::string::npos)
      << report;
  EXPECT_NE(report.find("cost model: no hardware profile given"), std::string::npos) << report;
  EXPECT_NE(report.find("placement: every stage on cpu; output.device is cpu"), std::string::npos)
      << report;
}

// The profile CompilePlaced placed with (the plan writer states its prediction).
HardwareProfile g_placed_profile;

// The train example placed with a fast GPU and one core (see placement_test.cc).
Graph CompilePlaced(std::string* text, int cpu_budget, double gpu_gelem_per_s = 300) {
  const std::string path = std::string(SLUICE_SOURCE_DIR) + "/examples/imagenet_train.yaml";
  *text = ReadFile(path);
  Diagnostics diags;
  Spec spec = ParseSpecText(*text, "imagenet_train.yaml", diags);
  Graph graph = BuildGraph(spec);
  HardwareProfile p = testing_profile::SyntheticCpu();
  p.cpu.memory_bandwidth_gbps = 0;  // no memory term
  p.cpu.pointwise_ns_per_elem = 2;  // a costly tail: the split clears placement's margin
  p.gpu = testing_profile::SyntheticGpu("g", gpu_gelem_per_s);
  g_placed_profile = p;
  PassContext context{diags, &g_placed_profile, cpu_budget};
  context.predict = CostModelPredictor(g_placed_profile);
  EXPECT_TRUE(RunPasses(graph, context));
  EXPECT_FALSE(diags.has_errors()) << diags.Render();
  return graph;
}

TEST(PlanWriter, SplitGroupRecordsTheGpuPartAndThePrediction) {
  std::string text;
  Graph graph = CompilePlaced(&text, 1);
  KernelRecord k = FakeKernels();
  k.artifact.kernels[0].cpu_part_symbol = "sluice_chain_0_cpu_part";
  k.artifact.kernels[0].gpu_batch_symbol = "sluice_chain_0_gpu_batch";
  json plan = PlanJson(graph, text, k, &g_placed_profile);
  EXPECT_TRUE(Validate(plan).empty()) << Lines(Validate(plan));
  const json& g = plan["fusion_groups"][0];
  EXPECT_EQ(g["gpu_from"], 2);
  EXPECT_EQ(g["cpu_part_symbol"], "sluice_chain_0_cpu_part");
  EXPECT_EQ(g["gpu_batch_symbol"], "sluice_chain_0_gpu_batch");
  EXPECT_EQ(g["staging_type"]["dtype"], "uint8");
  EXPECT_EQ(g["staging_type"]["layout"], "CHW");  // planar (ops/fusion/gpu_staging.h)
  EXPECT_EQ(g["staging_type"]["dims"], json({3, 224, 224}));
  const json& pl = plan["placement"];
  EXPECT_EQ(pl["device"], "cuda:0");
  EXPECT_EQ(pl["cpu_budget"], 1);
  EXPECT_EQ(pl["nodes"], json({"cpu", "cpu", "cpu", "cpu", "gpu", "gpu", "gpu", "cpu"}));
  EXPECT_EQ(plan["graph"]["nodes"][4]["device"], "gpu");
  ASSERT_TRUE(pl["predicted"].is_object());
  EXPECT_EQ(pl["predicted"]["h2d_bytes_per_sample"], 150528.0);
  EXPECT_GT(pl["predicted"]["images_per_second"].get<double>(), 0);
  ASSERT_EQ(pl["alternatives"].size(), 2u);
  EXPECT_EQ(pl["alternatives"][0]["name"], "all on cpu");
  EXPECT_EQ(pl["alternatives"][0]["chosen"], false);
  EXPECT_EQ(pl["alternatives"][1]["chosen"], true);
  EXPECT_EQ(pl["alternatives"][1]["gpu_from"], json({2}));
  EXPECT_EQ(pl["predicted"]["images_per_second"], pl["alternatives"][1]["images_per_second"]);

  std::string report = PlanReport(graph, k, &g_placed_profile);
  EXPECT_NE(report.find("placement: cuda:0; output.device is auto: normalize, layout, cast on gpu"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("alternatives considered"), std::string::npos) << report;
  EXPECT_NE(report.find("  * normalize, layout, cast on gpu"), std::string::npos) << report;
  EXPECT_NE(report.find("<- chosen"), std::string::npos) << report;
  EXPECT_NE(report.find("    all on cpu: "), std::string::npos) << report;
  EXPECT_NE(report.find("predicted: "), std::string::npos) << report;
  EXPECT_EQ(report.find("not built yet"), std::string::npos) << report;
}

TEST(PlanWriter, SplitWithoutCudaKernelsRunsOnTheCpuAndSaysSo) {
  std::string text;
  Graph graph = CompilePlaced(&text, 1);
  ASSERT_EQ(graph.placement.device, "cuda:0");
  KernelRecord k = FakeKernels();
  k.artifact.cuda_target.clear();
  k.artifact.cuda_note = "Halide has no CUDA";
  k.artifact.kernels[0].cuda_symbol.clear();
  json plan = PlanJson(graph, text, k, &g_placed_profile);
  EXPECT_TRUE(Validate(plan).empty()) << Lines(Validate(plan));
  EXPECT_EQ(plan["placement"]["device"], "cpu");
  EXPECT_NE(plan["placement"]["reason"].get<std::string>().find(
                "CUDA kernels were not built (Halide has no CUDA)"),
            std::string::npos)
      << plan["placement"]["reason"];
  EXPECT_EQ(plan["fusion_groups"][0]["gpu_from"], -1);
  EXPECT_TRUE(plan["fusion_groups"][0]["staging_type"].is_null());
  EXPECT_EQ(plan["placement"]["nodes"][4], "cpu");
  // The prediction is the one for what runs: all on the CPU.
  EXPECT_EQ(plan["placement"]["predicted"]["h2d_bytes_per_sample"], 0.0);
  EXPECT_EQ(plan["placement"]["predicted"]["images_per_second"],
            plan["placement"]["alternatives"][0]["images_per_second"]);
  std::string report = PlanReport(graph, k, &g_placed_profile);
  EXPECT_NE(report.find("placement: every stage on cpu;"), std::string::npos) << report;
}

TEST(PlanWriter, CpuPlacementWithProfileConformsAndPredicts) {
  std::string text;
  // Many cores and a GPU busy with training: the CPU alone is faster.
  Graph graph = CompilePlaced(&text, 64, 0.45);
  json plan = PlanJson(graph, text, FakeKernels(), &g_placed_profile);
  EXPECT_TRUE(Validate(plan).empty()) << Lines(Validate(plan));
  EXPECT_EQ(plan["placement"]["cpu_budget"], 64);
  EXPECT_EQ(plan["placement"]["predicted"]["limit"], "cpu");
  EXPECT_EQ(plan["fusion_groups"][0]["gpu_from"], -1);
}

TEST(PlanFormat, ParamsRoundTripThroughJsonGuidedByTheRegistry) {
  std::string text;
  Graph graph = CompileExample("imagenet_train.yaml", &text);
  for (const Node& node : graph.nodes) {
    json j = json::parse(plan_format::ParamsToJson(node.params).dump());
    auto back = plan_format::ParamsFromJson(node.op->params, j);
    ASSERT_TRUE(back) << node.op->name << ": " << back.error().ToString();
    EXPECT_EQ(*back, node.params) << node.op->name;
  }
  auto output = plan_format::ParamsFromJson(
      OutputParams(), json::parse(plan_format::ParamsToJson(graph.output).dump()));
  ASSERT_TRUE(output);
  EXPECT_EQ(*output, graph.output);
  auto bad = plan_format::ParamsFromJson(graph.nodes[1].op->params, json{{"color", 3}});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("`color`"), std::string::npos);
}

TEST(PlanFormat, HashIsFnv1a64) {
  // Published FNV-1a 64 test vectors.
  EXPECT_EQ(plan_format::HashBytes(""), "fnv1a64:cbf29ce484222325");
  EXPECT_EQ(plan_format::HashBytes("a"), "fnv1a64:af63dc4c8601ec8c");
}

Graph CompileText(const std::string& text) {
  auto graph = CheckedGraph(text, "t.yaml");  // the compile driver
  EXPECT_TRUE(graph.has_value()) << graph.error().ToString();
  return graph ? std::move(*graph) : Graph{};
}

std::string SpecWith(const std::string& steps,
                     const std::string& fields = "{image: image, label: cls}") {
  return "sluice: 1\nname: t\nsource: {format: image_folder, path: /d}\ngraph:\n"
         "  - decode_jpeg: {in: jpg, out: image}\n" +
         steps + "batch: {size: 4, fields: " + fields + "}\n";
}

std::vector<std::string> StepOps(const json& chain) {
  std::vector<std::string> ops;
  for (const json& s : chain["steps"]) ops.push_back(s["op"].get<std::string>());
  return ops;
}

TEST(PlanWriter, JitterBeforeTheCropWritesAReferenceChain) {
  const std::string text = SpecWith(
      "  - color_jitter: {brightness: 0.4, contrast: 0.4}\n"
      "  - random_resized_crop: {size: [32, 32]}\n"
      "  - normalize: {mean: [0.5, 0.5, 0.5], std: [0.2, 0.2, 0.2], scale: 255}\n"
      "  - layout: {to: CHW}\n");
  Graph graph = CompileText(text);
  json plan = PlanJson(graph, text, FakeKernels());
  EXPECT_TRUE(Validate(plan).empty()) << Lines(Validate(plan));
  EXPECT_TRUE(plan["fusion_groups"].empty());
  ASSERT_EQ(plan["reference_chains"].size(), 1u);
  const json& r = plan["reference_chains"][0];
  EXPECT_EQ(r["batch_field"], "image");
  EXPECT_EQ(r["symbol"], "reference:image");
  EXPECT_EQ(StepOps(r), (std::vector<std::string>{"color_jitter", "random_resized_crop",
                                                  "normalize", "layout"}));
  // op ids are the node indices (0 source, 1 decode).
  for (int i = 0; i < 4; ++i) EXPECT_EQ(r["steps"][i]["op_id"], i + 2) << i;
  EXPECT_EQ(r["nodes"], json({2, 3, 4, 5}));
  EXPECT_TRUE(r["steps"][0]["params"].contains("brightness"));
  EXPECT_EQ(r["steps"][1]["params"]["size"], json({32, 32}));
  EXPECT_EQ(r["input"], "image");
  EXPECT_EQ(r["input_type"]["dims"], json({-1, -1, 3}));
  EXPECT_EQ(r["input_type"]["dtype"], "uint8");
  EXPECT_EQ(r["output_type"]["dims"], json({3, 32, 32}));
  EXPECT_EQ(r["output_type"]["dtype"], "float32");
  EXPECT_EQ(r["output_type"]["layout"], "CHW");
  EXPECT_NE(r["reason"].get<std::string>().find("`color_jitter` (line 6) follows `decode_jpeg`"),
            std::string::npos)
      << r["reason"];

  std::string report = PlanReport(graph, FakeKernels());
  EXPECT_NE(report.find("unfused ops (run on the reference implementations):"), std::string::npos)
      << report;
  EXPECT_NE(report.find("batch field `image` runs per sample on the reference implementations: "
                        "decode_jpeg (line 5) -> color_jitter (line 6) -> random_resized_crop "
                        "(line 7) -> normalize (line 8) -> layout (line 9)"),
            std::string::npos)
      << report;
}

TEST(PlanWriter, TwoResizesWriteAReferenceChainWithTheirOpIds) {
  const std::string text = SpecWith(
      "  - resize: {size: [64, 64]}\n"
      "  - resize: {size: [32, 32]}\n"
      "  - cast: {dtype: float16}\n");
  Graph graph = CompileText(text);
  json plan = PlanJson(graph, text, FakeKernels());
  EXPECT_TRUE(Validate(plan).empty()) << Lines(Validate(plan));
  EXPECT_TRUE(plan["fusion_groups"].empty());
  ASSERT_EQ(plan["reference_chains"].size(), 1u);
  const json& r = plan["reference_chains"][0];
  EXPECT_EQ(StepOps(r), (std::vector<std::string>{"resize", "resize", "cast"}));
  EXPECT_EQ(r["steps"][0]["op_id"], 2);
  EXPECT_EQ(r["steps"][1]["op_id"], 3);
  EXPECT_EQ(r["steps"][2]["op_id"], 4);
  EXPECT_EQ(r["steps"][0]["params"]["size"], json({64, 64}));
  EXPECT_EQ(r["steps"][1]["params"]["size"], json({32, 32}));
  EXPECT_EQ(r["output_type"]["dims"], json({32, 32, 3}));
  EXPECT_EQ(r["output_type"]["dtype"], "float16");
  EXPECT_NE(r["reason"].get<std::string>().find("rescales more than once"), std::string::npos);
  std::string report = PlanReport(graph, FakeKernels());
  EXPECT_NE(report.find("batch field `image` runs per sample on the reference implementations"),
            std::string::npos)
      << report;
}

// A fused field and an unfused one from two decodes of the same file: only
// the unfused one gets a reference chain; a decoded image read by two fields
// is not fused, and the reason says so.
TEST(PlanWriter, MixedPlanAndSharedDecodeReasons) {
  const std::string mixed = plan_test_specs::kMixed;
  Graph graph = CompileText(mixed);
  json plan = PlanJson(graph, mixed, FakeKernels());
  EXPECT_TRUE(Validate(plan).empty()) << Lines(Validate(plan));
  ASSERT_EQ(plan["fusion_groups"].size(), 1u);
  EXPECT_EQ(plan["fusion_groups"][0]["batch_field"], "x");
  ASSERT_EQ(plan["reference_chains"].size(), 1u);
  EXPECT_EQ(plan["reference_chains"][0]["batch_field"], "y");
  EXPECT_EQ(plan["reference_chains"][0]["input"], "b");
  EXPECT_EQ(StepOps(plan["reference_chains"][0]),
            (std::vector<std::string>{"color_jitter", "center_crop"}));
  std::string report = PlanReport(graph, FakeKernels());
  EXPECT_NE(report.find("decode pushdown: off"), std::string::npos) << report;

  const std::string shared =
      "sluice: 1\nname: t\nsource: {format: image_folder, path: /d}\ngraph:\n"
      "  - decode_jpeg: {in: jpg, out: image}\n"
      "  - center_crop: {in: image, out: a, size: [16, 16]}\n"
      "  - center_crop: {in: image, out: b, size: [8, 8]}\n"
      "batch: {size: 4, fields: {a: a, b: b}}\n";
  Graph g2 = CompileText(shared);
  json p2 = PlanJson(g2, shared, FakeKernels());
  EXPECT_TRUE(p2["fusion_groups"].empty());
  ASSERT_EQ(p2["reference_chains"].size(), 2u);
  EXPECT_EQ(p2["reference_chains"][0]["batch_field"], "a");
  EXPECT_EQ(p2["reference_chains"][1]["batch_field"], "b");
  EXPECT_NE(p2["reference_chains"][1]["reason"].get<std::string>().find(
                "the output of `decode_jpeg` (line 5) is read by 2 ops"),
            std::string::npos)
      << p2["reference_chains"][1]["reason"];
}

TEST(PlanWriter, FusedExamplesHaveNoReferenceChains) {
  std::string text;
  Graph graph = CompileExample("imagenet_train.yaml", &text);
  json plan = PlanJson(graph, text, FakeKernels());
  ASSERT_TRUE(plan["reference_chains"].is_array());
  EXPECT_TRUE(plan["reference_chains"].empty());
  EXPECT_EQ(PlanReport(graph, FakeKernels()).find("unfused ops"), std::string::npos);
}

}  // namespace
}  // namespace sluice
