#include "pack/packer.h"

#include <openssl/evp.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "common/usable_cores.h"
#include "pack/restart_markers.h"
#include "pack/shrink.h"
#include "runtime/sources/tar/index_store.h"
#include "runtime/sources/tar/shard_index.h"
#include "runtime/sources/tar/tar_format.h"

namespace sluice::runtime {
namespace fs = std::filesystem;
namespace {

// One source sample made ready for writing (by a parallel task).
struct PreparedSample {
  std::vector<uint8_t> read;    // the source bytes (reused between windows)
  std::vector<uint8_t> shrunk;     // the re-encoded image when resized
  std::vector<uint8_t> restarted;  // image() with restart markers, when added
  size_t read_size = 0;
  bool resized = false;
  bool restarted_ok = false;  // `restarted` holds the image to store
  std::string ext;       // "jpg" | "png" | the name's own extension
  std::string metadata;  // KEY.json
  std::optional<Error> error;
  std::span<const uint8_t> image() const {
    if (restarted_ok) return restarted;
    return resized ? std::span<const uint8_t>(shrunk)
                   : std::span<const uint8_t>(read.data(), read_size);
  }
};

// A member's bytes in a tar file: its header block, then its data padded to
// whole blocks (tar::Writer writes one header per member: names are short).
uint64_t TarBytes(uint64_t size) {
  return tar::kBlockSize + (size + tar::kBlockSize - 1) / tar::kBlockSize * tar::kBlockSize;
}

// A finished shard's size when its members take `members` bytes: two zero
// end blocks, padded to a 10240-byte record (tar::Writer::Finish).
uint64_t ArchiveBytes(uint64_t members) {
  constexpr uint64_t kRecord = 10240;
  return (members + 2 * tar::kBlockSize + kRecord - 1) / kRecord * kRecord;
}

std::string Key(uint64_t index) {
  char key[32];
  std::snprintf(key, sizeof key, "%09llu", static_cast<unsigned long long>(index));
  return key;
}

std::string ShardName(size_t k) {
  char name[32];
  std::snprintf(name, sizeof name, "shard-%06zu.tar", k);
  return name;
}

// The sample's name relative to the source's root, for KEY.json.
std::string RelativeName(const std::string& name, const std::string& root) {
  if (root.empty() || name.size() <= root.size() || name.compare(0, root.size(), root) != 0) {
    return name;
  }
  size_t start = root.size();
  while (start < name.size() && name[start] == '/') ++start;
  return name.substr(start);
}

void Prepare(const Source& source, uint64_t index, const PackOptions& options,
             PreparedSample& out) {
  out.error.reset();
  out.resized = false;
  out.restarted_ok = false;
  auto n = source.Read(index, out.read);
  if (!n) {
    out.error = n.error();
    return;
  }
  out.read_size = *n;
  // The index holds a 32-bit size and label (with sentinels): refuse what
  // does not fit before any work.
  const int64_t label = source.label(index);
  if (label <= int64_t{tar::SampleRecord::kCorruptTail} ||
      label > std::numeric_limits<int32_t>::max()) {
    out.error = Error{ErrorCode::kInvalidArgument,
                      "label " + std::to_string(label) + " does not fit the index"};
    return;
  }
  if (out.read_size >= tar::SampleRecord::kSparseMember) {  // the smallest size sentinel
    out.error = Error{ErrorCode::kInvalidArgument, "image of 4 GiB or more"};
    return;
  }
  const std::string name = source.SampleName(index);
  std::span<const uint8_t> bytes(out.read.data(), out.read_size);
  nlohmann::json meta = {{"path", RelativeName(name, options.source_path)}, {"label", label}};
  // Shards hold what the loader decodes: anything else would be a member the
  // index cannot name (or a second KEY.json beside the metadata).
  const ImageFormat format = SniffImageFormat(bytes);
  if (format == ImageFormat::kUnknown) {
    out.error = Error{ErrorCode::kUnsupported, "not a JPEG or PNG image (by its content)"};
    return;
  }
  out.ext = std::string(ImageFormatExtension(format));
  if (options.max_side > 0) {
    auto shrunk = ShrinkToMaxSide(bytes, options.max_side, options.quality, out.shrunk);
    if (!shrunk) {
      out.error = shrunk.error();
      return;
    }
    out.resized = shrunk->resized;
    if (shrunk->resized) {
      meta["resized"] = {{"from", {shrunk->original_width, shrunk->original_height}},
                         {"to", {shrunk->width, shrunk->height}}};
    }
  }
  if (options.restart_markers && format == ImageFormat::kJpeg) {
    out.restarted_ok = AddRestartMarkers(out.image(), out.restarted);
  }
  // Names need not be UTF-8; JSON must be: bad bytes become U+FFFD.
  out.metadata = meta.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<std::string> Sha256File(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return MakeError(ErrorCode::kIo, "cannot reopen " + path + " to checksum it");
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  std::vector<char> chunk(1 << 20);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    EVP_DigestUpdate(ctx.get(), chunk.data(), static_cast<size_t>(in.gcount()));
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &length);
  std::string hex;
  char byte[3];
  for (unsigned int i = 0; i < length; ++i) {
    std::snprintf(byte, sizeof byte, "%02x", digest[i]);
    hex += byte;
  }
  return hex;
}

// The shard being written and what the index and manifest need of it.
class ShardSink {
 public:
  ShardSink(const PackOptions& options, tar::IndexWriter& index, nlohmann::json& shards)
      : options_(options), index_(index), shards_(shards) {}

  Status Add(uint64_t key_index, const PreparedSample& s, int64_t label) {
    const std::string key = Key(key_index);
    const std::string cls = std::to_string(label);
    const uint64_t bytes =
        TarBytes(s.image().size()) + TarBytes(cls.size()) + TarBytes(s.metadata.size());
    if (writer_ && !records_.empty() &&
        ArchiveBytes(writer_->bytes_written() + bytes) > options_.shard_size) {
      SLUICE_RETURN_IF_ERROR(Close());
    }
    if (!writer_) SLUICE_RETURN_IF_ERROR(Open());
    auto offset = writer_->Add(key + "." + s.ext, s.image());
    if (!offset) return std::unexpected(offset.error());
    SLUICE_RETURN_IF_ERROR(writer_->Add(key + ".cls", AsBytes(cls)));
    SLUICE_RETURN_IF_ERROR(writer_->Add(key + ".json", AsBytes(s.metadata)));
    records_.push_back(tar::SampleRecord{*offset, static_cast<uint32_t>(s.image().size()),
                                         static_cast<int32_t>(label)});
    return {};
  }

  Status Close() {
    if (!writer_) return {};
    auto size = writer_->Finish();
    if (!size) return std::unexpected(size.error());
    const std::string name = ShardName(names_.size() - 1);
    const std::string path = (fs::path(options_.out_dir) / name).string();
    auto sha = Sha256File(path);
    if (!sha) return std::unexpected(sha.error());
    SLUICE_RETURN_IF_ERROR(index_.AddShard(name, *size, records_));
    shards_.push_back(
        {{"name", name}, {"samples", records_.size()}, {"bytes", *size}, {"sha256", *sha}});
    bytes_ += *size;
    records_.clear();
    writer_.reset();
    return {};
  }

  const std::vector<std::string>& names() const { return names_; }
  uint64_t bytes() const { return bytes_; }

 private:
  static std::span<const uint8_t> AsBytes(const std::string& s) {
    return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
  }
  Status Open() {
    names_.push_back(ShardName(names_.size()));
    auto writer = tar::Writer::Create((fs::path(options_.out_dir) / names_.back()).string());
    if (!writer) return std::unexpected(writer.error());
    writer_.emplace(std::move(*writer));
    return {};
  }

  const PackOptions& options_;
  tar::IndexWriter& index_;
  nlohmann::json& shards_;
  std::optional<tar::Writer> writer_;
  std::vector<tar::SampleRecord> records_;
  std::vector<std::string> names_;
  uint64_t bytes_ = 0;
};

Status CheckOptions(const PackOptions& options) {
  if (options.out_dir.empty()) return MakeError(ErrorCode::kInvalidArgument, "no output directory");
  if (options.shard_size < 4096) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "shard size " + std::to_string(options.shard_size) + " bytes is too small",
                     "use at least 4 KiB; WebDataset suggests 100 MB to 1 GB");
  }
  if (options.quality < 1 || options.quality > 100) {
    return MakeError(ErrorCode::kInvalidArgument, "--quality must be in 1..100");
  }
  std::error_code ec;
  if (fs::exists(options.out_dir, ec) && !fs::is_empty(options.out_dir, ec)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "output directory " + options.out_dir + " is not empty",
                     "pack into a new directory (old shards would mix with new ones)");
  }
  fs::create_directories(options.out_dir, ec);
  if (ec)
    return MakeError(ErrorCode::kIo, "cannot create " + options.out_dir + ": " + ec.message());
  return {};
}

}  // namespace

Result<PackSummary> PackSource(const Source& source, const PackOptions& options) {
  SLUICE_RETURN_IF_ERROR(CheckOptions(options));
  const int threads = options.threads > 0 ? options.threads : UsableCores();
  tbb::task_arena arena(threads);
  std::vector<PreparedSample> window(static_cast<size_t>(threads) * 16);
  tar::IndexWriter index{tar::FieldMapping{}};  // images jpg/jpeg/png, labels cls
  nlohmann::json shards = nlohmann::json::array();
  nlohmann::json skipped = nlohmann::json::array();
  ShardSink sink(options, index, shards);
  PackSummary summary;
  const uint64_t n = source.size();
  for (uint64_t first = 0; first < n; first += window.size()) {
    const size_t count = static_cast<size_t>(std::min<uint64_t>(window.size(), n - first));
    arena.execute([&] {
      tbb::parallel_for(size_t{0}, count,
                        [&](size_t k) { Prepare(source, first + k, options, window[k]); });
    });
    for (size_t k = 0; k < count; ++k) {
      const uint64_t i = first + k;
      const PreparedSample& s = window[k];
      if (s.error) {
        skipped.push_back(
            {{"sample", i}, {"name", source.SampleName(i)}, {"reason", s.error->message}});
        ++summary.skipped;
      } else {
        SLUICE_RETURN_IF_ERROR(sink.Add(i, s, source.label(i)));
        ++summary.samples;
        summary.resized += s.resized ? 1 : 0;
      }
      if (options.progress) options.progress(i + 1, n);
    }
  }
  SLUICE_RETURN_IF_ERROR(sink.Close());
  if (summary.samples == 0) {
    return MakeError(ErrorCode::kInvalidArgument, "no sample could be read",
                     "see the manifest's \"skipped\" list");
  }
  SLUICE_RETURN_IF_ERROR(index.Write((fs::path(options.out_dir) / tar::kPackIndexName).string()));
  summary.shards = sink.names();
  summary.bytes = sink.bytes();

  nlohmann::json manifest = {
      {"format", "sluice-shards"},
      {"version", 1},
      {"samples", summary.samples},
      {"class_names", source.class_names()},
      {"shards", shards},
      {"index", tar::kPackIndexName},
      {"fields", {{"image", "jpg or png (by content)"}, {"label", "cls"}, {"metadata", "json"}}},
      {"options",
       {{"source", {{"format", options.source_format}, {"path", options.source_path}}},
        {"shard_size", options.shard_size},
        {"max_side", options.max_side},
        {"quality", options.quality},
        {"restart_markers", options.restart_markers}}},
      {"resized", summary.resized},
      {"skipped", skipped}};
  const std::string path = (fs::path(options.out_dir) / kPackManifestFile).string();
  std::ofstream out(path, std::ios::binary);
  out << manifest.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  if (!out) return MakeError(ErrorCode::kIo, "cannot write " + path);
  return summary;
}

Result<uint64_t> ParseByteSize(const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (...) {
    used = 0;
  }
  std::string unit = text.substr(used);
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (unit.ends_with("ib"))
    unit.resize(unit.size() - 2);
  else if (unit.ends_with("b"))
    unit.resize(unit.size() - 1);
  static const std::pair<const char*, double> kUnits[] = {{"", 1.0},
                                                          {"k", 1024.0},
                                                          {"m", 1024.0 * 1024},
                                                          {"g", 1024.0 * 1024 * 1024},
                                                          {"t", 1024.0 * 1024 * 1024 * 1024}};
  for (const auto& [name, scale] : kUnits) {
    if (used > 0 && value > 0 && unit == name) return static_cast<uint64_t>(value * scale);
  }
  return MakeError(ErrorCode::kInvalidArgument, "'" + text + "' is not a size",
                   "write a number with an optional unit: 256MB, 1GiB, 512k");
}

}  // namespace sluice::runtime
