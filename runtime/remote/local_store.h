// The ObjectStore for local files: plain paths and file:// URLs
// (runtime/remote/object_store.h). Reads are pread on a descriptor opened per
// call (shards are read in large ranges, so the open is not on a per-sample
// hot path); Stream reads 4 MiB chunks. List lists a directory prefix.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <string_view>

#include "runtime/metrics/latency_recorder.h"
#include "runtime/remote/object_store.h"

namespace sluice::runtime::remote {

// The local path a plain path or file:// URL names: "file:///a/b" -> "/a/b",
// "file://localhost/a/b" -> "/a/b", "file:rel" is refused, percent escapes
// (%20) are decoded. Errors: kInvalidArgument for another host or a URL
// without an absolute path.
Result<std::string> LocalPathOf(std::string_view url);

class LocalStore final : public ObjectStore {
 public:
  LocalStore() = default;

  Result<ObjectInfo> Stat(const std::string& url) override;
  // `prefix` is a directory ("file:///data/shards/": its regular files) or a
  // directory plus a file-name prefix ("file:///data/shards/train-": the
  // files of /data/shards starting with "train-"); not recursive. URLs keep
  // the prefix's spelling (file:// or plain).
  Result<std::vector<ObjectInfo>> List(const std::string& prefix) override;
  Status ReadRange(const std::string& url, uint64_t offset, uint64_t length, uint8_t* out) override;
  Status Stream(const std::string& url, const Sink& sink) override;
  void Cancel() override { cancelled_.store(true); }
  // requests = calls that read; bytes_fetched = bytes read; no retries,
  // hedges or timeouts; latency over the last 1024 reads.
  RequestStats stats() const override;

 private:
  Status Cancelled(const std::string& url) const;
  void Record(uint64_t bytes, double seconds, bool ok);

  std::atomic<bool> cancelled_{false};
  mutable std::mutex mutex_;
  RequestStats stats_;
  LatencyRecorder latency_{1024};
};

}  // namespace sluice::runtime::remote
