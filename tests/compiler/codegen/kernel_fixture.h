// Test helper: the fused chains the kernel tests use, compiled ONCE per test
// binary (Halide compile time dominates) into a temporary kernels.so.
//
// Chains cover every fusable op and the two ImageNet chains. The library is
// built for the host's AVX2 target only (plus nothing else) to keep the suite
// fast; codegen_test.cc builds the full multitarget set for one chain.
//
// To run these tests on another CPU (scripts/avx512_check.sh runs them on an
// emulated AVX-512 CPU), two environment variables:
//   SLUICE_TEST_CPU_TARGET   the one Halide target to build the library for
//                            (default: the AVX2 target below)
//   SLUICE_TEST_KERNELS_DIR  where the library lives: used as is when it holds
//                            a kernels.so (its target read from cpu_target.txt
//                            beside it), else built there
// A test binary built with SLUICE_TESTS_NO_COMPILER (sluice_kernel_check) only
// loads: it needs SLUICE_TEST_KERNELS_DIR with a kernels.so in it.
#pragma once

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include "compiler/codegen/codegen.h"
#include "ops/fusion/fused_chain.h"
#include "ops/registry.h"
#include "runtime/kernels/kernel_library.h"

namespace sluice::testing {

struct StepSpec {
  std::string op;
  ParamList params;
};

// A FusedChain from op names and (partial) params; defaults filled, op ids
// 1, 2, ...; output type by the ops' type rules from uint8[?,?,channels] HWC.
inline FusedChain MakeChain(const std::string& symbol, const std::vector<StepSpec>& specs,
                            int64_t channels = 3) {
  FusedChain chain;
  chain.symbol = symbol;
  chain.input = Image(DType::kUInt8, Layout::kHWC, kDynamic, kDynamic, channels);
  TensorType t = chain.input;
  int id = 1;
  for (const StepSpec& s : specs) {
    const OpDef* op = FindOp(s.op);
    if (!op) throw std::runtime_error("no op " + s.op);
    ChainStep step{op, WithDefaults(op->params, s.params), id++};
    std::vector<TensorType> in = {t};
    auto out = op->infer(in, step.params);
    if (!out) throw std::runtime_error(out.error().ToString());
    t = (*out)[0];
    chain.steps.push_back(std::move(step));
  }
  chain.output = t;
  return chain;
}

inline ParamValue I(int64_t v) { return ParamValue{v}; }
inline ParamValue F(double v) { return ParamValue{v}; }
inline ParamValue S(std::string v) { return ParamValue{std::move(v)}; }
inline ParamValue Is(std::vector<int64_t> v) { return ParamValue{std::move(v)}; }
inline ParamValue Fs(std::vector<double> v) { return ParamValue{std::move(v)}; }

inline StepSpec ImagenetNormalize() {
  return {"normalize",
          {{"mean", Fs({0.485, 0.456, 0.406})}, {"std", Fs({0.229, 0.224, 0.225})},
           {"scale", F(255)}}};
}

// name -> chain
inline std::map<std::string, FusedChain> TestChains() {
  std::map<std::string, FusedChain> m;
  auto add = [&](const std::string& name, std::vector<StepSpec> steps, int64_t ch = 3) {
    m.emplace(name, MakeChain("k_" + name, steps, ch));
  };
  add("train", {{"random_resized_crop", {{"size", Is({224})}}},
                {"random_flip", {}},
                ImagenetNormalize(),
                {"layout", {{"to", S("CHW")}}},
                {"cast", {{"dtype", S("float16")}}}});
  add("eval", {{"resize", {{"size", Is({256})}}}, {"center_crop", {{"size", Is({224})}}},
               ImagenetNormalize()});
  add("crop_flip", {{"crop", {{"top", I(3)}, {"left", I(5)}, {"height", I(40)}, {"width", I(30)}}},
                    {"random_flip", {{"horizontal", F(0.5)}, {"vertical", F(0.5)}}}});
  add("pad_center", {{"pad", {{"padding", Is({2, 3, 4, 1})}}},
                     {"random_flip", {}},
                     {"center_crop", {{"size", Is({50, 60})}}}});
  add("flip_resize_crop",
      {{"random_flip", {{"horizontal", F(0.5)}, {"vertical", F(0.5)}}},
       {"pad", {{"padding", Is({5})}}},
       {"resize", {{"size", Is({41, 39})}}},
       {"crop", {{"top", I(2)}, {"left", I(4)}, {"height", I(33)}, {"width", I(37)}}},
       {"random_flip", {{"horizontal", F(0.5)}, {"vertical", F(0.5)}}}});
  add("bicubic", {{"resize", {{"size", Is({37, 53})}, {"interpolation", S("bicubic")}}}});
  add("area", {{"resize", {{"size", Is({20, 30})}, {"interpolation", S("area")}}},
               {"layout", {{"to", S("CHW")}}}});
  add("nearest_noaa",
      {{"random_resized_crop",
        {{"size", Is({31, 17})}, {"interpolation", S("nearest")}, {"antialias", ParamValue{false}}}},
       {"cast", {{"dtype", S("float32")}}}});
  add("bilinear_noaa", {{"resize", {{"size", Is({45, 27})}, {"antialias", ParamValue{false}}}}});
  add("jitter", {{"resize", {{"size", Is({32, 40})}}},
                 {"color_jitter",
                  {{"brightness", F(0.4)}, {"contrast", F(0.4)}, {"saturation", F(0.4)}}}});
  // Two color_jitter steps: each must get its own draws (op ids 2 and 3), as
  // in the reference chain.
  add("jitter2", {{"resize", {{"size", Is({24, 28})}}},
                  {"color_jitter",
                   {{"brightness", F(0.5)}, {"contrast", F(0.5)}, {"saturation", F(0.5)}}},
                  {"color_jitter",
                   {{"brightness", F(0.5)}, {"contrast", F(0.5)}, {"saturation", F(0.5)}}}});
  add("gray_bf16", {{"resize", {{"size", Is({64})}}},
                    {"center_crop", {{"size", Is({56})}}},
                    {"grayscale", {{"num_output_channels", I(3)}}},
                    {"normalize", {{"mean", Fs({0.5})}, {"std", Fs({0.25})}, {"scale", F(255)}}},
                    {"cast", {{"dtype", S("bfloat16")}}}});
  add("gray1_in", {{"resize", {{"size", Is({24, 24})}}},
                   {"color_jitter", {{"brightness", F(0.3)}, {"contrast", F(0.3)}}},
                   {"normalize", {{"mean", Fs({0.5})}, {"std", Fs({0.5})}, {"scale", F(255)}}}},
      1);
  return m;
}

// The compiled library of TestChains(), built on first use and shared by every
// test in the process. ctest runs each test in its own process, so the library
// is also kept on disk, keyed by the test binary's identity (path, size, mtime):
// a rebuilt test binary recompiles; a concurrent first build is made in a
// private directory and renamed into place.
struct CompiledKernels {
  std::map<std::string, FusedChain> chains;
  std::filesystem::path dir;
  Result<KernelArtifact> artifact = MakeError(ErrorCode::kInternal, "not built");
  Result<runtime::KernelLibrary> library = MakeError(ErrorCode::kInternal, "not built");
};

inline const CompiledKernels& SharedKernels() {
  static CompiledKernels* k = [] {
    auto* ck = new CompiledKernels;
    ck->chains = TestChains();
    CodegenOptions opt;
    const char* target = std::getenv("SLUICE_TEST_CPU_TARGET");
    opt.cpu_targets = {target && *target ? target : "x86-64-linux-avx-avx2-f16c-fma-sse41"};
    opt.cuda = false;
    namespace fs = std::filesystem;
    std::error_code ec;
    if (const char* dir = std::getenv("SLUICE_TEST_KERNELS_DIR"); dir && *dir) {
      ck->dir = dir;
    } else {
      const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
      const auto stamp = std::to_string(std::hash<std::string>{}(
          exe.string() + "|" + std::to_string(fs::file_size(exe, ec)) + "|" +
          std::to_string(fs::last_write_time(exe, ec).time_since_epoch().count()) + "|" +
          opt.cpu_targets[0]));
      ck->dir = fs::temp_directory_path() / ("sluice_test_kernels_" + stamp);
    }
    if (fs::exists(ck->dir / "kernels.so")) {
      KernelArtifact art;
      art.library = (ck->dir / "kernels.so").string();
      art.cpu_targets = opt.cpu_targets;
      std::ifstream recorded(ck->dir / "cpu_target.txt");  // as built (below)
      if (std::string t; std::getline(recorded, t) && !t.empty()) art.cpu_targets = {t};
      for (const auto& [name, chain] : ck->chains) art.kernels.push_back({chain.symbol, ""});
      for (const char* a : kKernelArgNames) art.arg_names.push_back(a);
      ck->artifact = art;
    } else {
#ifdef SLUICE_TESTS_NO_COMPILER
      ck->artifact = MakeError(ErrorCode::kNotFound,
                               "no kernels.so in " + ck->dir.string() +
                                   " and this test binary has no compiler",
                               "set SLUICE_TEST_KERNELS_DIR to a library built by sluice_tests");
#else
      std::vector<FusedChain> list;
      for (auto& [name, chain] : ck->chains) list.push_back(chain);
      const fs::path tmp = ck->dir.string() + ".tmp" + std::to_string(::getpid());
      ck->artifact = CompileKernels(list, tmp.string(), opt);
      if (ck->artifact) {
        std::ofstream(tmp / "cpu_target.txt") << opt.cpu_targets[0] << "\n";
        fs::rename(tmp, ck->dir, ec);  // fails harmlessly if another process won
        fs::remove_all(tmp, ec);
        ck->artifact->library = (ck->dir / "kernels.so").string();
      }
#endif
    }
    if (ck->artifact) {
      // A library for a target this CPU lacks would die of SIGILL: say so instead.
      if (Status st = runtime::CheckCpuSupports(ck->artifact->cpu_targets); !st) {
        ck->library = std::unexpected(st.error());
      } else {
        ck->library = runtime::KernelLibrary::Open(ck->artifact->library);
      }
    }
    return ck;
  }();
  return *k;
}

// Element i of a dense output buffer of `dtype` as float.
inline float LoadElement(const std::vector<uint8_t>& buf, DType dtype, size_t i) {
  switch (dtype) {
    case DType::kUInt8:
      return buf[i];
    case DType::kFloat16: {
      uint16_t h;
      std::memcpy(&h, buf.data() + 2 * i, 2);
      return static_cast<float>(std::bit_cast<_Float16>(h));
    }
    case DType::kBFloat16: {
      uint16_t h;
      std::memcpy(&h, buf.data() + 2 * i, 2);
      return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
    }
    default: {
      float f;
      std::memcpy(&f, buf.data() + 4 * i, 4);
      return f;
    }
  }
}

}  // namespace sluice::testing
