// Shared fixtures for the loader tests over a tar_shards source: WebDataset
// shards written from an image folder, and the plan.json edit that switches
// the test plan's source to tar_shards.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/sources/image_folder_source.h"
#include "runtime/sources/tar/tar_format.h"
#include "tests/runtime/loader/loader_test_util.h"

namespace sluice::testing_loader {

// Writes the first `shards * per_shard` samples of the image folder at
// `folder`, in its sample order, as `shards` tar shards out/shard-000000.tar,
// out/shard-000001.tar, ...: shard k holds samples k * per_shard up to
// (k + 1) * per_shard - 1, sample i as the members KEY.jpg (the image file's
// bytes) and KEY.cls (its label in decimal), KEY being i as %06zu. Any error
// is a fatal test failure: call it under ASSERT_NO_FATAL_FAILURE.
inline void WriteTarShards(const fs::path& folder, const fs::path& out, int shards, int per_shard) {
  auto src = runtime::ImageFolderSource::Open(folder.string());
  ASSERT_TRUE(src.has_value());
  std::vector<uint8_t> bytes;
  for (int k = 0; k < shards; ++k) {
    char shard[32];
    std::snprintf(shard, sizeof(shard), "shard-%06d.tar", k);
    auto w = runtime::tar::Writer::Create((out / shard).string());
    ASSERT_TRUE(w.has_value());
    const size_t first = static_cast<size_t>(per_shard) * static_cast<size_t>(k);
    for (size_t i = first; i < first + static_cast<size_t>(per_shard); ++i) {
      auto n = (*src)->Read(i, bytes);
      ASSERT_TRUE(n.has_value());
      char key[24];  // any size_t as %06zu
      std::snprintf(key, sizeof(key), "%06zu", i);
      const std::string label = std::to_string((*src)->label(i));
      ASSERT_TRUE(w->Add(std::string(key) + ".jpg", {bytes.data(), *n}).has_value());
      ASSERT_TRUE(w->Add(std::string(key) + ".cls",
                         {reinterpret_cast<const uint8_t*>(label.data()), label.size()})
                      .has_value());
    }
    ASSERT_TRUE(w->Finish().has_value());
  }
}

// Switches plan.json `j` to a tar_shards source over `path` (a folder, a
// brace pattern or a URL; ${DATA} is expanded by Plan::Load) as
// WriteTarShards writes it: images from the .jpg member, labels from .cls,
// no explicit index file, and `cache_dir` for the shard index ("" for none).
// Replaces all of source.params; callers add further params after it.
inline void UseTarShardsSource(nlohmann::json& j, const std::string& path,
                               const std::string& cache_dir = "") {
  j["source"]["format"] = "tar_shards";
  j["source"]["params"] = {
      {"path", path}, {"image", "jpg"}, {"label", "cls"}, {"index", ""}, {"cache_dir", cache_dir}};
}

}  // namespace sluice::testing_loader
