// Source ops: where samples come from. A spec's `source: {format: NAME, ...}`
// picks the source op NAME; the remaining keys are its parameters. Every
// source produces two tensors per sample: `jpg` (the encoded file, bytes[?])
// and `cls` (its integer label, int64[]); tar_shards' `jpg` is the sample's
// image member, whatever its extension. Sources have no reference
// implementation; the runtime (runtime/sources/) implements them.
#include "ops/families.h"

namespace sluice {
namespace {

using namespace ops_internal;

Result<std::vector<TensorType>> InferSource(std::string_view op,
                                            std::span<const TensorType> inputs) {
  SLUICE_RETURN_IF_ERROR(ExpectNumInputs(op, inputs, 0));
  return std::vector<TensorType>{EncodedBytes(), Scalar(DType::kInt64)};
}

// tar_shards' `remote` section: runtime/remote/object_store.h RemoteOptions.
std::vector<ParamDef> RemoteFields() {
  auto seconds = [](std::string name, std::string doc, double value) {
    return ParamDef{.name = std::move(name),
                    .type = ParamType::kFloat,
                    .doc = std::move(doc),
                    .default_value = VFloat(value),
                    .min = 0.0};
  };
  return {
      seconds("connect_timeout_s", "Seconds for a TCP + TLS connect, per attempt.", 10.0),
      seconds("deadline_s",
              "Seconds one call may take (a whole-shard stream included), retries, backoff and "
              "hedges together.",
              60.0),
      ParamDef{.name = "max_retries",
               .type = ParamType::kInt,
               .doc = "Attempts after the first for 5xx, 429, resets, timeouts, short bodies.",
               .default_value = VInt(5),
               .min = 0.0},
      seconds("backoff_initial_s", "First backoff cap, doubled per retry (full jitter).", 0.05),
      seconds("backoff_max_s", "Backoff cap.", 2.0),
      ParamDef{.name = "hedge_delay_s",
               .type = ParamType::kFloat,
               .doc = "Seconds before a hedged second range request; 0 = off, < 0 = auto "
                      "(the observed p95).",
               .default_value = VFloat(-1.0)},
      seconds("stall_timeout_s",
              "Seconds a whole-shard stream may receive nothing before it is retried from its "
              "first undelivered byte; 0 = off.",
              10.0),
      ParamDef{.name = "max_connections",
               .type = ParamType::kInt,
               .doc = "Keep-alive connections kept in the pool; with order: shuffle, also the "
                      "range requests prefetched at once (at most 32).",
               .default_value = VInt(16),
               .min = 1.0},
      ParamDef{.name = "io_threads",
               .type = ParamType::kInt,
               .doc = "curl event loops (threads) that send the requests, each with its share of "
                      "the connections; 0 = auto: one per 4 CPUs this process may use, 1 to 4; "
                      "never more than max_connections.",
               .default_value = VInt(0),
               .min = 0.0,
               .max = 64.0},
  };
}

ParamList RemoteDefaults() {
  ParamList out;
  for (const ParamDef& f : RemoteFields()) out[f.name] = *f.default_value;
  return out;
}

// tar_shards' `cache` section: runtime/remote/shard_cache.h.
std::vector<ParamDef> CacheFields() {
  return {
      ParamDef{.name = "dir",
               .type = ParamType::kString,
               .doc = "The cache directory (created when missing); \"\" = no cache.",
               .default_value = VStr("")},
      ParamDef{.name = "max_bytes",
               .type = ParamType::kInt,
               .doc = "Bytes the directory may hold (required with dir).",
               .default_value = VInt(0),
               .min = 0.0},
  };
}

ParamList CacheDefaults() {
  ParamList out;
  for (const ParamDef& f : CacheFields()) out[f.name] = *f.default_value;
  return out;
}

// One function per op, each returning its definition.

OpDef ImageFolderOp() {
  return OpDef{
      .name = "image_folder",
      .op_class = OpClass::kSource,
      .doc =
          "A directory with one subdirectory per class; each file with a .jpg, .jpeg or .png "
          "extension (any case) is a sample, labelled by its subdirectory's index in sorted "
          "name order.",
      .params = {ParamDef{.name = "path",
                          .type = ParamType::kString,
                          .doc = "Root directory; may use ${VAR}, bound at load time.",
                          .required = true}},
      .output_names = {"jpg", "cls"},
      .num_inputs = 0,
      .infer = [](std::span<const TensorType> in,
                  const ParamList&) { return InferSource("image_folder", in); },
  };
}

OpDef FileListOp() {
  return OpDef{
      .name = "file_list",
      .op_class = OpClass::kSource,
      .doc =
          "A CSV or TSV file with a header row naming a path column and an integer label "
          "column; relative paths are resolved against the list file's directory, and must "
          "stay under it unless allow_outside_root is set.",
      .params =
          {
              ParamDef{.name = "path",
                       .type = ParamType::kString,
                       .doc = "The list file; may use ${VAR}, bound at load time.",
                       .required = true},
              ParamDef{.name = "delimiter",
                       .type = ParamType::kEnum,
                       .doc = "Field separator: auto (tab if the header has a tab, else "
                              "comma), comma or tab.",
                       .default_value = VStr("auto"),
                       .choices = {"auto", "comma", "tab"}},
              ParamDef{.name = "path_column",
                       .type = ParamType::kString,
                       .doc = "Header name of the column holding each sample's file path.",
                       .default_value = VStr("path")},
              ParamDef{.name = "label_column",
                       .type = ParamType::kString,
                       .doc = "Header name of the column holding each sample's integer label.",
                       .default_value = VStr("label")},
              ParamDef{.name = "allow_outside_root",
                       .type = ParamType::kBool,
                       .doc = "Accept absolute paths and paths leaving the list file's "
                              "directory (through '..' or a symlink). Off (default): such a "
                              "row is an error at load and such a symlink a bad sample.",
                       .default_value = VBool(false)},
          },
      .output_names = {"jpg", "cls"},
      .num_inputs = 0,
      .check =
          [](const ParamList& p) {
            std::vector<ParamIssue> issues;
            if (P(p, "path_column").AsString() == P(p, "label_column").AsString()) {
              issues.push_back({"label_column", "path_column and label_column name the same column",
                                "give the label column's own header name"});
            }
            return issues;
          },
      .infer = [](std::span<const TensorType> in,
                  const ParamList&) { return InferSource("file_list", in); },
  };
}

OpDef TarShardsOp() {
  return OpDef{
      .name = "tar_shards",
      .op_class = OpClass::kSource,
      .doc =
          "WebDataset-style POSIX tar shards (written by `sluice pack`, webdataset's "
          "ShardWriter or GNU tar): a sample is a run of consecutive members sharing a key "
          "(KEY.jpg, KEY.cls, ...); its image is the member with an `image` extension and its "
          "label the decimal text of the `label` member. Read through an index (index.sluice "
          "beside the shards, else one built by scanning the shards once and cached beside "
          "them or in the cache directory). A sample missing a field, or corrupt tar data, is "
          "a bad sample under output.on_error.",
      .params =
          {
              ParamDef{.name = "path",
                       .type = ParamType::kString,
                       .doc = "A directory (its *.tar files, sorted), a glob, or a brace "
                              "pattern such as shard-{000000..000127}.tar; may use ${VAR}.",
                       .required = true},
              ParamDef{.name = "image",
                       .type = ParamType::kString,
                       .doc = "Extensions of the image member, in order of preference, "
                              "separated by ';' or ',' (case-insensitive).",
                       .default_value = VStr("jpg;jpeg;png")},
              ParamDef{.name = "label",
                       .type = ParamType::kString,
                       .doc = "Extension of the member holding the integer label as text; "
                              "\"\" for none (every label is -1).",
                       .default_value = VStr("cls")},
              ParamDef{.name = "index",
                       .type = ParamType::kString,
                       .doc = "An index file to use (it must list every shard); \"\" = find "
                              "or build one.",
                       .default_value = VStr("")},
              ParamDef{.name = "cache_dir",
                       .type = ParamType::kString,
                       .doc = "Where to cache a built index when the shards' directory is not "
                              "writable; \"\" = $SLUICE_CACHE_DIR, else "
                              "$XDG_CACHE_HOME/sluice, else ~/.cache/sluice.",
                       .default_value = VStr("")},
              ParamDef{.name = "page_cache_prefetch",
                       .type = ParamType::kBool,
                       .doc = "Local paths: ask the kernel to read the members of the samples "
                              "the loader will read next (this batch and 256 samples on) into "
                              "the page cache ahead of the workers (posix_fadvise WILLNEED "
                              "from one helper thread); false = read on demand.",
                       .default_value = VBool(true)},
              ParamDef{.name = "read_ahead",
                       .type = ParamType::kInt,
                       .doc = "URL paths, order shard_shuffle or sequential (or with a cache): "
                              "whole shards streamed ahead of the one being read; -1 = auto: "
                              "2, growing by one whenever a read waits for a shard already "
                              "being read ahead, up to what read_ahead_bytes holds "
                              "(docs/remote.md).",
                       .default_value = VInt(-1),
                       .min = -1.0,
                       .max = 64.0},
              ParamDef{.name = "read_ahead_bytes",
                       .type = ParamType::kInt,
                       .doc = "URL paths: bytes of whole shards held in memory at once by the "
                              "read-ahead (a larger shard is read sample by sample); -1 = auto: "
                              "1/8 of the machine's memory, at most 1 GiB.",
                       .default_value = VInt(-1),
                       .min = -1.0},
              ParamDef{.name = "cache",
                       .type = ParamType::kSection,
                       .doc = "URL paths: a local cache of whole shards shared by the "
                              "machine's loaders {dir, max_bytes}; dir \"\" = none "
                              "(docs/remote.md).",
                       .default_value = ParamValue{CacheDefaults()},
                       .fields = CacheFields()},
              ParamDef{.name = "remote",
                       .type = ParamType::kSection,
                       .doc = "URL paths: request knobs {connect_timeout_s, deadline_s, "
                              "max_retries, backoff_initial_s, backoff_max_s, hedge_delay_s, "
                              "stall_timeout_s, max_connections, io_threads} (docs/remote.md).",
                       .default_value = ParamValue{RemoteDefaults()},
                       .fields = RemoteFields()},
          },
      .output_names = {"jpg", "cls"},
      .num_inputs = 0,
      .check =
          [](const ParamList& p) {
            std::vector<ParamIssue> issues;
            const std::string& image = P(p, "image").AsString();
            if (image.find_first_not_of(";, \t.") == std::string::npos) {
              issues.push_back(
                  {"image", "tar_shards: `image` names no extension", "e.g. image: \"jpg;png\""});
            }
            const std::string& label = P(p, "label").AsString();
            if (label.find_first_of(";, \t") != std::string::npos) {
              issues.push_back({"label", "tar_shards: `label` names more than one extension",
                                "give one extension, e.g. label: cls"});
            }
            return issues;
          },
      .infer = [](std::span<const TensorType> in,
                  const ParamList&) { return InferSource("tar_shards", in); },
  };
}

}  // namespace

void RegisterSourceOps(std::vector<OpDef>& ops) {
  ops.push_back(ImageFolderOp());
  ops.push_back(FileListOp());
  ops.push_back(TarShardsOp());
}

}  // namespace sluice
