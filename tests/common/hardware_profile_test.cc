// Hardware profiles: YAML round trip, every error kind with its file:line:col,
// and the checked-in schema is what HardwareProfileSchema() generates.
#include "common/hardware_profile.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace sluice {
namespace {

HardwareProfile Full() {
  HardwareProfile p;
  p.machine = "test box \"quoted\" \\ with\ttab";
  p.measured_at = "2026-11-21T22:10:00Z";
  p.sluice_version = "0.1.0";
  p.cpu.cores = 2;
  p.cpu.model = "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz";
  p.cpu.simd = "avx512";
  p.cpu.decode_mpix_per_s = 95.123456789;
  p.cpu.decode_fixed_s = 5.0e-5;
  p.cpu.resample_ns_per_px = 2.1;
  p.cpu.pointwise_ns_per_elem = 0.1 + 0.2;  // not exactly 0.3: the writer must keep every bit
  p.cpu.memory_bandwidth_gbps = 9.5;
  p.storage = HardwareProfile::Storage{"/data/imagenet", 850.0, 8e-5, 110000, 500, 375.5};
  p.gpu = HardwareProfile::Gpu{"NVIDIA H100 80GB HBM3", 1, 24.0, 9.0, 300.0, 1e-5};
  return p;
}

void ExpectEqual(const HardwareProfile& a, const HardwareProfile& b) {
  EXPECT_EQ(a.machine, b.machine);
  EXPECT_EQ(a.measured_at, b.measured_at);
  EXPECT_EQ(a.sluice_version, b.sluice_version);
  EXPECT_EQ(a.cpu.cores, b.cpu.cores);
  EXPECT_EQ(a.cpu.model, b.cpu.model);
  EXPECT_EQ(a.cpu.simd, b.cpu.simd);
  EXPECT_EQ(a.cpu.decode_mpix_per_s, b.cpu.decode_mpix_per_s);
  EXPECT_EQ(a.cpu.decode_fixed_s, b.cpu.decode_fixed_s);
  EXPECT_EQ(a.cpu.resample_ns_per_px, b.cpu.resample_ns_per_px);
  EXPECT_EQ(a.cpu.pointwise_ns_per_elem, b.cpu.pointwise_ns_per_elem);
  EXPECT_EQ(a.cpu.memory_bandwidth_gbps, b.cpu.memory_bandwidth_gbps);
  ASSERT_EQ(a.storage.has_value(), b.storage.has_value());
  if (a.storage) {
    EXPECT_EQ(a.storage->path, b.storage->path);
    EXPECT_EQ(a.storage->read_mbps, b.storage->read_mbps);
    EXPECT_EQ(a.storage->latency_s, b.storage->latency_s);
    EXPECT_EQ(a.storage->mean_file_bytes, b.storage->mean_file_bytes);
    EXPECT_EQ(a.storage->mean_width, b.storage->mean_width);
    EXPECT_EQ(a.storage->mean_height, b.storage->mean_height);
  }
  ASSERT_EQ(a.gpu.has_value(), b.gpu.has_value());
  if (a.gpu) {
    EXPECT_EQ(a.gpu->name, b.gpu->name);
    EXPECT_EQ(a.gpu->device, b.gpu->device);
    EXPECT_EQ(a.gpu->h2d_pinned_gbps, b.gpu->h2d_pinned_gbps);
    EXPECT_EQ(a.gpu->h2d_pageable_gbps, b.gpu->h2d_pageable_gbps);
    EXPECT_EQ(a.gpu->pointwise_gelem_per_s, b.gpu->pointwise_gelem_per_s);
    EXPECT_EQ(a.gpu->launch_s, b.gpu->launch_s);
  }
}

TEST(HardwareProfileTest, RoundTripFull) {
  HardwareProfile p = Full();
  std::string yaml = HardwareProfileToYaml(p);
  Result<HardwareProfile> back = ParseHardwareProfile(yaml, "rt.yaml");
  ASSERT_TRUE(back.has_value()) << back.error().ToString() << "\n" << yaml;
  ExpectEqual(p, *back);
  // Writing again gives the same text.
  EXPECT_EQ(HardwareProfileToYaml(*back), yaml);
  // Comments explain the sections.
  EXPECT_NE(yaml.find("# CPU:"), std::string::npos);
  EXPECT_NE(yaml.find("# GPU:"), std::string::npos);
}

TEST(HardwareProfileTest, RoundTripWithoutStorageAndGpu) {
  HardwareProfile p = Full();
  p.storage.reset();
  p.gpu.reset();
  std::string yaml = HardwareProfileToYaml(p);
  EXPECT_NE(yaml.find("gpu: null"), std::string::npos);
  Result<HardwareProfile> back = ParseHardwareProfile(yaml, "rt.yaml");
  ASSERT_TRUE(back.has_value()) << back.error().ToString();
  ExpectEqual(p, *back);
}

TEST(HardwareProfileTest, SaveAndLoad) {
  std::string path = ::testing::TempDir() + "/hw_profile_test_" + std::to_string(::getpid()) +
                     ".yaml";
  ASSERT_TRUE(SaveHardwareProfile(Full(), path).has_value());
  Result<HardwareProfile> back = LoadHardwareProfile(path);
  std::remove(path.c_str());
  ASSERT_TRUE(back.has_value()) << back.error().ToString();
  ExpectEqual(Full(), *back);
}

TEST(HardwareProfileTest, JsonIsAccepted) {
  Result<HardwareProfile> p = ParseHardwareProfile(
      R"({"format_version": 1, "machine": "m", "cpu": {"cores": 4, "decode_mpix_per_s": 90,
          "resample_ns_per_px": 2, "pointwise_ns_per_elem": 0.3, "memory_bandwidth_gbps": 10}})",
      "hw.json");
  ASSERT_TRUE(p.has_value()) << p.error().ToString();
  EXPECT_EQ(p->cpu.cores, 4);
  EXPECT_EQ(p->cpu.simd, "sse41");  // default
  EXPECT_FALSE(p->storage.has_value());
  EXPECT_FALSE(p->gpu.has_value());
}

TEST(HardwareProfileTest, MissingFileIsNotFound) {
  Result<HardwareProfile> p = LoadHardwareProfile("/nonexistent/dir/hw.yaml");
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().code, ErrorCode::kNotFound);
  EXPECT_NE(p.error().hint.find("sluice profile"), std::string::npos);
}

const char* kGood =
    "format_version: 1\n"                  // 1
    "machine: \"m\"\n"                     // 2
    "cpu:\n"                               // 3
    "  cores: 2\n"                         // 4
    "  decode_mpix_per_s: 95\n"            // 5
    "  resample_ns_per_px: 2.1\n"          // 6
    "  pointwise_ns_per_elem: 0.3\n"       // 7
    "  memory_bandwidth_gbps: 9.5\n";      // 8

// Parses `text` expecting an error at line:col whose message contains `what`.
void ExpectError(const std::string& text, int line, int col, const std::string& what) {
  Result<HardwareProfile> p = ParseHardwareProfile(text, "hw.yaml");
  ASSERT_FALSE(p.has_value()) << "parsed:\n" << text;
  EXPECT_EQ(p.error().code, ErrorCode::kInvalidSpec);
  EXPECT_EQ(p.error().mark.file, "hw.yaml");
  EXPECT_EQ(p.error().mark.line, line) << p.error().ToString();
  EXPECT_EQ(p.error().mark.column, col) << p.error().ToString();
  EXPECT_NE(p.error().message.find(what), std::string::npos) << p.error().ToString();
  EXPECT_FALSE(p.error().hint.empty()) << p.error().ToString();
  EXPECT_EQ(p.error().ToString().rfind("hw.yaml:" + std::to_string(line) + ":" +
                                           std::to_string(col) + ": error: ",
                                       0),
            0u);
}

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

TEST(HardwareProfileTest, GoodBaseParses) {
  ASSERT_TRUE(ParseHardwareProfile(kGood, "hw.yaml").has_value());
}

TEST(HardwareProfileTest, MalformedYaml) {
  ExpectError(Replace(kGood, "  decode_mpix_per_s: 95\n", "  decode_mpix_per_s: [95\n"), 6, 21,
              "invalid YAML");
}

TEST(HardwareProfileTest, MissingRequiredField) {
  // Reported at the map that lacks it.
  ExpectError(Replace(kGood, "  resample_ns_per_px: 2.1\n", ""), 4, 3,
              "missing required field `cpu.resample_ns_per_px`");
  ExpectError(Replace(kGood, "machine: \"m\"\n", ""), 1, 1, "missing required field `machine`");
  ExpectError("format_version: 1\nmachine: m\n", 1, 1, "missing required field `cpu`");
}

TEST(HardwareProfileTest, WrongType) {
  ExpectError(Replace(kGood, "cores: 2", "cores: two"), 4, 10, "`cpu.cores` must be an integer");
  ExpectError(Replace(kGood, "cores: 2", "cores: 2.5"), 4, 10, "`cpu.cores` must be an integer");
  ExpectError(Replace(kGood, "decode_mpix_per_s: 95", "decode_mpix_per_s: fast"), 5, 22,
              "must be a number");
  ExpectError("format_version: 1\nmachine: m\ncpu: 3\n", 3, 6, "cpu must be a map");
  ExpectError(std::string(kGood) + "gpu:\n  name: [a, b]\n", 10, 9,
              "`gpu.name` must be a string");
}

TEST(HardwareProfileTest, NonPositiveRate) {
  ExpectError(Replace(kGood, "memory_bandwidth_gbps: 9.5", "memory_bandwidth_gbps: 0"), 8, 26,
              "`cpu.memory_bandwidth_gbps` must be positive");
  ExpectError(Replace(kGood, "decode_mpix_per_s: 95", "decode_mpix_per_s: -3"), 5, 22,
              "must be positive");
  ExpectError(std::string(kGood) + "  decode_fixed_s: -1\n", 9, 19, "must not be negative");
  ExpectError(Replace(kGood, "cores: 2", "cores: 0"), 4, 10, "at least 1");
  ExpectError(std::string(kGood) +
                  "storage:\n  path: /d\n  read_mbps: 0\n  latency_s: 0.001\n",
              11, 14, "`storage.read_mbps` must be positive");
}

// cpu.cores becomes the loader's CPU budget (and `sluice tune`'s threads):
// a profile may not say more than the loader runs (LoaderOptions::kMaxThreads).
TEST(HardwareProfileTest, CoresAboveTheLoadersMaximum) {
  ExpectError(Replace(kGood, "cores: 2", "cores: 100000"), 4, 10,
              "`cpu.cores` must be at most 4096, got 100000");
  ExpectError(Replace(kGood, "cores: 2", "cores: 4097"), 4, 10, "at most 4096");
  ExpectError(Replace(kGood, "cores: 2", "cores: -5"), 4, 10, "at least 1");
  EXPECT_TRUE(ParseHardwareProfile(Replace(kGood, "cores: 2", "cores: 4096"), "hw.yaml"));
  // What the profile writes reads back, and the schema says the same bound.
  HardwareProfile p = *ParseHardwareProfile(kGood, "hw.yaml");
  p.cpu.cores = HardwareProfile::kMaxCores;
  EXPECT_TRUE(ParseHardwareProfile(HardwareProfileToYaml(p), "hw.yaml"));
  const auto schema = nlohmann::json::parse(HardwareProfileSchema());
  EXPECT_EQ(schema["properties"]["cpu"]["properties"]["cores"]["maximum"], 4096);
}

TEST(HardwareProfileTest, OtherFormatVersion) {
  ExpectError(Replace(kGood, "format_version: 1", "format_version: 2"), 1, 17,
              "unsupported format_version 2");
  ExpectError(Replace(kGood, "format_version: 1\n", ""), 1, 1,
              "missing required field `format_version`");
}

TEST(HardwareProfileTest, UnknownFieldSuggests) {
  Result<HardwareProfile> p =
      ParseHardwareProfile(Replace(kGood, "  cores: 2\n", "  cores: 2\n  coers: 3\n"), "hw.yaml");
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().mark.line, 5);
  EXPECT_EQ(p.error().mark.column, 3);
  EXPECT_NE(p.error().hint.find("did you mean `cores`?"), std::string::npos)
      << p.error().ToString();
  ExpectError(Replace(kGood, "cpu:\n  cores: 2\n", "cpu:\n  cores: 2\n  simd: neon\n"), 5, 9,
              "unknown cpu.simd `neon`");
}

TEST(HardwareProfileTest, EmptyOrNotAMap) {
  ExpectError("", 1, 1, "empty");
  ExpectError("- 1\n- 2\n", 1, 1, "must be a map");
}

TEST(HardwareProfileTest, SchemaIsValidJsonDescribingEveryField) {
  nlohmann::json s = nlohmann::json::parse(HardwareProfileSchema());
  EXPECT_EQ(s["$schema"], "https://json-schema.org/draft/2020-12/schema");
  EXPECT_EQ(s["properties"]["format_version"]["const"], HardwareProfile::kFormatVersion);
  EXPECT_EQ(s["properties"]["cpu"]["properties"]["decode_mpix_per_s"]["exclusiveMinimum"], 0);
  EXPECT_TRUE(s["properties"]["cpu"]["properties"].contains("memory_bandwidth_gbps"));
  EXPECT_TRUE(s["properties"]["gpu"]["oneOf"][0]["properties"].contains("h2d_pinned_gbps"));
  EXPECT_TRUE(s["properties"]["storage"]["oneOf"][0]["properties"].contains("mean_width"));
}

TEST(HardwareProfileTest, CheckedInSchemaIsCurrent) {
  std::ifstream in(std::string(SLUICE_SOURCE_DIR) + "/schemas/hardware.schema.json",
                   std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  EXPECT_TRUE(s.str() == HardwareProfileSchema())
      << "schemas/hardware.schema.json is stale; regenerate it with:\n"
         "  build/sluice schema --hardware -o schemas/hardware.schema.json";
}

// Every checked-in example profile loads, says which machine it is, and has
// plausible rates (a profile measured on a real machine, not a template).
TEST(HardwareProfileTest, ExampleProfilesLoad) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(SLUICE_SOURCE_DIR) / "examples" / "profiles";
  int loaded = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    SCOPED_TRACE(entry.path().string());
    auto p = LoadHardwareProfile(entry.path().string());
    ASSERT_TRUE(p.has_value()) << p.error().ToString();
    EXPECT_FALSE(p->machine.empty());
    EXPECT_FALSE(p->measured_at.empty());
    EXPECT_GE(p->cpu.cores, 1);
    EXPECT_GT(p->cpu.decode_mpix_per_s, 1.0);
    EXPECT_GT(p->cpu.memory_bandwidth_gbps, 0.1);
    // The file is also what SaveHardwareProfile would write for it: no field lost.
    auto again = ParseHardwareProfile(HardwareProfileToYaml(*p), entry.path().string());
    ASSERT_TRUE(again.has_value()) << again.error().ToString();
    EXPECT_EQ(again->cpu.decode_mpix_per_s, p->cpu.decode_mpix_per_s);
    EXPECT_EQ(again->gpu.has_value(), p->gpu.has_value());
    EXPECT_EQ(again->storage.has_value(), p->storage.has_value());
    ++loaded;
  }
  EXPECT_GE(loaded, 1) << "examples/profiles/ holds no *.yaml";
}

}  // namespace
}  // namespace sluice
