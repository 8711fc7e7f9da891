// Prints the sample order Sluice's sampler gives one epoch, for the shuffle
// quality benchmark (bench/shuffle/quality.py; bench/README.md).
//
//   sluice_shuffle_order --n N --shard-size S [--buffer B] [--seed X]
//       [--epoch E] [--world W] [--batch K] [--order shard_shuffle|shuffle|
//       sequential] [--remainder drop|pad] [--format text|int64] [--time]
//
// The dataset is N samples in shards of S consecutive sample ids (the last
// one shorter). The output is the training order of the epoch: global step j
// is batch j of rank 0, then batch j of rank 1, ... (what a data-parallel
// step sees), one sample id per line (text) or as raw little-endian int64
// (int64). --time prints to stderr how long EpochSampler::Epoch took per rank
// (the materialization shard_shuffle does at each epoch start), the median of
// 5 runs.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/sampling/epoch_sampler.h"

namespace {

using sluice::runtime::EpochOrder;
using sluice::runtime::EpochSampler;
using sluice::runtime::Remainder;
using sluice::runtime::SampleOrder;
using sluice::runtime::SamplerConfig;

[[noreturn]] void Usage(const char* why) {
  std::fprintf(stderr,
               "sluice_shuffle_order: %s\nusage: sluice_shuffle_order --n N --shard-size S "
               "[--buffer B] [--seed X] [--epoch E] [--world W] [--batch K] [--order "
               "shard_shuffle|shuffle|sequential] [--remainder drop|pad] [--format text|int64] "
               "[--time]\n",
               why);
  std::exit(2);
}

uint64_t ParseU64(const char* flag, const char* value) {
  char* end = nullptr;
  unsigned long long v = std::strtoull(value, &end, 10);
  if (*value == '\0' || *end != '\0' || *value == '-') {
    Usage((std::string(flag) + " needs a non-negative integer").c_str());
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  SamplerConfig c;
  c.order = SampleOrder::kShardShuffle;
  uint64_t shard_size = 0, epoch = 0;
  std::string format = "text";
  bool time = false;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--time") {
      time = true;
      continue;
    }
    if (i + 1 >= argc) Usage((flag + " needs a value").c_str());
    const char* v = argv[++i];
    if (flag == "--n") {
      c.num_samples = ParseU64(argv[i - 1], v);
    } else if (flag == "--shard-size") {
      shard_size = ParseU64(argv[i - 1], v);
    } else if (flag == "--buffer") {
      c.shuffle_buffer = ParseU64(argv[i - 1], v);
    } else if (flag == "--seed") {
      c.seed = ParseU64(argv[i - 1], v);
    } else if (flag == "--epoch") {
      epoch = ParseU64(argv[i - 1], v);
    } else if (flag == "--world") {
      c.world_size = static_cast<int>(ParseU64(argv[i - 1], v));
    } else if (flag == "--batch") {
      c.batch_size = ParseU64(argv[i - 1], v);
    } else if (flag == "--order") {
      if (auto order = sluice::runtime::ParseSampleOrder(v)) {
        c.order = *order;
      } else {
        Usage("--order is shard_shuffle, shuffle or sequential");
      }
    } else if (flag == "--remainder") {
      c.remainder = std::strcmp(v, "pad") == 0 ? Remainder::kPad : Remainder::kDrop;
    } else if (flag == "--format") {
      format = v;
      if (format != "text" && format != "int64") Usage("--format is text or int64");
    } else {
      Usage(("unknown flag " + flag).c_str());
    }
  }
  if (c.num_samples == 0 || shard_size == 0) Usage("--n and --shard-size are required");
  for (uint64_t s = 0; s < c.num_samples; s += shard_size) c.shard_starts.push_back(s);

  std::vector<EpochOrder> orders;
  uint64_t per_rank = 0;
  for (int r = 0; r < c.world_size; ++r) {
    c.rank = r;
    auto sampler = EpochSampler::Create(c);
    if (!sampler) {
      std::fprintf(stderr, "sluice_shuffle_order: %s\n", sampler.error().ToString().c_str());
      return 1;
    }
    per_rank = sampler->samples_per_rank();
    if (time) {
      std::vector<double> ms;
      for (int k = 0; k < 5; ++k) {
        auto t0 = std::chrono::steady_clock::now();
        EpochOrder o = sampler->Epoch(epoch);
        auto t1 = std::chrono::steady_clock::now();
        ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        if (o.size() != per_rank) return 1;
      }
      std::sort(ms.begin(), ms.end());
      std::fprintf(stderr, "rank %d: Epoch(%llu) %.2f ms (median of 5), %llu samples\n", r,
                   static_cast<unsigned long long>(epoch), ms[2],
                   static_cast<unsigned long long>(per_rank));
    }
    orders.push_back(sampler->Epoch(epoch));
  }
  // Global step j: batch j of every rank in rank order.
  std::vector<int64_t> out;
  out.reserve(per_rank * orders.size());
  for (uint64_t first = 0; first < per_rank; first += c.batch_size) {
    for (const EpochOrder& o : orders) {
      for (uint64_t p = first; p < first + c.batch_size; ++p) {
        out.push_back(static_cast<int64_t>(o[p]));
      }
    }
  }
  if (format == "int64") {
    std::fwrite(out.data(), sizeof(int64_t), out.size(), stdout);
  } else {
    for (int64_t v : out) std::printf("%lld\n", static_cast<long long>(v));
  }
  return 0;
}
