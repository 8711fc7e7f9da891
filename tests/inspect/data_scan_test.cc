// inspect/data_scan.h: counts, formats, histograms, class balance, bad files
// and the cost model's decode estimate on a small generated image folder.
#include "inspect/data_scan.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "compiler/cost/cost_model.h"
#include "pack/pack_input.h"
#include "runtime/sources/source_registry.h"
#include "tests/runtime/loader/loader_test_util.h"

namespace sluice::inspect {
namespace {

namespace fs = std::filesystem;
using testing_loader::MakeJpeg;
using testing_loader::WriteBytes;

class DataScanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("sluice_data_scan_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    // class a: three JPEGs 64x48, 100x80, 300x200; class b: one JPEG and one
    // PNG (13x9 from tests/data) and two broken files.
    WriteBytes(dir_ / "a/1.jpg", MakeJpeg(64, 48, 1));
    WriteBytes(dir_ / "a/2.jpg", MakeJpeg(100, 80, 2));
    WriteBytes(dir_ / "a/3.jpg", MakeJpeg(300, 200, 3));
    WriteBytes(dir_ / "b/4.jpg", MakeJpeg(40, 30, 4));
    fs::copy_file(fs::path(SLUICE_SOURCE_DIR) / "tests/data/png/rgb8.png", dir_ / "b/5.png");
    WriteBytes(dir_ / "b/6.jpg", {'n', 'o', 't', ' ', 'a', 'n', ' ', 'i', 'm', 'a', 'g', 'e'});
    std::vector<uint8_t> truncated = MakeJpeg(120, 90, 7);
    truncated.resize(truncated.size() / 2);  // the header survives, the data does not
    WriteBytes(dir_ / "b/7.jpg", truncated);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Result<DataScan> Scan(const DataScanOptions& options) {
    auto input = runtime::ResolvePackInput(dir_.string(), {});
    if (!input) return std::unexpected(input.error());
    auto source = runtime::OpenSource(input->format, input->params);
    if (!source) return std::unexpected(source.error());
    return ScanDataset(**source, input->format, dir_.string(), options);
  }

  fs::path dir_;
};

TEST_F(DataScanTest, CountsFormatsClassesAndDimensions) {
  DataScanOptions options;
  options.threads = 3;
  uint64_t calls = 0, last = 0;
  options.progress = [&](uint64_t done, uint64_t total) {
    ++calls;
    last = done;
    EXPECT_EQ(total, 7u);
  };
  auto scan = Scan(options);
  ASSERT_TRUE(scan) << scan.error().ToString();
  EXPECT_EQ(scan->samples, 7u);
  EXPECT_EQ(calls, 7u);
  EXPECT_EQ(last, 7u);
  EXPECT_EQ(scan->formats.at("jpeg"), 5u);
  EXPECT_EQ(scan->formats.at("png"), 1u);
  EXPECT_EQ(scan->formats.at("other"), 1u);
  EXPECT_EQ(scan->class_names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(scan->labels.at(0), 3u);
  EXPECT_EQ(scan->labels.at(1), 4u);
  // Header reads: the truncated JPEG still has its dimensions; the text file has none.
  EXPECT_EQ(scan->width.n, 6u);
  EXPECT_EQ(scan->width.min, 13u);
  EXPECT_EQ(scan->width.max, 300u);
  EXPECT_EQ(scan->height.max, 200u);
  // widths 13 (png), 40, 64, 100, 120, 300: [8,16) 1, [16,32) 0, [32,64) 1,
  // [64,128) 3, [128,256) 0, [256,512) 1.
  const nlohmann::json widths = scan->widths.ToJson();
  ASSERT_EQ(widths.size(), 6u) << widths.dump();
  EXPECT_EQ(widths[0], (nlohmann::json{{"lo", 8}, {"hi", 16}, {"count", 1}}));
  EXPECT_EQ(widths[1]["count"], 0);
  EXPECT_EQ(widths[2]["count"], 1);
  EXPECT_EQ(widths[3]["count"], 3);
  EXPECT_EQ(widths[5], (nlohmann::json{{"lo", 256}, {"hi", 512}, {"count", 1}}));
  ASSERT_EQ(scan->bad.size(), 1u);
  EXPECT_NE(scan->bad[0].name.find("6.jpg"), std::string::npos);
  EXPECT_EQ(scan->bad[0].reason, "decode: neither JPEG nor PNG");
  EXPECT_EQ(scan->decode_core_seconds, 0);  // no profile, no estimate
  EXPECT_TRUE(scan->ToJson()["decode_cost"].is_null());
}

TEST_F(DataScanTest, FullDecodeFindsTruncatedData) {
  DataScanOptions options;
  options.threads = 1;
  options.full_decode = true;
  auto scan = Scan(options);
  ASSERT_TRUE(scan) << scan.error().ToString();
  ASSERT_EQ(scan->bad.size(), 2u);
  EXPECT_NE(scan->bad[0].name.find("6.jpg"), std::string::npos);
  EXPECT_NE(scan->bad[1].name.find("7.jpg"), std::string::npos);
  EXPECT_TRUE(scan->bad[1].reason.starts_with("decode: ")) << scan->bad[1].reason;
  EXPECT_EQ(scan->width.n, 5u);
}

TEST_F(DataScanTest, DecodeEstimateIsTheCostModelsSum) {
  HardwareProfile profile;
  profile.machine = "test";
  profile.cpu.decode_mpix_per_s = 100;
  profile.cpu.decode_fixed_s = 0.001;
  DataScanOptions options;
  options.profile = &profile;
  auto scan = Scan(options);
  ASSERT_TRUE(scan) << scan.error().ToString();
  double expected = 0;
  for (auto [w, h] : {std::pair{64, 48}, {100, 80}, {300, 200}, {40, 30}, {13, 9}, {120, 90}}) {
    expected += DecodeSeconds(profile, w, h);
  }
  EXPECT_NEAR(scan->decode_core_seconds, expected, 1e-12);
  EXPECT_NEAR(expected,
              6 * 0.001 + (64 * 48 + 100 * 80 + 300 * 200 + 40 * 30 + 13 * 9 + 120 * 90) / 100e6,
              1e-12);
  const nlohmann::json j = scan->ToJson();
  EXPECT_EQ(j["decode_cost"]["profile"], "test");
  EXPECT_EQ(j["samples"], 7);
  EXPECT_EQ(j["bad"].size(), 1u);
}

TEST(Log2Histogram, BucketsArePowersOfTwo) {
  Log2Histogram h;
  for (uint64_t v : {0, 1, 2, 3, 4, 1000, 1024}) h.Add(v);
  const nlohmann::json j = h.ToJson();
  ASSERT_EQ(j.size(), 11u);
  EXPECT_EQ(j[0], (nlohmann::json{{"lo", 0}, {"hi", 2}, {"count", 2}}));
  EXPECT_EQ(j[1]["count"], 2);  // 2, 3
  EXPECT_EQ(j[2]["count"], 1);  // 4
  EXPECT_EQ(j[9]["count"], 1);  // 1000 in [512, 1024)
  EXPECT_EQ(j[10], (nlohmann::json{{"lo", 1024}, {"hi", 2048}, {"count", 1}}));
}

}  // namespace
}  // namespace sluice::inspect
