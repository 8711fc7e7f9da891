// Shared fixtures for the loader tests: a small compiled plan (32x32 float32
// CHW outputs, batch 4) made once per test binary, and JPEG data sets written
// with libturbojpeg into temporary folders.
//
// The plan comes from $SLUICE_TEST_PLAN when set (the sanitizer runs use a
// plan compiled by the normal build; see tests/sanitizers/run.sh), else it is
// compiled here through the compiler library (one SSE4.1 target, no CUDA).
#pragma once

#include <gtest/gtest.h>
#include <turbojpeg.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#ifndef SLUICE_TESTS_NO_COMPILER
#include "compiler/codegen/codegen.h"
#include "compiler/driver/compile_spec.h"
#endif
#include "sluice/sluice.h"

namespace sluice::testing_loader {

namespace fs = std::filesystem;

// The whole file as a string ("" when it cannot be read).
inline std::string ReadTextFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The spec of the test plan (tests/runtime/loader/loader_test.yaml).
inline std::string LoaderTestSpec() {
  return ReadTextFile(std::string(SLUICE_SOURCE_DIR) + "/tests/runtime/loader/loader_test.yaml");
}

// A directory removed (recursively) on destruction.
class ScopedDir {
 public:
  explicit ScopedDir(const std::string& tag) {
    std::string tmpl = (fs::temp_directory_path() / ("sluice_" + tag + "_XXXXXX")).string();
    char* made = ::mkdtemp(tmpl.data());
    path_ = made ? made : "";
  }
  ~ScopedDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

#ifndef SLUICE_TESTS_NO_COMPILER
// One SSE4.1 target (every x86-64 test machine runs it; one target keeps the
// compile short), no CUDA.
inline CodegenOptions TestCodegenOptions() {
  CodegenOptions options;
  options.cpu_targets = {"x86-64-linux-sse41"};
  options.cuda = false;
  return options;
}
#endif

// The compiled test plan's directory (compiled on first use). Empty + error
// text when compilation failed.
struct CompiledPlan {
  std::unique_ptr<ScopedDir> dir;
  std::string path;
  std::string error;
};

inline const CompiledPlan& TestPlan() {
  static CompiledPlan plan = [] {
    CompiledPlan p;
    if (const char* env = std::getenv("SLUICE_TEST_PLAN"); env != nullptr && *env) {
      p.path = env;
      return p;
    }
#ifdef SLUICE_TESTS_NO_COMPILER
    p.error = "SLUICE_TEST_PLAN is not set and this test binary has no compiler";
#else
    p.dir = std::make_unique<ScopedDir>("loader_plan");
    std::string out = (p.dir->path() / "loader_test.plan").string();
    Status st = CompileSpecText(LoaderTestSpec(), "loader_test.yaml", out, TestCodegenOptions());
    if (!st) {
      p.error = st.error().ToString();
      return p;
    }
    p.path = out;
#endif
    return p;
  }();
  return plan;
}

// A copy of the plan directory `from` at `to` (replaced if present) with its
// plan.json edited by `edit`.
inline std::string CopyWithEditedJson(const fs::path& from, const fs::path& to,
                                      const std::function<void(nlohmann::json&)>& edit) {
  fs::remove_all(to);
  fs::copy(from, to, fs::copy_options::recursive);
  nlohmann::json j = nlohmann::json::parse(ReadTextFile(to / "plan.json"));
  edit(j);
  std::ofstream(to / "plan.json", std::ios::trunc) << j.dump(2);
  return to.string();
}

// A copy of the test plan in `dir` with plan.json edited by `edit`.
inline std::string EditedPlan(const fs::path& dir, const std::string& name,
                              const std::function<void(nlohmann::json&)>& edit) {
  return CopyWithEditedJson(TestPlan().path, dir / name, edit);
}

// Photo-like deterministic RGB content: smooth gradients plus texture.
inline std::vector<uint8_t> MakeJpeg(int width, int height, uint32_t seed, int quality = 90) {
  std::vector<uint8_t> rgb(static_cast<size_t>(width) * height * 3);
  uint32_t s = seed * 2654435761u + 1;
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < 3; ++c) {
        s = s * 1664525u + 1013904223u;
        int v = (x * (c + 1) * 255 / width + y * (3 - c) * 255 / height) / 2 +
                static_cast<int>((s >> 24) % 24) + static_cast<int>(seed % 50);
        rgb[(static_cast<size_t>(y) * width + x) * 3 + c] = static_cast<uint8_t>(v & 255);
      }
    }
  }
  tjhandle tj = tjInitCompress();
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  tjCompress2(tj, rgb.data(), width, 0, height, TJPF_RGB, &jpeg, &size, TJSAMP_420, quality,
              TJFLAG_ACCURATEDCT);
  std::vector<uint8_t> out(jpeg, jpeg + size);
  tjFree(jpeg);
  tjDestroy(tj);
  return out;
}

// `jpeg` with the height and width fields of its first SOF0 (baseline frame)
// header set to `height` x `width`, the rest unchanged: an image whose header
// claims a size its data does not have. Unchanged when there is no SOF0.
inline std::vector<uint8_t> WithSof0Size(std::vector<uint8_t> jpeg, uint16_t height,
                                         uint16_t width) {
  for (size_t i = 0; i + 8 < jpeg.size(); ++i) {
    if (jpeg[i] == 0xFF && jpeg[i + 1] == 0xC0) {
      jpeg[i + 5] = static_cast<uint8_t>(height >> 8), jpeg[i + 6] = height & 255;
      jpeg[i + 7] = static_cast<uint8_t>(width >> 8), jpeg[i + 8] = width & 255;
      break;
    }
  }
  return jpeg;
}

inline void WriteBytes(const fs::path& path, const std::vector<uint8_t>& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// `n` JPEGs spread over `classes` class folders under dir, sizes between
// min_side and max_side. Returns the paths in write order.
inline std::vector<std::string> MakeDataset(const fs::path& dir, int n, int classes = 3,
                                            int min_side = 40, int max_side = 90) {
  std::vector<std::string> paths;
  for (int i = 0; i < n; ++i) {
    int w = min_side + (i * 37) % (max_side - min_side + 1);
    int h = min_side + (i * 53) % (max_side - min_side + 1);
    char name[64];
    std::snprintf(name, sizeof name, "class_%d/img_%03d.jpg", i % classes, i);
    fs::path p = dir / name;
    WriteBytes(p, MakeJpeg(w, h, static_cast<uint32_t>(i)));
    paths.push_back(p.string());
  }
  return paths;
}

// A loader for rank 0 of a world of 1 with `threads` threads (every other
// LoaderOptions field at its default) over the plan at `plan_path`, with
// ${DATA} bound to `data`, tracing into `trace_path` from Create when it is
// not empty. Throws std::runtime_error with the error's text when the plan
// does not load or the loader cannot be created.
inline Loader MakeSingleRankLoader(const std::string& plan_path, const fs::path& data, int threads,
                                   const fs::path& trace_path = {}) {
  auto plan = Plan::Load(plan_path, {{"DATA", data.string()}});
  if (!plan) throw std::runtime_error(plan.error().ToString());
  LoaderOptions o;
  o.threads = threads;
  o.rank = 0;
  o.world_size = 1;
  o.trace_path = trace_path.string();
  auto loader = Loader::Create(*plan, o);
  if (!loader) throw std::runtime_error(loader.error().ToString());
  return std::move(*loader);
}

// The bytes of one field of a batch, on the host.
using FieldBytesFn = std::function<std::vector<uint8_t>(const TensorView&)>;

// A host field's bytes. A device field (a GPU plan's) is a test failure here,
// not a host read of a device pointer: gpu_stage_test.cc passes a FieldBytesFn
// that copies those back with the driver.
inline std::vector<uint8_t> HostFieldBytes(const TensorView& v) {
  if (v.device_type != DeviceType::kCPU) {
    ADD_FAILURE() << "HostFieldBytes: a field is on the device; copy it to the host first";
    return {};
  }
  const auto* p = static_cast<const uint8_t*>(v.data);
  return {p, p + v.bytes};
}

// All bytes of every field of `batch`, in field order, for comparisons.
inline std::vector<uint8_t> BatchBytes(const Batch& batch,
                                       const FieldBytesFn& field_bytes = HostFieldBytes) {
  std::vector<uint8_t> bytes;
  for (const TensorView& v : batch.fields()) {
    const std::vector<uint8_t> field = field_bytes(v);
    bytes.insert(bytes.end(), field.begin(), field.end());
  }
  return bytes;
}

// BatchBytes of every batch of one epoch.
struct EpochBytes {
  std::vector<std::vector<uint8_t>> batches;
  std::vector<std::vector<uint64_t>> samples;
};

inline Result<EpochBytes> ReadEpoch(Loader& loader, size_t max_batches = SIZE_MAX,
                                    const FieldBytesFn& field_bytes = HostFieldBytes) {
  EpochBytes out;
  while (out.batches.size() < max_batches) {
    auto next = loader.Next();
    if (!next) return std::unexpected(next.error());
    if (!*next) break;
    out.batches.push_back(BatchBytes(**next, field_bytes));
    out.samples.push_back((*next)->sample_indices());
  }
  return out;
}

#define SLUICE_REQUIRE_TEST_PLAN()                                              \
  do {                                                                          \
    const auto& test_plan_ = ::sluice::testing_loader::TestPlan();              \
    ASSERT_FALSE(test_plan_.path.empty()) << "test plan: " << test_plan_.error; \
  } while (0)

}  // namespace sluice::testing_loader
