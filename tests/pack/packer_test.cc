#include "pack/packer.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <span>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "runtime/decode/jpeg_decoder.h"
#include "runtime/sources/file_list_source.h"
#include "runtime/sources/image_folder_source.h"
#include "runtime/sources/tar/index_store.h"
#include "runtime/sources/tar/shard_index.h"
#include "tests/runtime/loader/loader_test_util.h"
#include "tests/runtime/test_tmpdir.h"

namespace sluice::runtime {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

std::string Slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// stdout of a shell command (GNU tar, sha256sum: tools other than ours).
std::string Shell(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  pclose(pipe);
  return out;
}

class PackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    paths_ = testing_loader::MakeDataset(data_.path(), 30, 3, 40, 90);
    auto source = ImageFolderSource::Open(data_.path().string());
    ASSERT_TRUE(source.has_value()) << source.error().ToString();
    source_ = std::move(*source);
  }
  PackOptions Options(const fs::path& out) const {
    PackOptions o;
    o.out_dir = out.string();
    o.shard_size = 16 << 10;
    o.threads = 2;
    o.source_format = "image_folder";
    o.source_path = data_.path().string();
    return o;
  }

  TempDir data_, out_;
  std::vector<std::string> paths_;
  std::unique_ptr<ImageFolderSource> source_;
};

TEST_F(PackTest, WritesShardsIndexAndManifestOtherToolsRead) {
  const fs::path out = out_.path() / "shards";
  uint64_t calls = 0;
  PackOptions options = Options(out);
  options.restart_markers = false;  // members are the source's bytes
  options.progress = [&](uint64_t done, uint64_t total) {
    ++calls;
    EXPECT_EQ(total, 30u);
    EXPECT_EQ(done, calls);
  };
  auto summary = PackSource(*source_, options);
  ASSERT_TRUE(summary.has_value()) << summary.error().ToString();
  EXPECT_EQ(summary->samples, 30u);
  EXPECT_EQ(summary->skipped, 0u);
  ASSERT_GT(summary->shards.size(), 1u) << "16 KiB shards of ~2-4 KiB samples";
  EXPECT_EQ(summary->shards[0], "shard-000000.tar");

  auto manifest = nlohmann::json::parse(Slurp(out / kPackManifestFile));
  EXPECT_EQ(manifest["samples"], 30);
  EXPECT_EQ(manifest["class_names"], (nlohmann::json{"class_0", "class_1", "class_2"}));
  uint64_t listed = 0;
  for (const auto& shard : manifest["shards"]) {
    listed += shard["samples"].get<uint64_t>();
    const std::string path = (out / shard["name"].get<std::string>()).string();
    EXPECT_EQ(shard["bytes"].get<uint64_t>(), fs::file_size(path));
    // End blocks and record padding included (a shard was 2 KiB over before).
    EXPECT_LE(fs::file_size(path), 16u << 10);
    // The checksum is the one sha256sum computes.
    EXPECT_EQ(Shell("sha256sum '" + path + "'").substr(0, 64), shard["sha256"]);
  }
  EXPECT_EQ(listed, 30u);

  // GNU tar lists the WebDataset members, and extracts them.
  const std::string first = (out / "shard-000000.tar").string();
  const std::string listing = Shell("tar -tf '" + first + "'");
  EXPECT_EQ(listing.substr(0, 43), "000000000.jpg\n000000000.cls\n000000000.json\n");
  EXPECT_EQ(Shell("tar -xOf '" + first + "' 000000000.cls"), "0");
  EXPECT_EQ(Shell("tar -xOf '" + first + "' 000000000.jpg"), Slurp(source_->path(0)));
  auto meta = nlohmann::json::parse(Shell("tar -xOf '" + first + "' 000000000.json"));
  EXPECT_EQ(meta["path"], "class_0/img_000.jpg");
  EXPECT_EQ(meta["label"], 0);

  // The index points at each sample's image bytes.
  auto index = tar::ShardIndex::Load((out / tar::kPackIndexName).string());
  ASSERT_TRUE(index.has_value()) << index.error().ToString();
  ASSERT_EQ(index->records().size(), 30u);
  ASSERT_EQ(index->num_shards(), summary->shards.size());
  EXPECT_EQ(index->shard(0).name, "shard-000000.tar");
  const uint64_t last = index->shard(1).first_sample - 1;  // shard 0's last sample
  const tar::SampleRecord& r = index->records()[last];
  const std::string bytes = Slurp(first).substr(r.offset, r.size);
  EXPECT_EQ(bytes, Slurp(source_->path(last)));
  EXPECT_EQ(r.label, source_->label(last));
}

TEST_F(PackTest, SameInputSameBytesWhateverTheThreads) {
  PackOptions one = Options(out_.path() / "one");
  one.threads = 1;
  PackOptions two = Options(out_.path() / "two");
  two.threads = 2;
  ASSERT_TRUE(PackSource(*source_, one).has_value());
  ASSERT_TRUE(PackSource(*source_, two).has_value());
  int files = 0;
  for (const auto& entry : fs::directory_iterator(one.out_dir)) {
    const fs::path other = fs::path(two.out_dir) / entry.path().filename();
    ASSERT_TRUE(fs::exists(other)) << other;
    EXPECT_EQ(Slurp(entry.path()), Slurp(other)) << entry.path().filename();
    ++files;
  }
  EXPECT_GT(files, 3);
}

// By default JPEGs are stored re-encoded with restart markers: other bytes,
// the same pixels (as any decoder gives them), and spliceable by the loader.
TEST_F(PackTest, RestartMarkersByDefaultKeepEveryPixel) {
  PackOptions o = Options(out_.path() / "restart");
  o.shard_size = 1 << 20;  // one shard
  ASSERT_TRUE(PackSource(*source_, o).has_value());
  auto manifest = nlohmann::json::parse(Slurp(fs::path(o.out_dir) / kPackManifestFile));
  EXPECT_EQ(manifest["options"]["restart_markers"], true);
  const std::string shard = (fs::path(o.out_dir) / "shard-000000.tar").string();
  for (size_t k = 0; k < 30; k += 7) {
    char key[16];
    std::snprintf(key, sizeof key, "%09zu", k);
    const std::string stored = Shell("tar -xOf '" + shard + "' " + key + ".jpg");
    const std::string original = Slurp(source_->path(k));
    EXPECT_NE(stored, original);
    EXPECT_NE(stored.find("\xFF\xDD"), std::string::npos) << "a DRI marker";
    ImageBuffer a, b;
    auto ra = DecodeJpeg(std::span(reinterpret_cast<const uint8_t*>(stored.data()), stored.size()),
                         DecodeRequest{}, a);
    auto rb = DecodeJpeg(
        std::span(reinterpret_cast<const uint8_t*>(original.data()), original.size()),
        DecodeRequest{}, b);
    ASSERT_TRUE(ra.has_value() && rb.has_value());
    ASSERT_EQ(a.width(), b.width());
    ASSERT_EQ(a.height(), b.height());
    for (int y = 0; y < a.height(); ++y) {
      ASSERT_EQ(0, std::memcmp(a.row(y), b.row(y), size_t(a.width()) * a.channels()));
    }
  }
}

TEST_F(PackTest, MaxSideShrinksOnlyLargerImages) {
  PackOptions o = Options(out_.path() / "small");
  o.max_side = 64;
  o.shard_size = 1 << 20;  // one shard
  auto summary = PackSource(*source_, o);
  ASSERT_TRUE(summary.has_value()) << summary.error().ToString();
  // MakeDataset's sides run 40..90: count those over 64 on the longer side.
  uint64_t expected = 0;
  for (int i = 0; i < 30; ++i) {
    const int w = 40 + (i * 37) % 51, h = 40 + (i * 53) % 51;
    expected += std::max(w, h) > 64 ? 1 : 0;
  }
  ASSERT_GT(expected, 0u);
  EXPECT_EQ(summary->resized, expected);
  auto manifest = nlohmann::json::parse(Slurp(fs::path(o.out_dir) / kPackManifestFile));
  EXPECT_EQ(manifest["resized"], expected);
  EXPECT_EQ(manifest["options"]["max_side"], 64);
  // Each of the first samples' KEY.json says whether it was resized, and from
  // and to which size (MakeDataset's sizes, from the file's number: source
  // sample k is not image k, as image_folder lists class_0's files first).
  const std::string shard = (fs::path(o.out_dir) / "shard-000000.tar").string();
  int checked = 0;
  for (size_t k = 0; k < 6; ++k) {
    const std::string name = fs::path(source_->path(k)).stem().string();  // img_NNN
    const int i = std::stoi(name.substr(4));
    const int w = 40 + (i * 37) % 51, h = 40 + (i * 53) % 51;
    char key[16];
    std::snprintf(key, sizeof key, "%09zu", k);
    auto meta = nlohmann::json::parse(Shell("tar -xOf '" + shard + "' " + key + ".json"));
    if (std::max(w, h) <= 64) {
      EXPECT_FALSE(meta.contains("resized")) << name;
      continue;
    }
    const double scale = 64.0 / std::max(w, h);
    EXPECT_EQ(meta["resized"]["from"], (nlohmann::json{w, h})) << name;
    EXPECT_EQ(meta["resized"]["to"],
              (nlohmann::json{std::lround(w * scale), std::lround(h * scale)}))
        << name;
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

TEST_F(PackTest, UnreadableSamplesAreSkippedAndListed) {
  // Paths relative to the list's folder (file_list's containment refuses
  // absolute ones unless allow_outside_root).
  const auto rel = [&](const std::string& p) { return fs::relative(p, data_.path()).string(); };
  // notes.json: not an image. It was stored as KEY.json beside the metadata's
  // KEY.json (webdataset refused the shard) and recorded as an image.
  data_.Write("notes.json", "{\"not\": \"an image\"}");
  const std::string list = "path,label\n" + rel(paths_[0]) + ",4\ngone.jpg,5\n" +
                           rel(paths_[2]) + ",6\nnotes.json,7\n";
  auto source = FileListSource::Parse(list, (data_.path() / "list.csv").string());
  ASSERT_TRUE(source.has_value()) << source.error().ToString();
  PackOptions o = Options(out_.path() / "list");
  o.shard_size = 1 << 20;  // one shard
  auto summary = PackSource(**source, o);
  ASSERT_TRUE(summary.has_value()) << summary.error().ToString();
  EXPECT_EQ(summary->samples, 2u);
  EXPECT_EQ(summary->skipped, 2u);
  auto manifest = nlohmann::json::parse(Slurp(fs::path(o.out_dir) / kPackManifestFile));
  ASSERT_EQ(manifest["skipped"].size(), 2u);
  EXPECT_EQ(manifest["skipped"][1]["sample"], 3);
  EXPECT_EQ(manifest["skipped"][1]["reason"], "not a JPEG or PNG image (by its content)");
  EXPECT_EQ(manifest["skipped"][0]["sample"], 1);
  EXPECT_NE(manifest["skipped"][0]["name"].get<std::string>().find("gone.jpg"), std::string::npos);
  // Keys are source indices: the skipped sample leaves a gap, labels come along.
  const std::string shard = (fs::path(o.out_dir) / "shard-000000.tar").string();
  EXPECT_EQ(Shell("tar -xOf '" + shard + "' 000000002.cls"), "6");
}

TEST_F(PackTest, RefusesANonEmptyOutputDirectory) {
  out_.Write("old/shard-000000.tar", "stale");
  auto r = PackSource(*source_, Options(out_.path() / "old"));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().message.find("not empty"), std::string::npos);
}

TEST(ParseByteSize, UnitsAndErrors) {
  EXPECT_EQ(ParseByteSize("256MB").value(), uint64_t{256} << 20);
  EXPECT_EQ(ParseByteSize("1GiB").value(), uint64_t{1} << 30);
  EXPECT_EQ(ParseByteSize("512k").value(), uint64_t{512} << 10);
  EXPECT_EQ(ParseByteSize("1000").value(), 1000u);
  EXPECT_EQ(ParseByteSize("1.5M").value(), uint64_t{3} << 19);
  EXPECT_FALSE(ParseByteSize("lots").has_value());
  EXPECT_FALSE(ParseByteSize("-5MB").has_value());
  EXPECT_FALSE(ParseByteSize("5 parsecs").has_value());
}

}  // namespace
}  // namespace sluice::runtime
