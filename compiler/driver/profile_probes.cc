// The kernel probes of `sluice profile` (compiler/driver/profile_probes.h).
#include "compiler/driver/profile_probes.h"

#include <stdlib.h>

#include <filesystem>

#include "sluice/compiler.h"

namespace sluice {

ProfilePlans::~ProfilePlans() {
  std::error_code ec;
  if (!dir.empty()) std::filesystem::remove_all(dir, ec);
}

std::string ProfileProbeSpec(bool pointwise) {
  std::string spec =
      "sluice: 1\n"
      "name: profile_probe\n"
      "source:\n"
      "  format: image_folder\n"
      "  path: ${DATA}\n"
      "sampling: {order: sequential, seed: 0}\n"
      "graph:\n"
      "  - decode_jpeg: {in: jpg, out: image, color: rgb}\n"
      "  - random_resized_crop: {size: [224, 224], scale: [0.08, 1.0], ratio: [0.75, 1.3333]}\n"
      "  - random_flip: {horizontal: 0.5}\n";
  if (pointwise) {
    spec +=
        "  - normalize: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225], scale: 255}\n"
        "  - layout: {to: CHW}\n"
        "  - cast: {dtype: float16}\n";
  }
  spec +=
      "batch: {size: 1, fields: {image: image, label: cls}}\n"
      "output: {device: cpu}\n";
  return spec;
}

Result<std::unique_ptr<ProfilePlans>> CompileProfilePlans(const std::string& simd) {
  CodegenSettings codegen;
  codegen.cuda = false;
  if (simd == "sse41") {
    codegen.cpu_targets = {"x86-64-linux-sse41"};
  } else if (simd == "avx2") {
    codegen.cpu_targets = {"x86-64-linux-avx-avx2-f16c-fma-sse41"};
  } else if (simd == "avx512") {
    codegen.cpu_targets = {"x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41"};
  } else {
    return MakeError(ErrorCode::kInvalidArgument, "unknown SIMD level `" + simd + "`",
                     "use sse41, avx2 or avx512");
  }
  auto plans = std::make_unique<ProfilePlans>();
  std::string tmpl = (std::filesystem::temp_directory_path() / "sluice_profile_XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return MakeError(ErrorCode::kIo, "cannot create a temporary directory in " +
                                         std::filesystem::temp_directory_path().string());
  }
  plans->dir = tmpl;
  plans->resample_plan = tmpl + "/resample.plan";
  plans->pointwise_plan = tmpl + "/pointwise.plan";
  // Both probes through the compile driver.
  auto compile = [&](bool pointwise, const std::string& out) -> Status {
    CompileOptions options;
    options.spec_text = ProfileProbeSpec(pointwise);
    options.spec_name = "<profile probe>";
    options.codegen = codegen;
    auto compilation = Compile(options);
    if (!compilation) return std::unexpected(compilation.error());
    if (compilation->has_errors()) return std::unexpected(compilation->diagnostics_error());
    return compilation->WritePlan(out);
  };
  SLUICE_RETURN_IF_ERROR(compile(false, plans->resample_plan));
  SLUICE_RETURN_IF_ERROR(compile(true, plans->pointwise_plan));
  return plans;
}

}  // namespace sluice
