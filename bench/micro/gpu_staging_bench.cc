// Micro benchmark for the GPU path's CPU side (docs/gpu.md): the per-sample
// CPU cost of a GPU-split plan's CPU part (crop + flip into uint8 HWC staging)
// against its whole-chain CPU kernel, each writing into a batch-sized buffer
// of plain (malloc) memory and, with a CUDA device, of pinned memory
// (cuMemHostAlloc, what the GPU stage hands to the copy engine). Thread CPU
// time per sample, median of rounds, the variants interleaved in every round.
// Built runtime-only and shipped in the GPU kit (bin/), since the GPU
// machines cannot build. Not a test:
//   sluice_gpu_staging_bench PLAN [--rounds R] [--samples N]
// PLAN is a GPU-split plan (scripts/gpu_kit.sh's plans/imagenet_train_gpu.plan).
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ops/fusion/sample_args.h"
#include "runtime/device/cuda_driver.h"
#include "runtime/kernels/kernel_library.h"
#include "sluice/plan.h"

namespace {

using namespace sluice;

double ThreadCpuMicros() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
}

// Bytes of one sample of a static type.
size_t Bytes(const TensorType& t) {
  size_t n = DTypeSize(t.dtype);
  for (int64_t d : t.dims) n *= static_cast<size_t>(d);
  return n;
}

struct Variant {
  std::string name;
  const runtime::Kernel* kernel;
  uint8_t* buffer;  // batch-sized: `slots` slots of the kernel's output
  std::vector<double> us_per_sample;  // one per round
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PLAN [--rounds R] [--samples N]\n", argv[0]);
    return 2;
  }
  int rounds = 7, samples = 512;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--samples") == 0) samples = std::atoi(argv[i + 1]);
  }
  auto plan = Plan::Load(argv[1], {{"DATA", "/nonexistent"}});
  if (!plan) {
    std::fprintf(stderr, "%s\n", plan.error().ToString().c_str());
    return 1;
  }
  if (plan->chains().empty() || plan->cpu_part_kernel(0) == nullptr) {
    std::fprintf(stderr, "%s: no GPU-split chain (make one with sluice_make_gpu_plan)\n", argv[1]);
    return 1;
  }
  const FusedChain& chain = plan->chains()[0];
  const runtime::Kernel& whole = plan->cpu_kernel(0);
  const runtime::Kernel& part = *plan->cpu_part_kernel(0);
  const int slots = 256;
  const size_t whole_bytes = Bytes(whole.output());
  const size_t part_bytes = Bytes(part.output());

  // A 500x375 input (ImageNet's typical size), smooth with noise.
  const int64_t w = 500, h = 375;
  std::vector<uint8_t> pixels(static_cast<size_t>(w * h * 3));
  std::mt19937 rng(1);
  for (size_t i = 0; i < pixels.size(); ++i) {
    pixels[i] = static_cast<uint8_t>((i % 1500) / 6 + rng() % 24);
  }
  const runtime::ImageView view{pixels.data(), h, w, 3, w * 3};

  std::vector<uint8_t> whole_out(whole_bytes * slots), part_out(part_bytes * slots);
  std::vector<Variant> variants = {{"whole chain -> malloc", &whole, whole_out.data(), {}},
                                   {"cpu part    -> malloc", &part, part_out.data(), {}}};
  std::unique_ptr<runtime::cuda::PinnedBuffer> pinned;
  std::string gpu = "none";
  if (auto dev = runtime::cuda::CudaDevice::Open(0)) {
    gpu = (*dev)->name();
    if (auto p = runtime::cuda::PinnedBuffer::Allocate(*dev, part_bytes * slots)) {
      pinned = std::move(*p);
      std::memset(pinned->data(), 0, pinned->size());
      variants.push_back({"cpu part    -> pinned", &part, pinned->data(), {}});
    }
  }
  std::printf("plan %s; GPU %s; %d samples x %d rounds, 500x375 input\n", argv[1], gpu.c_str(),
              samples, rounds);
  uint64_t sample = 0;
  for (int r = 0; r < rounds; ++r) {
    for (Variant& v : variants) {
      const size_t slot_bytes = Bytes(v.kernel->output());
      double total = 0;
      for (int i = 0; i < samples; ++i, ++sample) {
        // The sample's own arguments, as the loader computes them: the whole
        // chain and its CPU part share the crop and flip draws.
        auto args = ComputeSampleArgs(chain, h, w, 0, 0, sample % 4096);
        if (!args) {
          std::fprintf(stderr, "%s\n", args.error().ToString().c_str());
          return 1;
        }
        uint8_t* out = v.buffer + static_cast<size_t>(i % slots) * slot_bytes;
        const double t0 = ThreadCpuMicros();
        auto st = v.kernel->Run(view, *args, out);
        total += ThreadCpuMicros() - t0;
        if (!st) {
          std::fprintf(stderr, "%s: %s\n", v.name.c_str(), st.error().ToString().c_str());
          return 1;
        }
      }
      v.us_per_sample.push_back(total / samples);
    }
  }
  const double base = Median(variants[0].us_per_sample);
  std::printf("| variant | CPU us per sample (median) | vs whole chain |\n|---|---:|---:|\n");
  for (const Variant& v : variants) {
    const double m = Median(v.us_per_sample);
    std::printf("| %s | %.1f | %.2fx |\n", v.name.c_str(), m, base > 0 ? m / base : 0);
  }
  return 0;
}
