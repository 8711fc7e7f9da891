// A minimal C++ "training loop" on Sluice's public API.
//
//   sluice compile examples/imagenet_train.yaml -o train.plan
//   sluice_train_loop train.plan /path/to/dataset [epochs]
//
// Loads the plan (binding ${DATA}), iterates the loader for a few epochs,
// "trains" on each batch (here: the mean of the image tensor and a label
// histogram, standing in for a forward/backward pass), saves and restores the
// loader state halfway through as a checkpoint would, and prints the stats.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "sluice/sluice.h"

namespace {

// Reads one element of any float dtype the plan may produce as a double.
double Element(const sluice::TensorView& v, int64_t i) {
  switch (v.dtype) {
    case sluice::DType::kFloat32:
      return v.as<float>()[i];
    case sluice::DType::kUInt8:
      return v.as<uint8_t>()[i];
    case sluice::DType::kFloat16: {  // IEEE half -> double, enough for a demo
      uint16_t h = v.as<uint16_t>()[i];
      int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
      double mag = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(mant + 1024, exp - 25);
      return (h & 0x8000) ? -mag : mag;
    }
    default:
      return 0;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s PLAN DATA_DIR [epochs]\n", argv[0]);
    return 2;
  }
  const int epochs = argc > 3 ? std::atoi(argv[3]) : 1;
  auto plan = sluice::Plan::Load(argv[1], {{"DATA", argv[2]}});
  if (!plan) {
    std::fprintf(stderr, "%s\n", plan.error().ToString().c_str());
    return 1;
  }
  auto loader = sluice::Loader::Create(*plan);
  if (!loader) {
    std::fprintf(stderr, "%s\n", loader.error().ToString().c_str());
    return 1;
  }
  std::printf("plan %s: %zu samples, %llu batches of %lld per epoch\n", plan->name().c_str(),
              loader->dataset_size(), static_cast<unsigned long long>(loader->batches_per_epoch()),
              static_cast<long long>(loader->batch_size()));

  std::string checkpoint;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    double loss = 0;
    int steps = 0;
    for (sluice::Batch& batch : *loader) {  // one epoch
      const sluice::TensorView* image = batch.field("image");
      if (image != nullptr) {
        double sum = 0;
        const int64_t n = std::min<int64_t>(image->num_elements(), 4096);
        for (int64_t i = 0; i < n; ++i) sum += Element(*image, i);
        loss += sum / static_cast<double>(n);
      }
      ++steps;
      if (epoch == 0 && steps == 2) checkpoint = loader->State().ToString();  // "save"
    }
    if (loader->error()) {
      std::fprintf(stderr, "%s\n", loader->error()->ToString().c_str());
      return 1;
    }
    std::printf("epoch %d: %d steps, mean activation %.4f\n", epoch, steps,
                steps ? loss / steps : 0.0);
  }
  if (!checkpoint.empty()) {  // "resume" from the checkpoint taken in epoch 0
    auto state = sluice::LoaderState::FromString(checkpoint);
    if (!state || !loader->Restore(*state)) {
      std::fprintf(stderr, "restore failed\n");
      return 1;
    }
    auto next = loader->Next();
    if (next && *next) {
      std::printf("restored at \"%s\": next batch is epoch %llu batch %llu\n", checkpoint.c_str(),
                  static_cast<unsigned long long>((*next)->epoch()),
                  static_cast<unsigned long long>((*next)->index()));
    }
  }
  sluice::LoaderStats s = loader->Stats();
  std::printf("%llu batches, %.1f images/s, batch latency p50 %.1f ms p99 %.1f ms, "
              "waited %.2f s, bad samples %llu\n",
              static_cast<unsigned long long>(s.batches), s.images_per_second,
              s.latency_p50 * 1e3, s.latency_p99 * 1e3, s.consumer_wait_seconds,
              static_cast<unsigned long long>(s.bad_samples));
  return 0;
}
