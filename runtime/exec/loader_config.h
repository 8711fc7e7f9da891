// Loader configuration: everything the loader takes from the plan, the
// LoaderOptions and the process environment, resolved once, before anything
// is opened or allocated, by one function (ResolveLoaderConfig).
//
// Contract: ResolveLoaderConfig is the only code in runtime/exec that reads
// the plan's spec-level sections (source, decode step, sampling, batch,
// output, tuned knobs, placement, GPU stages). The scheduler, the per-sample
// worker and the GPU stage read the LoaderConfig, plus the chains and kernels
// its field layouts point at. So a change of where a setting comes from (for
// example the plan's own decode-pushdown decision or memory plan) is an edit
// of this one function.
//
// Precedence of each knob (threads, in_flight, prefetch): LoaderOptions, else
// the spec's explicit value, else what `sluice tune` wrote into the plan, else
// the auto rule (include/sluice/loader.h). When all three come from the auto
// rule, the online tuner adjusts them within what the pools allocate.
//
// ResolveLoaderConfig has no side effects of its own: the environment comes in
// as a value (LoaderEnvironment), and the only call out is env.open_gpu, made
// at most once and only when the plan has a GPU stage and the device is not
// `cpu`. Errors are the ones Loader::Create documents, each naming the plan.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ops/fusion/fused_chain.h"
#include "ops/param.h"
#include "runtime/decode/decoder.h"
#include "runtime/sampling/epoch_sampler.h"
#include "sluice/loader.h"
#include "sluice/plan.h"
#include "sluice/result.h"

namespace sluice::runtime {

class Kernel;

enum class ErrorPolicy { kSkip, kReplace, kFail };

// Where one batch field lives in a batch buffer and what writes it.
struct FieldLayout {
  std::string name;
  DType dtype = DType::kUInt8;
  std::vector<int64_t> sample_shape;
  size_t sample_bytes = 0;
  size_t offset = 0;   // of the field's [B, ...] block in a buffer
  int chain = -1;      // chain index writing it, or -1 for the label
  int reference = -1;  // reference chain index computing it (chain == -1), or -1
  // What computes it (pointing into the plan the config was resolved from):
  // the fused chain or the reference chain, and for a fused chain the CPU
  // kernel it runs per sample (the CPU-part kernel on the GPU path). Null for
  // the label.
  const FusedChain* steps = nullptr;
  const Kernel* kernel = nullptr;
  // GPU path: the host block holds the staging images (host_sample_bytes
  // each); the device block has the staging copy then the output.
  bool gpu = false;
  size_t host_sample_bytes = 0;                  // == sample_bytes on the CPU path
  size_t device_staging = 0, device_output = 0;  // offsets in the buffer's device block
  TensorType staging;                            // GPU path: the staging image (gpu_staging.h)
  std::string gpu_batch_symbol;                  // GPU path: the batch-wide CUDA kernel
};

// What the loader would like the decoder to do inside the decode; the
// decoder's caps() decide what it does (EffectivePushdown).
struct PushdownConfig {
  // The single fused chain's crop window becomes the decode's region of
  // interest (off with several chains or any reference chain: those read the
  // whole image).
  bool region = false;
  // DCT-scaled decode of large downscales (LoaderOptions::dct_scaling).
  bool dct_scaling = false;
};

struct GpuConfig {
  bool use = false;  // the GPU stages run on the device (opened by env.open_gpu)
  int ordinal = 0;
  bool wait = true;         // LoaderOptions::wait_for_device
  size_t device_bytes = 0;  // device block per pool buffer (staging + output of GPU fields)
};

struct LoaderConfig {
  std::string where;  // "plan `PATH`", for messages
  std::string spec_hash;
  // The source op and its params (${VARS} bound), for the source registry.
  std::string source_format;
  ParamList source_params;
  // source.read_timeout: seconds a sample's read may take before it is
  // abandoned and counts as bad (ReadPool); 0 = no deadline.
  double read_timeout = 30;
  // The decode step (Plan::decode_op / decode_params), for MakeDecoder, and
  // the channel count every chain reads (1 gray, 3 rgb).
  std::string decode_op;
  ParamList decode_params;
  int64_t channels = 3;
  PushdownConfig pushdown;
  // Sampling; sampler.num_samples is the source's size, filled in by the
  // caller once the source is open.
  SamplerConfig sampler;
  uint64_t seed = 0;
  uint64_t first_epoch = 0;
  int64_t batch_size = 0;
  bool relaxed = false;  // relaxed ordering
  ErrorPolicy policy = ErrorPolicy::kSkip;
  double max_fraction = 0;
  // Batch layout, in plan.json batch.fields order (a map: sorted by name).
  std::vector<FieldLayout> fields;
  size_t buffer_bytes = 64;  // one pool buffer (64-byte aligned blocks)
  // Knobs: `threads` TBB workers; `workers` = min(threads, in_flight) loops
  // with one scratch each; `prefetch` batches ahead, `prefetch + 1` buffers.
  int threads = 1, workers = 1, prefetch = 1;
  bool online_tuning = false;
  int pool_buffers() const { return prefetch + 1; }
  GpuConfig gpu;
  std::string device = "cpu";  // "cpu" or "cuda:N": where the GPU stages run
  // Conditions worked around (GPU fallback, reference fields), in order.
  std::vector<std::string> warnings;
};

// What the loader needs to know about the process it runs in.
struct LoaderEnvironment {
  unsigned usable_cores = 1;  // UsableCores() (common/usable_cores.h); 0 counts as 1
  // RANK / WORLD_SIZE (torchrun), consulted only when neither the options nor
  // the plan set the sharding; an error here is Create's error then.
  Result<DistributedEnv> distributed = DistributedEnv{};
  // Opens CUDA device `ordinal` for the loader (the caller keeps the handle);
  // an error says why it is not usable. Null = no device.
  std::function<Status(int ordinal)> open_gpu;

  // This process: UsableCores() and
  // DistributedEnvFromEnvironment(), with `open_gpu` as given.
  static LoaderEnvironment FromProcess(std::function<Status(int ordinal)> open_gpu);
};

// Resolves the loader's configuration (see the contract above). `plan` must
// outlive the result (field layouts point at its chains and kernels).
Result<LoaderConfig> ResolveLoaderConfig(const Plan& plan, const LoaderOptions& options,
                                         const LoaderEnvironment& env);

// What is pushed down with a decoder that has `caps`: the wanted pushdowns it
// can do (DCT scaling only together with a region of interest).
PushdownConfig EffectivePushdown(const PushdownConfig& wanted, const DecoderCaps& caps);

}  // namespace sluice::runtime
