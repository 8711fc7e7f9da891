// `sluice inspect --data`: one pass over a source's samples that says what the
// dataset holds — how many samples, which file formats, file-size and
// image-dimension histograms, class balance, the files that cannot be read or
// decoded, and what decoding them all would cost by the cost model.
//
// Dimensions come from the headers only (libjpeg-turbo's header read, spng's
// IHDR; runtime/decode's ReadHeader), so a scan reads every byte once but
// decodes nothing; `full_decode` also decodes every image in full, which finds
// files whose headers are fine but whose data is truncated or damaged.
//
// Thread safety: ScanDataset is reentrant; it reads the source from
// `threads` threads (Source::Read is thread-safe) and calls `progress` from
// them, one call at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/hardware_profile.h"
#include "runtime/sources/source.h"
#include "sluice/result.h"

namespace sluice::inspect {

// Counts in power-of-two buckets: bucket k holds values in [2^k, 2^(k+1)),
// bucket 0 also holds 0.
struct Log2Histogram {
  std::vector<uint64_t> counts;  // index k = bucket [2^k, 2^(k+1))
  void Add(uint64_t value);
  void Merge(const Log2Histogram& other);
  // [{"lo", "hi", "count"}] from the first to the last non-empty bucket.
  nlohmann::json ToJson() const;
};

// Min, max and mean of a quantity over the samples it was measured for.
struct Range {
  uint64_t n = 0, min = 0, max = 0;
  double sum = 0;
  void Add(uint64_t value);
  void Merge(const Range& other);
  double mean() const { return n == 0 ? 0 : sum / static_cast<double>(n); }
  nlohmann::json ToJson() const;
};

struct BadSample {
  uint64_t index = 0;
  std::string name;
  std::string reason;  // "read: ..." or "decode: ..." (the error's message)
};

struct DataScanOptions {
  int threads = 0;           // <= 0: hardware concurrency
  bool full_decode = false;  // also decode every image in full
  // The cost model's decode estimate needs a hardware profile; none: no estimate.
  const HardwareProfile* profile = nullptr;
  std::function<void(uint64_t done, uint64_t total)> progress;
};

struct DataScan {
  std::string source_format;
  std::string source_path;
  bool full_decode = false;
  uint64_t samples = 0;
  uint64_t bytes = 0;                       // total of the samples read
  std::map<std::string, uint64_t> formats;  // "jpeg", "png", "other" (not an image), "unreadable"
  Log2Histogram file_bytes, widths, heights;
  Range file_size, width, height;
  // Class balance: count per label value; names where the source knows them.
  std::vector<std::string> class_names;
  std::map<int64_t, uint64_t> labels;
  std::vector<BadSample> bad;  // in sample order
  // Cost model: full-decode seconds of every decodable image on one core, and
  // the profile it came from ("" and 0 without a profile).
  std::string profile_machine;
  double decode_core_seconds = 0;
  double megapixels = 0;  // sum over the decodable images

  nlohmann::json ToJson() const;
  // The human-readable summary `sluice inspect --data` prints.
  std::string ToText() const;
};

// Scans every sample of `source`. `format`/`path` are only recorded (what the
// source was opened from). Errors: none from bad samples (they are listed);
// kInvalidArgument for a source with no samples is not an error either (an
// empty scan). The only failure is kInternal from a broken thread start.
Result<DataScan> ScanDataset(const runtime::Source& source, const std::string& format,
                             const std::string& path, const DataScanOptions& options);

}  // namespace sluice::inspect
