// libFuzzer harness: loading plan.json (Plan::Load, runtime/plan/plan.cc).
//
// Input: the bytes of plan.json. Plan::Load reads a plan directory, so the
// harness makes one temporary directory per process holding an empty
// kernels.so (FNV-1a hash "fnv1a64:cbf29ce484222325"; the seeds carry that
// hash, so they get past the hash check to dlopen, which refuses the empty
// file) and rewrites its plan.json on every input. Every input must load or
// fail with an error, never crash. ${VARS} are bound from a fixed set.
//
// When plan.json parsing becomes a function of the text (e.g. a
// PlanDocument::FromJson(std::string_view)), call it here on `data` directly
// instead of going through the file system.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "runtime/plan/plan_internal.h"
#include "sluice/plan.h"

namespace {

// The per-process plan directory (removed at exit).
const std::string& PlanDir() {
  static const std::string dir = [] {
    std::string templ =
        (std::filesystem::temp_directory_path() / "sluice_plan_fuzz_XXXXXX").string();
    if (mkdtemp(templ.data()) == nullptr) std::abort();
    std::FILE* so = std::fopen((templ + "/kernels.so").c_str(), "wb");
    if (so == nullptr) std::abort();
    std::fclose(so);
    static std::string to_remove = templ;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(to_remove, ec);
    });
    return templ;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& dir = PlanDir();
  std::FILE* f = std::fopen((dir + "/plan.json").c_str(), "wb");
  if (f == nullptr) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  auto plan = sluice::Plan::Load(dir, {{"DATA", "/data/imagenet"}, {"SPLIT", "train"}});
  if (!plan) {
    (void)plan.error().ToString();
    return 0;
  }
  // Loaded (an empty kernels.so cannot load, so this means a plan without
  // chains got past dlopen): read every accessor.
  (void)plan->chains().size();
  (void)plan->source_params().size();
  return 0;
}
