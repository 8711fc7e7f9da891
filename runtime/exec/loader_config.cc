// ResolveLoaderConfig: see loader_config.h for the contract. One function per
// part of the configuration, called in the order Loader::Create reports
// errors: batch, device, field layout, decode, warnings, sampling, policy and
// knobs.
#include "runtime/exec/loader_config.h"

#include <algorithm>
#include <optional>
#include <tuple>

#include "common/usable_cores.h"
#include "ops/registry.h"
#include "plan/plan_document.h"
#include "runtime/device/cuda_driver.h"
#include "runtime/plan/plan_internal.h"
#include "runtime/sources/tar_shards_source.h"

namespace sluice::runtime {
namespace {

const ParamValue* Find(const ParamList& list, const std::string& name) {
  auto it = list.find(name);
  return it == list.end() ? nullptr : &it->second;
}

int64_t IntOr(const ParamList& list, const std::string& name, int64_t fallback) {
  const ParamValue* v = Find(list, name);
  if (v == nullptr || !std::holds_alternative<int64_t>(v->value)) return fallback;
  return v->AsInt();
}

// A float param (an int is accepted as its value), or `fallback`.
double FloatOr(const ParamList& list, const std::string& name, double fallback) {
  const ParamValue* v = Find(list, name);
  if (v == nullptr) return fallback;
  if (std::holds_alternative<double>(v->value)) return v->AsFloat();
  if (std::holds_alternative<int64_t>(v->value)) return static_cast<double>(v->AsInt());
  return fallback;
}

// The source op's read_timeout default (ops/registry.cc appends it to every
// source op); 30 s if the op is unknown here (the source registry then refuses
// the format anyway).
double DefaultReadTimeout(const std::string& format) {
  if (const OpDef* op = FindOp(format)) {
    for (const ParamDef& def : op->params) {
      if (def.name == "read_timeout" && def.default_value) return def.default_value->AsFloat();
    }
  }
  return 30.0;
}

std::string StringOr(const ParamList& list, const std::string& name, std::string fallback) {
  const ParamValue* v = Find(list, name);
  if (v == nullptr || !std::holds_alternative<std::string>(v->value)) return fallback;
  return v->AsString();
}

// The device: the GPU stages run on the GPU when asked for (or `auto`) and a
// device is usable; otherwise the whole-chain CPU kernels (a warning), or an
// error when cuda was forced.
Status ResolveDevice(const Plan& p, const LoaderOptions& options, const LoaderEnvironment& env,
                     LoaderConfig& c) {
  const std::string& where = c.where;
  const std::string requested = options.device.value_or(StringOr(p.output(), "device", "auto"));
  if (requested != "auto" && requested != "cpu") {
    if (auto parsed = cuda::ParseCudaDevice(requested); !parsed) {
      return MakeError(ErrorCode::kInvalidArgument, where + ": " + parsed.error().message);
    }
  }
  const bool forced = requested.starts_with("cuda");
  const bool has_stage = std::any_of(p.gpu_stages().begin(), p.gpu_stages().end(),
                                     [](const auto& st) { return st.has_value(); });
  c.gpu.wait = options.wait_for_device;
  if (requested != "cpu" && has_stage) {
    const std::string& which = forced ? requested : p.placement_device();
    if (which.starts_with("cuda")) c.gpu.ordinal = cuda::ParseCudaDevice(which).value_or(0);
    Status opened = env.open_gpu
                        ? env.open_gpu(c.gpu.ordinal)
                        : MakeError(ErrorCode::kUnsupported, "no CUDA device is available");
    if (!opened) {
      if (forced) {
        return MakeError(
            ErrorCode::kUnsupported,
            where + ": output device `" + requested + "` is not usable: " + opened.error().message,
            "run on a machine with a CUDA device, or set device: cpu (the plan's "
            "whole-chain CPU kernels then run instead)");
      }
      c.warnings.push_back(where + " places work on the GPU, but " + opened.error().message +
                           "; running the whole chains on the CPU");
    } else {
      c.gpu.use = true;
      c.device = "cuda:" + std::to_string(c.gpu.ordinal);
    }
  } else if (forced && !has_stage) {
    c.warnings.push_back(where + ": output device `" + requested +
                         "` requested, but the plan has no GPU stage (compiled without "
                         "CUDA kernels, or nothing placed on the GPU); batches stay on the "
                         "host");
  }
  return Ok();
}

// Which chain, reference chain or label writes field `name`, and its type.
Status ResolveFieldSource(const Plan& p, const std::string& name, const std::string& value,
                          const std::string& where, FieldLayout& f) {
  for (size_t c = 0; c < p.chain_fields().size(); ++c) {
    if (p.chain_fields()[c] == name) f.chain = static_cast<int>(c);
  }
  if (f.chain < 0) {
    for (size_t r = 0; r < p.reference_fields().size(); ++r) {
      if (p.reference_fields()[r] == name) f.reference = static_cast<int>(r);
    }
  }
  if (f.chain >= 0 || f.reference >= 0) {
    f.steps = f.chain >= 0 ? &p.chains()[f.chain] : &p.reference_chains()[f.reference];
    const TensorType& t = f.steps->output;
    if (!t.is_static()) {
      return MakeError(ErrorCode::kUnsupported,
                       where + ": field `" + name + "` has a non-static type " + t.ToString());
    }
    if (t.dtype == DType::kBytes) {
      return MakeError(ErrorCode::kUnsupported,
                       where + ": field `" + name + "` has type " + t.ToString());
    }
    f.dtype = t.dtype;
    f.sample_shape = t.dims;
    return Ok();
  }
  if (value == "cls") {
    f.dtype = DType::kInt64;
    return Ok();
  }
  return MakeError(ErrorCode::kUnsupported,
                   where + ": batch field `" + name + "` (value `" + value +
                       "`) is written neither by a fused kernel, a reference chain nor "
                       "the source's label (its per-sample chain is not a simple chain of "
                       "single-input ops from a decode)",
                   "recompile; report.txt says which ops were not fused");
}

// Every field: what writes it, its sample size, and on the GPU path its
// place in the buffer's device block (its place in a pool buffer comes from
// the plan: ApplyMemoryPlan).
Status ResolveFields(const Plan& p, const ParamValue& fields, LoaderConfig& c) {
  const size_t b = static_cast<size_t>(c.batch_size);
  for (const auto& [name, value] : fields.AsStringMap()) {
    FieldLayout f;
    f.name = name;
    SLUICE_RETURN_IF_ERROR(ResolveFieldSource(p, name, value, c.where, f));
    int64_t elems = 1;
    for (int64_t d : f.sample_shape) {
      if (d <= 0 || __builtin_mul_overflow(elems, d, &elems) || elems > (int64_t{1} << 40)) {
        return MakeError(ErrorCode::kCorruptData,
                         c.where + ": batch field `" + f.name + "` has an impossible shape",
                         "recompile the plan with this Sluice (sluice compile)");
      }
    }
    f.sample_bytes = static_cast<size_t>(elems) * static_cast<size_t>(DTypeSize(f.dtype));
    f.host_sample_bytes = f.sample_bytes;
    if (f.chain >= 0) f.kernel = &p.cpu_kernel(static_cast<size_t>(f.chain));
    if (c.gpu.use && f.chain >= 0 && p.gpu_stages()[f.chain]) {
      const GpuStage& stage = *p.gpu_stages()[f.chain];
      int64_t staging = 1;
      for (int64_t d : stage.staging.dims) staging *= d;
      f.gpu = true;
      f.kernel = p.cpu_part_kernel(static_cast<size_t>(f.chain));
      f.staging = stage.staging;
      f.gpu_batch_symbol = stage.gpu_batch_symbol;
      f.host_sample_bytes = static_cast<size_t>(staging);
      f.device_staging = c.gpu.device_bytes;
      c.gpu.device_bytes += cuda::DeviceArena::Rounded(f.host_sample_bytes * b);
      f.device_output = c.gpu.device_bytes;
      c.gpu.device_bytes += cuda::DeviceArena::Rounded(f.sample_bytes * b);
    }
    c.fields.push_back(std::move(f));
  }
  return Ok();
}

// Every field's place in a pool buffer, as the compiler's memory_planning pass
// laid it out (plan.json "memory"): the CPU layout, or the staged one when the
// GPU stages run (their fields hold uint8 staging images). The layout is
// checked against the fields resolved from the chains; a plan whose memory
// section disagrees is corrupt.
Status ApplyMemoryPlan(const Plan& p, LoaderConfig& c) {
  const PlanMemoryDoc* m = p.memory();
  auto corrupt = [&](const std::string& why) {
    return MakeError(ErrorCode::kCorruptData, c.where + ": plan.json \"memory\" " + why,
                     "recompile the plan with this Sluice (sluice compile)");
  };
  if (m == nullptr) return corrupt("is missing");
  if (m->batch_size != c.batch_size || m->fields.size() != c.fields.size()) {
    return corrupt("does not match the batch (size " + std::to_string(c.batch_size) + ", " +
                   std::to_string(c.fields.size()) + " fields)");
  }
  for (size_t i = 0; i < c.fields.size(); ++i) {
    const PlanFieldMemoryDoc& planned = m->fields[i];
    FieldLayout& f = c.fields[i];
    if (f.gpu && planned.staging_bytes_per_sample <= 0) {
      return corrupt("has no staging size for GPU field `" + f.name + "`");
    }
    if (planned.field != f.name ||
        static_cast<size_t>(planned.bytes_per_sample) != f.sample_bytes ||
        (f.gpu && static_cast<size_t>(planned.staging_bytes_per_sample) != f.host_sample_bytes)) {
      return corrupt("disagrees with batch field `" + f.name + "`");
    }
    const int64_t offset = c.gpu.use ? planned.staged_offset : planned.offset;
    if (offset < 0) return corrupt("gives batch field `" + f.name + "` a negative offset");
    f.offset = static_cast<size_t>(offset);
  }
  const int64_t buffer_bytes = c.gpu.use ? m->staged_batch_bytes : m->batch_bytes;
  // Each field's slots must lie inside the buffer, apart from each other:
  // the kernels write there unchecked (a tampered plan overflowed the heap).
  // The same check as `sluice verify`'s (plan/plan_document.h), on the sizes
  // the loader will write.
  std::vector<PlanFieldExtent> extents;
  for (const FieldLayout& f : c.fields) {
    const size_t per_sample = f.gpu ? f.host_sample_bytes : f.sample_bytes;
    extents.push_back({f.name, static_cast<int64_t>(f.offset), static_cast<int64_t>(per_sample)});
  }
  SLUICE_RETURN_IF_ERROR(CheckBatchLayout(extents, c.batch_size, buffer_bytes, c.where));
  c.buffer_bytes = static_cast<size_t>(buffer_bytes);
  return Ok();
}

// The decode step. One decode feeds every chain (fused or reference): they
// must agree on the colour.
Status ResolveDecode(const Plan& p, const LoaderOptions& options, LoaderConfig& c) {
  std::vector<const FusedChain*> all_chains;
  for (const FusedChain& chain : p.chains()) all_chains.push_back(&chain);
  for (const FusedChain& chain : p.reference_chains()) all_chains.push_back(&chain);
  auto channels = [](const FusedChain& chain) -> int64_t {
    const int axis = chain.input.channel_axis();
    return axis >= 0 && chain.input.dims[axis] > 0 ? chain.input.dims[axis] : 3;
  };
  c.channels = channels(*all_chains.front());
  for (const FusedChain* chain : all_chains) {
    if (channels(*chain) != c.channels) {
      return MakeError(ErrorCode::kUnsupported, c.where + ": chains read different colour decodes");
    }
  }
  c.decode_op = p.decode_op();
  c.decode_params = p.decode_params();
  // What the compiler's decode_pushdown pass allowed (plan.json "decode");
  // the decoder's caps narrow it further (EffectivePushdown).
  c.pushdown.region = p.decode_roi_allowed();
  c.pushdown.dct_scaling = options.dct_scaling && p.decode_dct_scaling_allowed();
  return Ok();
}

// Reference fields: one warning per loader naming each.
void AddReferenceWarning(const Plan& p, LoaderConfig& c) {
  std::string slow;
  int slow_fields = 0;
  for (const FieldLayout& f : c.fields) {
    if (f.reference < 0) continue;
    std::string reason = p.reference_reasons()[f.reference];
    if (reason.starts_with("not fused: ")) reason = reason.substr(11);
    slow += "batch field `" + f.name + "` is not fused" +
            (reason.empty() ? std::string() : " (" + reason + ")") + "; ";
    ++slow_fields;
  }
  if (slow_fields > 0) {
    c.warnings.push_back(
        slow + (slow_fields == 1 ? "it runs" : "they run") +
        " on the reference implementations, much slower than a fused kernel — see report.txt");
  }
}

// Rank and world size, each on its own: the option when set (>= 0), else the
// plan's explicit value, else the environment's RANK / WORLD_SIZE (torchrun
// sets both), else rank 0 of 1. So `world_size: 2` in a spec still takes each
// process's rank from RANK. A rank not below the world size is an error.
Result<DistributedEnv> ResolveSharding(const LoaderOptions& options, int64_t plan_rank,
                                       int64_t plan_world, const LoaderEnvironment& env,
                                       const std::string& where) {
  const int64_t rank = options.rank >= 0 ? options.rank : plan_rank;
  const int64_t world = options.world_size >= 0 ? options.world_size : plan_world;
  if (rank < 0 || world < 0) {
    // At least one comes from the environment (defaults when it is unset).
    if (!env.distributed) return std::unexpected(env.distributed.error());
  }
  DistributedEnv out;
  out.rank = rank >= 0 ? static_cast<int>(rank) : env.distributed->rank;
  out.world_size = world >= 0 ? static_cast<int>(world) : env.distributed->world_size;
  auto from = [](int64_t explicit_value, const char* variable) {
    return explicit_value >= 0 ? std::string("set explicitly") : std::string("from ") + variable;
  };
  if (out.world_size < 1) {
    return MakeError(ErrorCode::kInvalidArgument,
                     where + ": world_size " + std::to_string(out.world_size) + " (" +
                         from(world, "WORLD_SIZE") + ") must be at least 1");
  }
  if (out.rank >= out.world_size) {
    return MakeError(ErrorCode::kInvalidArgument,
                     where + ": rank " + std::to_string(out.rank) + " (" + from(rank, "RANK") +
                         ") is not below world_size " + std::to_string(out.world_size) + " (" +
                         from(world, "WORLD_SIZE") + ")",
                     "set both rank and world_size, or neither and let torchrun's RANK and "
                     "WORLD_SIZE decide");
  }
  return out;
}

// Order, seed and sharding (rank / world size: the options, else the plan's
// explicit values, else the environment).
Status ResolveSampling(const Plan& p, const LoaderOptions& options, const LoaderEnvironment& env,
                       LoaderConfig& c) {
  const ParamList& s = p.sampling();
  c.seed = options.seed.value_or(static_cast<uint64_t>(IntOr(s, "seed", 0)));
  c.first_epoch = options.epoch;
  SamplerConfig& config = c.sampler;
  config.seed = c.seed;
  const std::string order = StringOr(s, "order", "shuffle");
  if (std::optional<SampleOrder> parsed = ParseSampleOrder(order)) {
    config.order = *parsed;
  } else {
    return MakeError(ErrorCode::kInvalidSpec, c.where + ": unknown sampling order '" + order + "'",
                     "use shuffle, shard_shuffle or sequential");
  }
  config.shuffle_buffer =
      static_cast<uint64_t>(std::max<int64_t>(IntOr(s, "shuffle_buffer", 10000), 1));
  config.remainder = StringOr(s, "remainder", "drop") == "pad" ? Remainder::kPad : Remainder::kDrop;
  config.batch_size = static_cast<uint64_t>(c.batch_size);
  int rank = 0, world = 1;
  if (StringOr(s, "sharding", "auto") != "none") {
    auto sharding = ResolveSharding(options, IntOr(s, "rank", -1), IntOr(s, "world_size", -1),
                                    env, c.where);
    if (!sharding) return std::unexpected(sharding.error());
    rank = sharding->rank;
    world = sharding->world_size;
  }
  config.rank = rank;
  config.world_size = world;
  return Ok();
}

// The error policy and ordering.
void ResolvePolicy(const Plan& p, const LoaderOptions& options, LoaderConfig& c) {
  const ParamList& out = p.output();
  if (const ParamValue* on_error = Find(out, "on_error")) {
    const ParamList& e = on_error->AsSection();
    std::string policy = StringOr(e, "policy", "skip");
    c.policy = policy == "fail"      ? ErrorPolicy::kFail
               : policy == "replace" ? ErrorPolicy::kReplace
                                     : ErrorPolicy::kSkip;
    if (const ParamValue* mf = Find(e, "max_fraction")) c.max_fraction = mf->AsFloat();
  }
  c.relaxed = options.relaxed_ordering.value_or(StringOr(out, "ordering", "strict") == "relaxed");
}

// threads, in_flight, prefetch: LoaderOptions, else the spec's explicit value,
// else the plan's tuned value, else the auto rule (loader.h).
Status ResolveKnobs(const Plan& p, const LoaderOptions& options, const LoaderEnvironment& env,
                    LoaderConfig& c) {
  const ParamList& out = p.output();
  const TunedKnobs& tuned = p.tuned();
  int64_t threads = options.threads > 0 ? options.threads : IntOr(out, "threads", -1);
  if (threads <= 0) threads = tuned.threads;
  if (threads <= 0) threads = IntOr(out, "cpu_budget", -1);
  if (threads <= 0) threads = std::max(1u, env.usable_cores);
  int64_t in_flight = options.in_flight > 0 ? options.in_flight : IntOr(out, "in_flight", -1);
  if (in_flight <= 0) in_flight = tuned.in_flight;
  if (in_flight <= 0) in_flight = threads;  // one sample per worker
  int64_t prefetch = options.prefetch > 0 ? options.prefetch : IntOr(out, "prefetch", -1);
  if (prefetch <= 0) prefetch = tuned.prefetch;
  if (prefetch <= 0) prefetch = 2;
  if (options.threads == 0 || options.prefetch == 0 || options.in_flight == 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "LoaderOptions threads/prefetch/in_flight must be positive or -1 (auto)");
  }
  // Whatever set them (options, spec, a tuned plan): before narrowing to int.
  for (auto [name, value, max] : {std::tuple{"threads", threads, LoaderOptions::kMaxThreads},
                                  {"prefetch", prefetch, LoaderOptions::kMaxPrefetch},
                                  {"in_flight", in_flight, LoaderOptions::kMaxInFlight}}) {
    if (value > max) {
      return MakeError(ErrorCode::kInvalidArgument,
                       c.where + ": " + name + " " + std::to_string(value) + " is above " +
                           std::to_string(max),
                       std::string("set output.") + name + " (or the " + name +
                           " option) to at most " + std::to_string(max));
    }
  }
  c.threads = static_cast<int>(threads);
  c.workers = static_cast<int>(std::min(threads, in_flight));
  c.prefetch = static_cast<int>(prefetch);
  c.online_tuning = options.threads <= 0 && options.in_flight <= 0 && options.prefetch <= 0 &&
                    IntOr(out, "threads", -1) <= 0 && IntOr(out, "in_flight", -1) <= 0 &&
                    IntOr(out, "prefetch", -1) <= 0 && tuned.threads <= 0 && tuned.in_flight <= 0 &&
                    tuned.prefetch <= 0;
  return Ok();
}

// A remote tar_shards read-ahead left auto gets what the tuned memory budget
// leaves after the (prefetch + 1) batch buffers (runtime/sources/tar/read_ahead.h);
// without a tuned budget the source sizes it from the machine's memory.
void ResolveReadAheadBudget(const Plan& p, LoaderConfig& c) {
  const TunedKnobs& tuned = p.tuned();
  if (c.source_format != "tar_shards" || tuned.memory_budget <= 0) return;
  const int64_t buffers =
      static_cast<int64_t>(c.prefetch + 1) * std::max<int64_t>(0, tuned.batch_bytes);
  c.source_params[kReadAheadBudgetParam] =
      ParamValue{std::max<int64_t>(0, tuned.memory_budget - buffers)};
}

}  // namespace

LoaderEnvironment LoaderEnvironment::FromProcess(std::function<Status(int ordinal)> open_gpu) {
  LoaderEnvironment env;
  env.usable_cores = static_cast<unsigned>(UsableCores());
  env.distributed = DistributedEnvFromEnvironment();
  env.open_gpu = std::move(open_gpu);
  return env;
}

Result<LoaderConfig> ResolveLoaderConfig(const Plan& p, const LoaderOptions& options,
                                         const LoaderEnvironment& env) {
  LoaderConfig c;
  c.where = "plan `" + p.path() + "`";
  c.spec_hash = p.spec_hash();
  c.source_format = p.source_format();
  c.source_params = p.source_params();
  // A plan compiled before read_timeout existed gets the registry's default.
  c.read_timeout = FloatOr(c.source_params, "read_timeout", DefaultReadTimeout(c.source_format));
  if (!(c.read_timeout >= 0)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     c.where + ": source.read_timeout must be >= 0 seconds (0 = no deadline)");
  }
  const ParamValue* size = Find(p.batch(), "size");
  const ParamValue* fields = Find(p.batch(), "fields");
  if (size == nullptr || fields == nullptr) {
    return MakeError(ErrorCode::kInvalidArgument, c.where + " has no batch.size or batch.fields");
  }
  c.batch_size = size->AsInt();
  if (c.batch_size <= 0) {
    return MakeError(ErrorCode::kInvalidArgument, c.where + ": batch.size must be positive");
  }
  if (p.chains().empty() && p.reference_chains().empty()) {
    return MakeError(ErrorCode::kUnsupported,
                     c.where + " has no fused kernel and no reference chain",
                     "recompile it with this version of sluice; report.txt says what was fused");
  }
  SLUICE_RETURN_IF_ERROR(ResolveDevice(p, options, env, c));
  SLUICE_RETURN_IF_ERROR(ResolveFields(p, *fields, c));
  SLUICE_RETURN_IF_ERROR(ApplyMemoryPlan(p, c));
  SLUICE_RETURN_IF_ERROR(ResolveDecode(p, options, c));
  AddReferenceWarning(p, c);
  SLUICE_RETURN_IF_ERROR(ResolveSampling(p, options, env, c));
  ResolvePolicy(p, options, c);
  SLUICE_RETURN_IF_ERROR(ResolveKnobs(p, options, env, c));
  ResolveReadAheadBudget(p, c);
  return c;
}

PushdownConfig EffectivePushdown(const PushdownConfig& wanted, const DecoderCaps& caps) {
  PushdownConfig out;
  out.region = wanted.region && caps.region_of_interest;
  out.dct_scaling = out.region && wanted.dct_scaling && caps.dct_scaling;
  return out;
}

}  // namespace sluice::runtime
