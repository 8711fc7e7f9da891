// `sluice pack`: a source (any the registry knows) -> WebDataset-compatible
// POSIX tar shards, a Sluice index and a manifest, in OUT_DIR:
//
//   shard-000000.tar ...   sample k of the source is members KEY.jpg or KEY.png
//                          (the format its bytes have), KEY.cls (the label as
//                          decimal text) and KEY.json ({"path", "label"}, and
//                          "resized" {"from":[w,h],"to":[w,h]} when shrunk);
//                          KEY = the source index, 9 digits. Samples keep the
//                          source's order; a shard is closed before a sample
//                          that would take it past shard_size (a shard holds
//                          at least one sample).
//   index.sluice           the tar_shards index (its name: tar::kPackIndexName;
//                          its format: runtime/sources/tar/shard_index.h)
//   manifest.json          sample and shard counts, class names, each shard's
//                          sample count, bytes and SHA-256, the options used,
//                          and the samples skipped with their reasons.
//
// Deterministic: the same source and options give byte-identical files,
// whatever `threads` is (samples are prepared in parallel, written in order;
// tar headers carry no time, owner or host).
//
// A sample that cannot be read, or (with max_side) decoded, is skipped and
// listed in the manifest; pack carries on. OUT_DIR must be new or empty.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/sources/source.h"
#include "sluice/result.h"

namespace sluice::runtime {

struct PackOptions {
  std::string out_dir;
  uint64_t shard_size = uint64_t{256} << 20;  // bytes of tar per shard (target)
  int max_side = 0;                           // > 0: shrink larger images (pack/shrink.h)
  int quality = 90;                           // JPEG quality of shrunk images, 1..100
  // Store baseline JPEGs re-encoded losslessly with restart markers, so the
  // loader decodes only the tiles a crop needs (pack/restart_markers.h).
  bool restart_markers = true;
  int threads = 0;                            // 0: every core
  // Recorded in the manifest ("source"); and stripped from the front of
  // sample names to give each KEY.json's relative "path".
  std::string source_format, source_path;
  // Called from the writing thread after each written sample (may be empty).
  std::function<void(uint64_t done, uint64_t total)> progress;
};

struct PackSummary {
  uint64_t samples = 0;  // written
  uint64_t skipped = 0;
  uint64_t resized = 0;
  uint64_t bytes = 0;               // all shards
  std::vector<std::string> shards;  // file names, in order
};

// Errors: kInvalidArgument (bad options, OUT_DIR not empty, no sample
// written), kIo (writing failed).
Result<PackSummary> PackSource(const Source& source, const PackOptions& options);

// "256MB", "1GiB", "512k", "1000000" -> bytes (k/M/G/T, with or without "B"
// or "iB", binary multiples). Errors: kInvalidArgument naming the text.
Result<uint64_t> ParseByteSize(const std::string& text);

// The manifest's name. The index is tar::kPackIndexName
// (runtime/sources/tar/index_store.h): the name tar_shards looks for.
inline constexpr const char* kPackManifestFile = "manifest.json";

}  // namespace sluice::runtime
