// PlanDocument (plan/plan_document.h) round trips: the plan.json the writer
// makes reads into a document that writes the same JSON back, and a document
// written and read back is the same document. Also: FromJson's errors name the
// plan, and the decode and memory sections carry what the passes decided.
#include "plan/plan_document.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "compiler/driver/compile_spec.h"
#include "compiler/passes/fused_chains.h"
#include "compiler/plan/plan_writer.h"
#include "ops/fusion/plan_format.h"
#include "tests/compiler/plan/plan_test_specs.h"

namespace sluice {
namespace {

using json = nlohmann::json;

KernelRecord FakeKernels(int groups) {
  KernelRecord k;
  k.artifact.cpu_targets = {"x86-64-linux-sse41"};
  for (int g = 0; g < groups; ++g) {
    k.artifact.kernels.push_back({"sluice_chain_" + std::to_string(g), ""});
  }
  k.artifact.arg_names = {"y.flip", "x.flip", "fill"};
  k.hash = plan_format::HashBytes("not a library");
  k.bytes = 13;
  return k;
}

const char* kTrain =
    "sluice: 1\nname: t\nsource: {format: image_folder, path: \"${DATA}/train\"}\ngraph:\n"
    "  - decode_jpeg: {in: jpg, out: image}\n"
    "  - random_resized_crop: {size: [32, 32]}\n"
    "  - normalize: {mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25], scale: 255}\n"
    "  - layout: {to: CHW}\n"
    "  - cast: {dtype: float16}\n"
    "batch: {size: 4, fields: {image: image, label: cls}}\n";

// A fused field and one on the reference implementations.
using plan_test_specs::kMixed;

json Written(const char* spec) {
  auto graph = CheckedGraph(spec, "t.yaml");
  if (!graph) {
    ADD_FAILURE() << graph.error().ToString();
    return json::object();
  }
  return PlanJson(*graph, spec, FakeKernels(CountFusionGroups(*graph)));
}

TEST(PlanDocument, JsonToDocToJsonIsTheSameJson) {
  for (const char* spec : {kTrain, kMixed}) {
    json j = Written(spec);
    auto doc = PlanDocument::FromJson(j, "plan `t`");
    ASSERT_TRUE(doc.has_value()) << doc.error().ToString();
    EXPECT_EQ(doc->ToJson(), j) << doc->ToJson().dump(1) << "\nvs\n" << j.dump(1);
    // With the tuner's section too.
    json tuned = j;
    tuned["tuned"] = json{{"threads", 3},
                          {"in_flight", 6},
                          {"prefetch", 2},
                          {"cpu_budget", 4},
                          {"images_per_second", 123.5},
                          {"batch_bytes", 4096},
                          {"trials", 7},
                          {"profile_machine", "m"},
                          {"tuned_at", "2026-01-01T00:00:00Z"}};
    auto with_tuned = PlanDocument::FromJson(tuned, "plan `t`");
    ASSERT_TRUE(with_tuned.has_value()) << with_tuned.error().ToString();
    EXPECT_EQ(with_tuned->tuned->threads, 3);
    EXPECT_EQ(with_tuned->tuned->images_per_second, 123.5);
    EXPECT_EQ(with_tuned->ToJson(), tuned);
  }
}

TEST(PlanDocument, DocToJsonToDocIsTheSameDoc) {
  for (const char* spec : {kTrain, kMixed}) {
    auto doc = PlanDocument::FromJson(Written(spec), "plan `t`");
    ASSERT_TRUE(doc.has_value()) << doc.error().ToString();
    PlanTunedDoc t;
    t.threads = 2;
    t.prefetch = 4;
    t.info["trials"] = 3;
    doc->tuned = t;
    auto back = PlanDocument::FromJson(doc->ToJson(), "plan `t`");
    ASSERT_TRUE(back.has_value()) << back.error().ToString();
    EXPECT_TRUE(*back == *doc);
    // A changed document is not equal (the comparison looks at the fields).
    PlanDocument changed = *back;
    changed.memory->fields[0].offset += 64;
    EXPECT_FALSE(changed == *doc);
  }
}

TEST(PlanDocument, DecodeAndMemorySections) {
  auto doc = PlanDocument::FromJson(Written(kTrain), "plan `t`");
  ASSERT_TRUE(doc.has_value()) << doc.error().ToString();
  ASSERT_TRUE(doc->decode.has_value());
  EXPECT_EQ(doc->decode->op, "decode_jpeg");
  EXPECT_EQ(doc->decode->params,
            json({{"color", "rgb"}, {"max_pixels", 100000000}, {"orientation", "ignore"}}));
  EXPECT_EQ(doc->decode->node, 1);
  EXPECT_TRUE(doc->decode->roi);
  EXPECT_TRUE(doc->decode->dct_scaling);  // random_resized_crop rescales
  ASSERT_TRUE(doc->memory.has_value());
  const PlanMemoryDoc& m = *doc->memory;
  EXPECT_EQ(m.batch_size, 4);
  ASSERT_EQ(m.fields.size(), 2u);
  EXPECT_EQ(m.fields[0].field, "image");
  EXPECT_EQ(m.fields[0].dtype, DType::kFloat16);
  EXPECT_EQ(m.fields[0].sample_shape, (std::vector<int64_t>{3, 32, 32}));
  EXPECT_EQ(m.fields[0].bytes_per_sample, 3 * 32 * 32 * 2);
  EXPECT_EQ(m.fields[0].offset, 0);
  EXPECT_EQ(m.fields[1].field, "label");
  EXPECT_EQ(m.fields[1].dtype, DType::kInt64);
  EXPECT_EQ(m.fields[1].bytes_per_sample, 8);
  EXPECT_EQ(m.fields[1].offset, 4 * 3 * 32 * 32 * 2);  // already 64-byte aligned
  EXPECT_EQ(m.batch_bytes, 4 * 3 * 32 * 32 * 2 + 64);
  EXPECT_EQ(m.staged_batch_bytes, m.batch_bytes);  // no GPU tail

  auto mixed = PlanDocument::FromJson(Written(kMixed), "plan `t`");
  ASSERT_TRUE(mixed.has_value()) << mixed.error().ToString();
  ASSERT_TRUE(mixed->decode.has_value());
  EXPECT_FALSE(mixed->decode->roi);
  EXPECT_FALSE(mixed->decode->dct_scaling);
  EXPECT_NE(mixed->decode->reason.find("reference implementations"), std::string::npos)
      << mixed->decode->reason;
}

TEST(PlanDocument, ErrorsNameThePlanAndTheKey) {
  json j = Written(kTrain);
  json no_hash = j;
  no_hash["kernels"].erase("hash");
  auto e = PlanDocument::FromJson(no_hash, "plan `p`");
  ASSERT_FALSE(e.has_value());
  EXPECT_EQ(e.error().code, ErrorCode::kCorruptData);
  EXPECT_EQ(e.error().message, "plan `p`: plan.json has no kernels.hash or kernels.cpu_targets");

  json bad_type = j;
  bad_type["fusion_groups"][0]["output_type"]["dtype"] = "float8";
  e = PlanDocument::FromJson(bad_type, "plan `p`");
  ASSERT_FALSE(e.has_value());
  EXPECT_EQ(e.error().code, ErrorCode::kVersionMismatch);
  EXPECT_NE(e.error().message.find("plan `p`: fusion group sluice_chain_0: "), std::string::npos)
      << e.error().message;

  json bad_memory = j;
  bad_memory["memory"]["fields"][0].erase("dtype");
  e = PlanDocument::FromJson(bad_memory, "plan `p`");
  ASSERT_FALSE(e.has_value());
  EXPECT_EQ(e.error().code, ErrorCode::kCorruptData);

  // Older plans: no decode, memory, reference_chains or tuned sections.
  json old = j;
  old.erase("decode");
  old.erase("memory");
  old.erase("reference_chains");
  auto doc = PlanDocument::FromJson(old, "plan `p`");
  ASSERT_TRUE(doc.has_value()) << doc.error().ToString();
  EXPECT_FALSE(doc->decode.has_value());
  EXPECT_FALSE(doc->memory.has_value());
  EXPECT_FALSE(doc->tuned.has_value());
}

}  // namespace
}  // namespace sluice

namespace sluice {
namespace {

// JSON is UTF-8: a Latin-1 path in a spec is refused with the plan key that
// holds it, instead of aborting the compiler (nlohmann throws on dump).
TEST(PlanDocument, WritingAPathThatIsNotUtf8NamesItsKey) {
  auto doc = PlanDocument::FromJson(Written(kTrain), "plan `t`");
  ASSERT_TRUE(doc.has_value()) << doc.error().ToString();
  doc->source_params["path"] = std::string("/data/caf\xe9/train");
  const std::string dir = ::testing::TempDir() + "/plan_not_utf8";
  std::filesystem::create_directories(dir);
  Status written = doc->Write(dir);
  ASSERT_FALSE(written);
  EXPECT_EQ(written.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(written.error().message.find("`source.params.path` is not valid UTF-8 "
                                         "(`/data/caf\\xE9/train`)"),
            std::string::npos)
      << written.error().message;
  EXPECT_FALSE(std::filesystem::exists(dir + "/plan.json.tmp"));
}

}  // namespace
}  // namespace sluice
