// Micro benchmark (issue 3): the fused ImageNet-train kernel (500x375 ->
// random_resized_crop 224 + flip + normalize + CHW + float16) against the
// unfused reference chain and a libjpeg-turbo decode of the same image, all
// on one core in the same run. Not a test: run it by hand, e.g.
//   taskset -c 1 build/sluice_micro_bench --benchmark_repetitions=5 \
//       --benchmark_report_aggregates_only=true
// Targets: fused <= 15% of the decode time (BM_FusedOverDecode's
// `fused_over_decode`, or BM_FusedKernel / BM_DecodeJpeg); fused >= 4x faster
// than unfused.
#include <benchmark/benchmark.h>
#include <turbojpeg.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <random>

#include "compiler/codegen/codegen.h"
#include "compiler/codegen/gpu_batch_pipeline.h"
#include "ops/fusion/sample_args.h"
#include "ops/registry.h"
#include "runtime/kernels/kernel_library.h"

namespace sluice {
namespace {

constexpr int kW = 500, kH = 375;

FusedChain TrainChain() {
  auto step = [](const char* name, ParamList p, int id) {
    const OpDef* op = FindOp(name);
    return ChainStep{op, WithDefaults(op->params, std::move(p)), id};
  };
  FusedChain c;
  c.symbol = "bench_train";
  c.input = Image(DType::kUInt8, Layout::kHWC, kDynamic, kDynamic, 3);
  c.output = Image(DType::kFloat16, Layout::kCHW, 224, 224, 3);
  c.steps = {step("random_resized_crop", {{"size", ParamValue{std::vector<int64_t>{224}}}}, 1),
             step("random_flip", {}, 2),
             step("normalize",
                  {{"mean", ParamValue{std::vector<double>{0.485, 0.456, 0.406}}},
                   {"std", ParamValue{std::vector<double>{0.229, 0.224, 0.225}}},
                   {"scale", ParamValue{255.0}}},
                  3),
             step("layout", {{"to", ParamValue{std::string("CHW")}}}, 4),
             step("cast", {{"dtype", ParamValue{std::string("float16")}}}, 5)};
  return c;
}

// The CPU part of the same chain split for the GPU before `normalize` (what
// GPU-placed plans run per sample): crop + flip into the planar uint8 staging
// image, as the code generator derives it (CpuPartChain).
FusedChain CpuPartOfTrainChain() {
  FusedChain c = TrainChain();
  c.gpu_from = 2;
  auto part = CpuPartChain(c);
  if (!part) {
    std::fprintf(stderr, "%s\n", part.error().ToString().c_str());
    std::abort();
  }
  return *part;
}

struct Fixture {
  FusedChain chain = TrainChain();
  FusedChain cpu_part_chain = CpuPartOfTrainChain();
  std::vector<uint8_t> pixels;  // HWC
  std::vector<uint8_t> jpeg;
  std::filesystem::path dir;
  runtime::Kernel kernel;
  runtime::Kernel cpu_part;
  std::string error;

  Fixture() {
    std::mt19937 rng(1);
    pixels.resize(size_t{kW} * kH * 3);
    for (int y = 0; y < kH; ++y) {
      for (int x = 0; x < kW; ++x) {
        for (int c = 0; c < 3; ++c) {
          pixels[(size_t{y} * kW + x) * 3 + c] =
              static_cast<uint8_t>((x * (c + 1) / 2 + y + (rng() % 24)) & 255);
        }
      }
    }
    tjhandle tj = tjInitCompress();
    unsigned char* buf = nullptr;
    unsigned long size = 0;
    tjCompress2(tj, pixels.data(), kW, 0, kH, TJPF_RGB, &buf, &size, TJSAMP_420, 90, 0);
    jpeg.assign(buf, buf + size);
    tjFree(buf);
    tjDestroy(tj);

    dir = std::filesystem::temp_directory_path() / ("sluice_bench_" + std::to_string(getpid()));
    CodegenOptions opt;
    opt.cuda = false;
    auto art = CompileKernels({chain, cpu_part_chain}, dir.string(), opt);
    if (!art) {
      error = art.error().ToString();
      return;
    }
    static auto lib = runtime::KernelLibrary::Open(art->library);
    if (!lib) {
      error = lib.error().ToString();
      return;
    }
    auto k = lib->CpuKernel(chain);
    if (!k) {
      error = k.error().ToString();
      return;
    }
    kernel = *k;
    auto p = lib->CpuKernel(cpu_part_chain);
    if (!p) {
      error = p.error().ToString();
      return;
    }
    cpu_part = *p;
  }
  // SLUICE_BENCH_KEEP=1 keeps the compiled kernels.so (for perf annotate).
  ~Fixture() {
    if (const char* keep = std::getenv("SLUICE_BENCH_KEEP"); keep && *keep == '1') {
      std::fprintf(stderr, "kept %s\n", dir.c_str());
      return;
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

Fixture& F() {
  static Fixture f;
  return f;
}

void BM_DecodeJpeg(benchmark::State& state) {
  Fixture& f = F();
  tjhandle tj = tjInitDecompress();
  std::vector<uint8_t> out(size_t{kW} * kH * 3);
  for (auto _ : state) {
    tjDecompress2(tj, f.jpeg.data(), f.jpeg.size(), out.data(), kW, 0, kH, TJPF_RGB, 0);
    benchmark::DoNotOptimize(out.data());
  }
  tjDestroy(tj);
  state.counters["jpeg_bytes"] = static_cast<double>(f.jpeg.size());
}

// Times `kernel` (compiled for `chain`) per sample on the fixture's pixels,
// with each sample's own arguments, into a buffer of `out_bytes`.
void RunPerSample(benchmark::State& state, const FusedChain& chain, const runtime::Kernel& kernel,
                  size_t out_bytes) {
  Fixture& f = F();
  if (!f.error.empty()) {
    state.SkipWithError(f.error.c_str());
    return;
  }
  std::vector<uint8_t> out(out_bytes);
  runtime::ImageView view{f.pixels.data(), kH, kW, 3, kW * 3};
  uint64_t sample = 0;
  for (auto _ : state) {
    auto args = ComputeSampleArgs(chain, kH, kW, 0, 0, sample++);
    auto st = kernel.Run(view, *args, out.data());
    if (!st) state.SkipWithError(st.error().message.c_str());
    benchmark::DoNotOptimize(out.data());
  }
}

void BM_FusedKernel(benchmark::State& state) {
  RunPerSample(state, F().chain, F().kernel, 3 * 224 * 224 * sizeof(uint16_t));
}

// The GPU split's CPU part on the same input as BM_FusedKernel: what a
// sample costs the CPU when normalize, layout and cast run on the GPU.
void BM_CpuPartKernel(benchmark::State& state) {
  RunPerSample(state, F().cpu_part_chain, F().cpu_part, 3 * 224 * 224);
}

double ThreadCpuMicros() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

// The target as one figure: per iteration the JPEG is decoded, then the fused
// kernel runs on the freshly decoded pixels (as in the loader), each timed by
// the thread's CPU clock. Decode and kernel alternate within every iteration,
// so machine noise hits both alike; the counter `fused_over_decode` is their
// ratio over the run (sum of kernel time / sum of decode time).
void BM_FusedOverDecode(benchmark::State& state) {
  Fixture& f = F();
  if (!f.error.empty()) {
    state.SkipWithError(f.error.c_str());
    return;
  }
  tjhandle tj = tjInitDecompress();
  std::vector<uint8_t> pixels(size_t{kW} * kH * 3);
  std::vector<uint16_t> out(3 * 224 * 224);
  runtime::ImageView view{pixels.data(), kH, kW, 3, kW * 3};
  double decode_us = 0, fused_us = 0;
  uint64_t sample = 0;
  for (auto _ : state) {
    const double t0 = ThreadCpuMicros();
    tjDecompress2(tj, f.jpeg.data(), f.jpeg.size(), pixels.data(), kW, 0, kH, TJPF_RGB, 0);
    const double t1 = ThreadCpuMicros();
    auto args = ComputeSampleArgs(f.chain, kH, kW, 0, 0, sample++);
    auto st = f.kernel.Run(view, *args, out.data());
    const double t2 = ThreadCpuMicros();
    if (!st) state.SkipWithError(st.error().message.c_str());
    benchmark::DoNotOptimize(out.data());
    decode_us += t1 - t0;
    fused_us += t2 - t1;
  }
  tjDestroy(tj);
  const double n = static_cast<double>(state.iterations());
  state.counters["decode_us"] = decode_us / n;
  state.counters["fused_us"] = fused_us / n;
  state.counters["fused_over_decode"] = fused_us / decode_us;
}

void BM_UnfusedReference(benchmark::State& state) {
  Fixture& f = F();
  RefTensor img = RefTensor::Zeros(DType::kUInt8, Layout::kHWC, {kH, kW, 3});
  for (size_t i = 0; i < f.pixels.size(); ++i) img.data[i] = f.pixels[i];
  uint64_t sample = 0;
  for (auto _ : state) {
    auto out = ReferenceChain(f.chain, img, 0, 0, sample++);
    benchmark::DoNotOptimize(out->data.data());
  }
}

BENCHMARK(BM_DecodeJpeg)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_FusedKernel)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CpuPartKernel)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_FusedOverDecode)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_UnfusedReference)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace sluice

BENCHMARK_MAIN();
