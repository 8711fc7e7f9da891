// LoaderCore: see loader_core.h for the scheduling and shutdown contract.
#include "runtime/exec/loader_core.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <thread>

#include "ops/fusion/sample_args.h"
#include "runtime/decode/jpeg_decoder.h"
#include "runtime/kernels/kernel_library.h"
#include "runtime/plan/plan_internal.h"

namespace sluice::runtime {
namespace {

uint64_t Mix(uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

Error Err(ErrorCode code, std::string message, std::string hint = {}) {
  Error e;
  e.code = code;
  e.message = std::move(message);
  e.hint = std::move(hint);
  return e;
}

int64_t Ns(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count();
}

const ParamValue* Find(const ParamList& list, const std::string& name) {
  auto it = list.find(name);
  return it == list.end() ? nullptr : &it->second;
}

int64_t IntOr(const ParamList& list, const std::string& name, int64_t fallback) {
  const ParamValue* v = Find(list, name);
  if (v == nullptr || !std::holds_alternative<int64_t>(v->value)) return fallback;
  return v->AsInt();
}

std::string StringOr(const ParamList& list, const std::string& name, std::string fallback) {
  const ParamValue* v = Find(list, name);
  if (v == nullptr || !std::holds_alternative<std::string>(v->value)) return fallback;
  return v->AsString();
}

// Writes `values` (RefTensor elements: float, already rounded to `dtype`)
// densely into `out` as `dtype`.
void ConvertTo(DType dtype, const std::vector<float>& values, uint8_t* out) {
  const size_t n = values.size();
  switch (dtype) {
    case DType::kUInt8:
      for (size_t i = 0; i < n; ++i) {
        out[i] = static_cast<uint8_t>(RoundToDType(values[i], DType::kUInt8));
      }
      return;
    case DType::kFloat32:
      std::memcpy(out, values.data(), n * sizeof(float));
      return;
    case DType::kFloat16:
      for (size_t i = 0; i < n; ++i) {
        // The compiler's float -> _Float16 conversion: round to nearest even
        // (exact: the values are already float16-rounded).
        const uint16_t h = std::bit_cast<uint16_t>(static_cast<_Float16>(values[i]));
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case DType::kBFloat16:
      for (size_t i = 0; i < n; ++i) {
        const uint16_t b = static_cast<uint16_t>(
            std::bit_cast<uint32_t>(RoundToDType(values[i], DType::kBFloat16)) >> 16);
        std::memcpy(out + 2 * i, &b, 2);
      }
      return;
    case DType::kInt64:
      for (size_t i = 0; i < n; ++i) {
        const int64_t v = static_cast<int64_t>(values[i]);
        std::memcpy(out + 8 * i, &v, 8);
      }
      return;
    case DType::kBytes:
      return;  // not a batch field type (Create rejects it)
  }
}

// kernels.so's CUDA context/stream (sluice_cuda_set_context) is process-wide:
// setting it and launching are one step under this lock, so loaders sharing a
// kernels.so each launch on their own stream.
std::mutex& LaunchMutex() {
  static std::mutex m;
  return m;
}

}  // namespace

Result<std::shared_ptr<LoaderCore>> LoaderCore::Create(const Plan& plan,
                                                       const LoaderOptions& options) {
  std::shared_ptr<LoaderCore> core(new LoaderCore());
  core->plan_ = std::make_unique<Plan>(plan);
  const Plan& p = *core->plan_;
  const std::string where = "plan `" + p.path() + "`";

  // Source.
  const std::string source_path = StringOr(p.source_params(), "path", "");
  SourceOptions source_options;
  source_options.path_column = StringOr(p.source_params(), "path_column", "path");
  source_options.label_column = StringOr(p.source_params(), "label_column", "label");
  auto source = OpenSource(p.source_format(), source_path, source_options);
  if (!source) return std::unexpected(source.error());
  core->source_ = std::move(*source);

  // Batch fields.
  const ParamValue* size = Find(p.batch(), "size");
  const ParamValue* fields = Find(p.batch(), "fields");
  if (size == nullptr || fields == nullptr) {
    return MakeError(ErrorCode::kInvalidArgument, where + " has no batch.size or batch.fields");
  }
  core->batch_size_ = size->AsInt();
  if (core->batch_size_ <= 0) {
    return MakeError(ErrorCode::kInvalidArgument, where + ": batch.size must be positive");
  }
  if (p.chains().empty() && p.reference_chains().empty()) {
    return MakeError(ErrorCode::kUnsupported, where + " has no fused kernel and no reference chain",
                     "recompile it with this version of sluice; report.txt says what was fused");
  }
  // Device: the GPU stages run on the GPU when asked for (or `auto`) and a
  // device is usable; otherwise the whole-chain CPU kernels (a warning), or an
  // error when cuda was forced.
  const std::string requested = options.device.value_or(StringOr(p.output(), "device", "auto"));
  if (requested != "auto" && requested != "cpu") {
    if (auto parsed = cuda::ParseCudaDevice(requested); !parsed) {
      return MakeError(ErrorCode::kInvalidArgument, where + ": " + parsed.error().message);
    }
  }
  const bool forced = requested.starts_with("cuda");
  const bool has_stage = std::any_of(p.gpu_stages().begin(), p.gpu_stages().end(),
                                     [](const auto& st) { return st.has_value(); });
  bool use_gpu = false;
  int ordinal = 0;
  if (requested != "cpu" && has_stage) {
    const std::string& which = forced ? requested : p.placement_device();
    if (which.starts_with("cuda")) ordinal = cuda::ParseCudaDevice(which).value_or(0);
    auto dev = cuda::CudaDevice::Open(ordinal);
    if (!dev) {
      if (forced) {
        return MakeError(
            ErrorCode::kUnsupported,
            where + ": output device `" + requested + "` is not usable: " + dev.error().message,
            "run on a machine with a CUDA device, or set device: cpu (the plan's "
            "whole-chain CPU kernels then run instead)");
      }
      core->warnings_.push_back(where + " places work on the GPU, but " + dev.error().message +
                                "; running the whole chains on the CPU");
    } else {
      use_gpu = true;
      core->gpu_ = std::make_unique<Gpu>();
      core->gpu_->device = std::move(*dev);
    }
  } else if (forced && !has_stage) {
    core->warnings_.push_back(where + ": output device `" + requested +
                              "` requested, but the plan has no GPU stage (compiled without "
                              "CUDA kernels, or nothing placed on the GPU); batches stay on the "
                              "host");
  }
  size_t offset = 0;
  size_t device_bytes = 0;
  for (const auto& [name, value] : fields->AsStringMap()) {
    FieldLayout f;
    f.name = name;
    for (size_t c = 0; c < p.chain_fields().size(); ++c) {
      if (p.chain_fields()[c] == name) f.chain = static_cast<int>(c);
    }
    if (f.chain < 0) {
      for (size_t r = 0; r < p.reference_fields().size(); ++r) {
        if (p.reference_fields()[r] == name) f.reference = static_cast<int>(r);
      }
    }
    if (f.chain >= 0 || f.reference >= 0) {
      const TensorType& t =
          f.chain >= 0 ? p.chains()[f.chain].output : p.reference_chains()[f.reference].output;
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
    } else if (value == "cls") {
      f.dtype = DType::kInt64;
    } else {
      return MakeError(ErrorCode::kUnsupported,
                       where + ": batch field `" + name + "` (value `" + value +
                           "`) is written neither by a fused kernel, a reference chain nor "
                           "the source's label (its per-sample chain is not a simple chain of "
                           "single-input ops from a decode)",
                       "recompile; report.txt says which ops were not fused");
    }
    int64_t elems = 1;
    for (int64_t d : f.sample_shape) elems *= d;
    f.sample_bytes = static_cast<size_t>(elems) * static_cast<size_t>(DTypeSize(f.dtype));
    f.host_sample_bytes = f.sample_bytes;
    if (use_gpu && f.chain >= 0 && p.gpu_stages()[f.chain]) {
      const TensorType& st = p.gpu_stages()[f.chain]->staging;
      int64_t staging = 1;
      for (int64_t d : st.dims) staging *= d;
      f.gpu = true;
      f.host_sample_bytes = static_cast<size_t>(staging);
      const size_t b = static_cast<size_t>(core->batch_size_);
      f.device_staging = device_bytes;
      device_bytes += cuda::DeviceArena::Rounded(f.host_sample_bytes * b);
      f.device_output = device_bytes;
      device_bytes += cuda::DeviceArena::Rounded(f.sample_bytes * b);
    }
    f.offset = offset;
    offset += f.host_sample_bytes * static_cast<size_t>(core->batch_size_);
    offset = (offset + 63) / 64 * 64;
    core->fields_.push_back(std::move(f));
  }
  core->buffer_bytes_ = std::max<size_t>(offset, 64);
  // One decode feeds every chain (fused or reference): they must agree on the colour.
  std::vector<const FusedChain*> all_chains;
  for (const FusedChain& chain : p.chains()) all_chains.push_back(&chain);
  for (const FusedChain& chain : p.reference_chains()) all_chains.push_back(&chain);
  const TensorType& in0 = all_chains.front()->input;
  const int c_axis = in0.channel_axis();
  core->gray_ = c_axis >= 0 && in0.dims[c_axis] == 1;
  for (const FusedChain* chain : all_chains) {
    int ca = chain->input.channel_axis();
    bool g = ca >= 0 && chain->input.dims[ca] == 1;
    if (g != core->gray_) {
      return MakeError(ErrorCode::kUnsupported, where + ": chains read different colour decodes");
    }
  }
  // Reference fields: one warning per loader naming each.
  std::string slow;
  int slow_fields = 0;
  for (const FieldLayout& f : core->fields_) {
    if (f.reference < 0) continue;
    std::string reason = p.reference_reasons()[f.reference];
    if (reason.starts_with("not fused: ")) reason = reason.substr(11);
    slow += "batch field `" + f.name + "` is not fused" +
            (reason.empty() ? std::string() : " (" + reason + ")") + "; ";
    ++slow_fields;
  }
  if (slow_fields > 0) {
    core->warnings_.push_back(
        slow + (slow_fields == 1 ? "it runs" : "they run") +
        " on the reference implementations, much slower than a fused kernel — see report.txt");
  }
  if (!core->warnings_.empty()) {
    static std::atomic<bool> printed{false};
    if (!printed.exchange(true)) {
      for (const std::string& w : core->warnings_) std::cerr << "sluice: warning: " << w << "\n";
    }
  }

  // Sampling.
  const ParamList& s = p.sampling();
  core->seed_ = options.seed.value_or(static_cast<uint64_t>(IntOr(s, "seed", 0)));
  SamplerConfig config;
  config.num_samples = core->source_->size();
  config.seed = core->seed_;
  config.order = StringOr(s, "order", "shuffle") == "sequential" ? SampleOrder::kSequential
                                                                 : SampleOrder::kShuffle;
  config.remainder = StringOr(s, "remainder", "drop") == "pad" ? Remainder::kPad : Remainder::kDrop;
  config.batch_size = static_cast<uint64_t>(core->batch_size_);
  int rank = 0, world = 1;
  if (StringOr(s, "sharding", "auto") != "none") {
    int64_t plan_rank = IntOr(s, "rank", -1), plan_world = IntOr(s, "world_size", -1);
    if (options.rank >= 0 || options.world_size >= 0) {
      rank = std::max(options.rank, 0);
      world = std::max(options.world_size, 1);
    } else if (plan_rank >= 0 || plan_world >= 0) {
      rank = static_cast<int>(std::max<int64_t>(plan_rank, 0));
      world = static_cast<int>(std::max<int64_t>(plan_world, 1));
    } else {
      auto env = DistributedEnvFromEnvironment();
      if (!env) return std::unexpected(env.error());
      rank = env->rank;
      world = env->world_size;
    }
  }
  config.rank = rank;
  config.world_size = world;
  auto sampler = EpochSampler::Create(config);
  if (!sampler) return std::unexpected(sampler.error());
  core->sampler_.emplace(std::move(*sampler));

  // Policy and knobs.
  const ParamList& out = p.output();
  if (const ParamValue* on_error = Find(out, "on_error")) {
    const ParamList& e = on_error->AsSection();
    std::string policy = StringOr(e, "policy", "skip");
    core->policy_ = policy == "fail"      ? ErrorPolicy::kFail
                    : policy == "replace" ? ErrorPolicy::kReplace
                                          : ErrorPolicy::kSkip;
    if (const ParamValue* mf = Find(e, "max_fraction")) core->max_fraction_ = mf->AsFloat();
  }
  core->relaxed_ =
      options.relaxed_ordering.value_or(StringOr(out, "ordering", "strict") == "relaxed");
  core->dct_scaling_ = options.dct_scaling;
  // Each knob: LoaderOptions, else the spec's explicit value, else what
  // `sluice tune` wrote into the plan, else the auto rule (loader.h).
  const TunedKnobs& tuned = plan.tuned();
  int64_t threads = options.threads > 0 ? options.threads : IntOr(out, "threads", -1);
  if (threads <= 0) threads = tuned.threads;
  if (threads <= 0) threads = IntOr(out, "cpu_budget", -1);
  if (threads <= 0) threads = std::max(1u, std::thread::hardware_concurrency());
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
  core->threads_ = static_cast<int>(threads);
  core->workers_ = static_cast<int>(std::min(threads, in_flight));
  core->prefetch_ = static_cast<int>(prefetch);
  core->worker_cap_ = core->workers_;
  core->prefetch_cap_ = core->prefetch_;
  const bool auto_knobs = options.threads <= 0 && options.in_flight <= 0 && options.prefetch <= 0 &&
                          IntOr(out, "threads", -1) <= 0 && IntOr(out, "in_flight", -1) <= 0 &&
                          IntOr(out, "prefetch", -1) <= 0 && tuned.threads <= 0 &&
                          tuned.in_flight <= 0 && tuned.prefetch <= 0;
  if (auto_knobs) {
    // Starts at the maxima (all workers, full prefetch) and gives back what the
    // trainer does not need; never above what the pools below allocate.
    core->online_.emplace(
        OnlineTuner::Limits{.max_workers = core->workers_, .max_prefetch = core->prefetch_},
        core->workers_, core->prefetch_);
  }

  // Pools: fixed from here on.
  core->scratch_.resize(static_cast<size_t>(core->workers_));
  core->buffers_.resize(static_cast<size_t>(core->prefetch_ + 1));
  if (use_gpu) {
    core->gpu_->wait = options.wait_for_device;
    if (Status st = core->SetUpGpu(ordinal); !st) {
      Error e = st.error();
      e.message = where + ": setting up the GPU path: " + e.message;
      return std::unexpected(std::move(e));
    }
    core->device_ = "cuda:" + std::to_string(ordinal);
    auto arena =
        cuda::DeviceArena::Create(core->gpu_->device, device_bytes * core->buffers_.size());
    if (!arena) return std::unexpected(arena.error());
    core->gpu_->arena = std::move(*arena);
  }
  for (size_t i = 0; i < core->buffers_.size(); ++i) {
    PoolBuffer& b = core->buffers_[i];
    if (use_gpu) {
      auto pinned = cuda::PinnedBuffer::Allocate(core->gpu_->device, core->buffer_bytes_);
      if (!pinned) return std::unexpected(pinned.error());
      auto event = cuda::CudaEvent::Create(core->gpu_->device);
      if (!event) return std::unexpected(event.error());
      auto block = core->gpu_->arena->Take(device_bytes);
      if (!block) return std::unexpected(block.error());
      b.data = (*pinned)->data();
      core->gpu_->pinned.push_back(std::move(*pinned));
      core->gpu_->events.push_back(std::move(*event));
      core->gpu_->block.push_back(*block);
      b.samples.assign(static_cast<size_t>(core->batch_size_), 0);
      continue;
    }
    b.data = static_cast<uint8_t*>(std::aligned_alloc(64, core->buffer_bytes_));
    if (b.data == nullptr) {
      return MakeError(ErrorCode::kInternal, "cannot allocate a batch buffer of " +
                                                 std::to_string(core->buffer_bytes_) + " bytes");
    }
    b.samples.assign(static_cast<size_t>(core->batch_size_), 0);
  }
  for (int w = core->workers_ - 1; w >= 0; --w) core->idle_workers_.push_back(w);
  core->parallelism_ = std::make_unique<tbb::global_control>(
      tbb::global_control::max_allowed_parallelism, static_cast<size_t>(core->threads_) + 1);
  core->arena_ = std::make_unique<tbb::task_arena>(core->threads_, 0);
  core->created_ = Clock::now();
  core->last_bad_.reserve(8);

  std::unique_lock lock(core->mutex_);
  core->StartEpochLocked(options.epoch, 0);
  core->PumpLocked();
  return core;
}

LoaderCore::~LoaderCore() {
  if (gpu_) {
    // Device work may still read the pinned buffers or write the arena.
    if (gpu_->stream) (void)gpu_->stream->Synchronize();
    return;  // pinned buffers, arena, events and stream free themselves
  }
  for (PoolBuffer& b : buffers_) std::free(b.data);
}

Status LoaderCore::SetUpGpu(int ordinal) {
  Gpu& g = *gpu_;
  const Plan& p = *plan_;
  const runtime::KernelLibrary& lib = p.kernels();
  g.set_context = reinterpret_cast<SetCudaContextFn>(lib.Symbol(kSetCudaContextSymbol));
  auto iface = reinterpret_cast<const halide_device_interface_t* (*)()>(
      lib.Symbol("halide_cuda_device_interface"));
  if (g.set_context == nullptr || iface == nullptr) {
    return MakeError(ErrorCode::kCorruptData,
                     "kernels.so has GPU stages but no CUDA runtime shim "
                     "(sluice_cuda_set_context / halide_cuda_device_interface)",
                     "recompile the plan with this version of sluice");
  }
  g.interface = iface();
  g.batch_fn.assign(p.chains().size(), nullptr);
  for (size_t i = 0; i < p.chains().size(); ++i) {
    if (!p.gpu_stages()[i]) continue;
    const std::string& sym = p.gpu_stages()[i]->gpu_batch_symbol;
    g.batch_fn[i] = reinterpret_cast<GpuBatchKernelFn>(lib.Symbol(sym));
    if (g.batch_fn[i] == nullptr || p.cpu_part_kernel(i) == nullptr) {
      return MakeError(ErrorCode::kCorruptData, "kernel `" + sym + "` or its CPU part is missing",
                       "recompile the plan");
    }
  }
  auto stream = cuda::CudaStream::Create(g.device);
  if (!stream) return std::unexpected(stream.error());
  g.stream = std::move(*stream);
  (void)ordinal;
  return Ok();
}

Status LoaderCore::LaunchBatch(int buffer) {
  Gpu& g = *gpu_;
  const cuda::CudaDriver& drv = g.device->driver();
  cuda::CudaDevice::Scope scope(*g.device);
  SLUICE_RETURN_IF_ERROR(scope.status());
  const cuda::CUdeviceptr block = g.block[static_cast<size_t>(buffer)];
  const size_t b = static_cast<size_t>(batch_size_);
  for (const FieldLayout& f : fields_) {
    if (!f.gpu) continue;
    SLUICE_RETURN_IF_ERROR(
        drv.Check(drv.cuMemcpyHtoDAsync(block + f.device_staging, buffers_[buffer].data + f.offset,
                                        f.host_sample_bytes * b, g.stream->get()),
                  "host-to-device copy of field `" + f.name + "`"));
  }
  {
    std::lock_guard launch(LaunchMutex());
    g.set_context(g.device->context(), g.stream->get());
    for (const FieldLayout& f : fields_) {
      if (!f.gpu) continue;
      const TensorType& st = plan_->gpu_stages()[f.chain]->staging;
      const int32_t sh = static_cast<int32_t>(st.dims[0]), sw = static_cast<int32_t>(st.dims[1]),
                    sc = static_cast<int32_t>(st.dims[2]);
      const int32_t n = static_cast<int32_t>(batch_size_);
      halide_dimension_t in_dims[4] = {
          {0, sc, 1, 0}, {0, sw, sc, 0}, {0, sh, sc * sw, 0}, {0, n, sc * sw * sh, 0}};
      halide_buffer_t in{};
      in.device = block + f.device_staging;
      in.device_interface = g.interface;
      in.type = halide_type_t(halide_type_uint, 8);
      in.dimensions = 4;
      in.dim = in_dims;
      const TensorType& ot = plan_->chains()[f.chain].output;
      halide_dimension_t out_dims[4];
      SampleOutputDims(ot, out_dims);  // the batch dim follows a dense sample
      out_dims[3] = {0, n, out_dims[0].extent * out_dims[1].extent * out_dims[2].extent, 0};
      halide_buffer_t out{};
      out.device = block + f.device_output;
      out.device_interface = g.interface;
      out.type = HalideElementType(ot.dtype);
      out.dimensions = 4;
      out.dim = out_dims;
      const int rc = g.batch_fn[static_cast<size_t>(f.chain)](&in, &out);
      if (rc != 0) {
        return MakeError(ErrorCode::kInternal, "GPU batch kernel of field `" + f.name +
                                                   "` failed with Halide error code " +
                                                   std::to_string(rc));
      }
    }
  }
  return g.events[static_cast<size_t>(buffer)]->Record(g.stream->get());
}

void LoaderCore::Shutdown() {
  std::unique_lock lock(mutex_);
  stopping_ = true;
  WaitIdleLocked(lock);
}

void LoaderCore::WaitIdleLocked(std::unique_lock<std::mutex>& lock) {
  cv_.wait(lock, [&] { return active_workers_ == 0; });
}

void LoaderCore::StartEpochLocked(uint64_t epoch, uint64_t position,
                                  const std::vector<uint64_t>& delivered_ahead) {
  epoch_ = epoch;
  order_.emplace(sampler_->Epoch(epoch));
  sched_pos_ = position;
  fill_buffer_ = -1;
  deliver_next_ = position / static_cast<uint64_t>(batch_size_);
  delivered_in_epoch_ = deliver_next_;
  delivered_.assign(batches_per_epoch(), false);
  for (uint64_t k = 0; k < deliver_next_ && k < delivered_.size(); ++k) delivered_[k] = true;
  for (uint64_t k : delivered_ahead) {
    delivered_[k] = true;
    ++delivered_in_epoch_;
  }
  SkipDeliveredBatchesLocked();
  epoch_bad_ = 0;
}

void LoaderCore::SkipDeliveredBatchesLocked() {
  const uint64_t b = static_cast<uint64_t>(batch_size_);
  // Stops at samples_per_rank() at the latest (delivered_ has one entry per batch).
  while (sched_pos_ / b < delivered_.size() && delivered_[sched_pos_ / b]) sched_pos_ += b;
}

bool LoaderCore::WorkAvailableLocked() const {
  if (stopping_ || fatal_) return false;
  if (sched_pos_ >= sampler_->samples_per_rank()) return false;
  if (sched_pos_ % static_cast<uint64_t>(batch_size_) != 0) return true;
  // A new batch needs a free buffer, and at most prefetch_cap_ + 1 buffers in
  // the loader's hands (filling, transferring or ready; the pool has
  // prefetch_ + 1, so with the cap at prefetch_ this is no limit).
  int loader_owned = 0;
  bool any_free = false;
  for (const PoolBuffer& b : buffers_) {
    if (b.state == BufferState::kFree) any_free = true;
    if (b.state == BufferState::kFilling || b.state == BufferState::kTransferring ||
        b.state == BufferState::kReady) {
      ++loader_owned;
    }
  }
  return any_free && loader_owned < prefetch_cap_ + 1;
}

bool LoaderCore::TakeJobLocked(Job& job) {
  if (!WorkAvailableLocked()) return false;
  const uint64_t b = static_cast<uint64_t>(batch_size_);
  const int64_t slot = static_cast<int64_t>(sched_pos_ % b);
  if (slot == 0) {
    int free = -1;
    for (size_t i = 0; i < buffers_.size(); ++i) {
      if (buffers_[i].state == BufferState::kFree) {
        free = static_cast<int>(i);
        break;
      }
    }
    PoolBuffer& buf = buffers_[free];
    if (gpu_) {
      // A copy from this buffer may still be pending (async hand-off, or a
      // batch abandoned by Restore): wait before its slots are rewritten.
      if (Status st = gpu_->events[static_cast<size_t>(free)]->Synchronize(); !st && !fatal_) {
        fatal_ = st.error();
        cv_.notify_all();
        return false;
      }
    }
    buf.state = BufferState::kFilling;
    buf.epoch = epoch_;
    buf.index = sched_pos_ / b;
    buf.remaining = batch_size_;
    buf.start = Clock::now();
    buf.error.reset();
    fill_buffer_ = free;
  }
  job.buffer = fill_buffer_;
  job.slot = slot;
  job.epoch = epoch_;
  job.position = sched_pos_;
  ++sched_pos_;
  if (sched_pos_ % b == 0) SkipDeliveredBatchesLocked();
  return true;
}

void LoaderCore::PumpLocked() {
  while (!idle_workers_.empty() && active_workers_ < worker_cap_ && WorkAvailableLocked()) {
    int w = idle_workers_.back();
    idle_workers_.pop_back();
    ++active_workers_;
    arena_->enqueue([this, w] { WorkerLoop(w); });
  }
}

void LoaderCore::WorkerLoop(int worker) {
  // Never throws: anything thrown becomes a fatal error for Next().
  Scratch& scratch = scratch_[static_cast<size_t>(worker)];
  Outcome outcome;
  while (true) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      // Above the online tuner's cap, this worker goes idle first.
      if (active_workers_ > worker_cap_ || !TakeJobLocked(job)) {
        idle_workers_.push_back(worker);
        --active_workers_;
        cv_.notify_all();
        return;
      }
    }
    try {
      outcome.used_index = 0;
      outcome.error.reset();
      outcome.fatal.reset();
      outcome.bad_count = 0;
      outcome.read_ns = outcome.decode_ns = outcome.kernel_ns = 0;
      ProcessSample(job, scratch, outcome);
    } catch (const std::exception& e) {
      outcome.fatal =
          Err(ErrorCode::kInternal, std::string("exception in a loader task: ") + e.what());
    } catch (...) {
      outcome.fatal = Err(ErrorCode::kInternal, "unknown exception in a loader task");
    }
    std::unique_lock lock(mutex_);
    bool launch = false;
    try {
      launch = CompleteLocked(job, outcome);
    } catch (...) {
      fatal_ = Err(ErrorCode::kInternal, "exception while completing a sample");
      cv_.notify_all();
    }
    if (launch) {
      lock.unlock();
      Status st = Ok();
      try {
        st = LaunchBatch(job.buffer);
      } catch (...) {
        st = MakeError(ErrorCode::kInternal, "exception while launching a GPU batch");
      }
      lock.lock();
      if (!st && !fatal_) fatal_ = st.error();
      buffers_[static_cast<size_t>(job.buffer)].state = BufferState::kReady;
      cv_.notify_all();
    }
  }
}

void LoaderCore::ProcessSample(const Job& job, Scratch& scratch, Outcome& out) const {
  const uint64_t index = (*order_)[job.position];
  const uint64_t n = source_->size();
  const uint64_t local_n = order_->size();
  for (int attempt = 0; attempt <= kMaxAttempts; ++attempt) {
    uint64_t candidate = index;
    if (attempt > 0) {
      if (policy_ == ErrorPolicy::kReplace) {
        candidate = (index + static_cast<uint64_t>(attempt)) % n;
      } else {
        uint64_t h = Mix(Mix(seed_ ^ Mix(job.epoch)) ^ Mix(job.position * 131 + attempt));
        candidate = (*order_)[h % local_n];
      }
    }
    bool fatal = false;
    Status st = RunSample(candidate, job, scratch, out, fatal);
    if (st) {
      out.used_index = candidate;
      return;
    }
    if (fatal) {
      out.fatal = st.error();
      return;
    }
    if (out.bad_count < kMaxBadPerSample) {
      out.bad_index[out.bad_count] = candidate;
      out.bad_error[out.bad_count] = st.error();
      ++out.bad_count;
    }
    if (policy_ == ErrorPolicy::kFail) {
      out.error = st.error();
      return;
    }
  }
  out.error =
      Err(ErrorCode::kCorruptData, "no decodable sample after " + std::to_string(kMaxAttempts) +
                                       " replacement attempts for " + source_->path(index));
}

Status LoaderCore::RunSample(uint64_t index, const Job& job, Scratch& scratch, Outcome& out,
                             bool& fatal) const {
  auto t0 = Clock::now();
  auto bytes = source_->Read(index, scratch.read);
  auto t1 = Clock::now();
  out.read_ns += Ns(t0, t1);
  auto with_path = [&](const Error& e) {
    Error copy = e;
    const std::string& path = source_->path(index);
    if (copy.message.find(path) == std::string::npos) copy.message = path + ": " + copy.message;
    return std::unexpected(std::move(copy));
  };
  if (!bytes) return with_path(bytes.error());
  std::span<const uint8_t> data(scratch.read.data(), *bytes);
  auto header = ReadJpegHeader(data);
  if (!header) return with_path(header.error());
  const Plan& p = *plan_;
  DecodeRequest request;
  request.color = gray_ ? OutputColor::kGray : OutputColor::kRGB;

  // Decode pushdown for a single chain: the union of what the window reads.
  // Off with reference chains: they read the whole image.
  std::optional<SampleArgs> pushed;
  if (p.chains().size() == 1 && p.reference_chains().empty()) {
    auto args =
        ComputeSampleArgs(p.chains()[0], header->height, header->width, seed_, job.epoch, index);
    if (!args) return with_path(args.error());
    const int64_t y_lo = std::max<int64_t>({args->y.window_start, args->y.src_lo, 0});
    const int64_t y_hi = std::min<int64_t>(
        {int64_t{args->y.window_start} + args->y.window, args->y.src_hi, header->height});
    const int64_t x_lo = std::max<int64_t>({args->x.window_start, args->x.src_lo, 0});
    const int64_t x_hi = std::min<int64_t>(
        {int64_t{args->x.window_start} + args->x.window, args->x.src_hi, header->width});
    if (y_lo < y_hi && x_lo < x_hi) {
      request.crop = PixelRect{static_cast<int>(x_lo), static_cast<int>(y_lo),
                               static_cast<int>(x_hi - x_lo), static_cast<int>(y_hi - y_lo)};
      const bool whole_window =
          y_lo == args->y.window_start && y_hi == args->y.window_start + args->y.window &&
          x_lo == args->x.window_start && x_hi == args->x.window_start + args->x.window;
      if (dct_scaling_ && whole_window && args->y.window >= 2 * args->y.resized &&
          args->x.window >= 2 * args->x.resized) {
        request.min_width = args->x.resized;
        request.min_height = args->y.resized;
      }
      pushed = *args;
    }
  }
  auto region = DecodeJpeg(data, request, scratch.image);
  auto t2 = Clock::now();
  out.decode_ns += Ns(t1, t2);
  if (!region) return with_path(region.error());
  const ImageBuffer& img = scratch.image;
  ImageView view{img.data(), img.height(), img.width(), img.channels(),
                 static_cast<int64_t>(img.stride())};
  if (!p.reference_chains().empty()) {
    auto r0 = Clock::now();
    FillReferenceImage(scratch);
    out.kernel_ns += Ns(r0, Clock::now());
  }
  for (const FieldLayout& f : fields_) {
    uint8_t* slot = Slot(job.buffer, f, job.slot);
    if (f.reference >= 0) {
      auto k0 = Clock::now();
      Status st = RunReference(f, index, job, scratch, slot);
      out.kernel_ns += Ns(k0, Clock::now());
      if (!st) return with_path(st.error());
      continue;
    }
    if (f.chain < 0) {
      int64_t label = source_->label(index);
      std::memcpy(slot, &label, sizeof(label));
      continue;
    }
    SampleArgs args;
    if (pushed) {
      args = *pushed;
      const PixelRect& crop = *request.crop;
      auto shift = [](AxisArgs& a, int lo, int hi, int decoded_at) {
        a.window_start -= decoded_at;
        a.src_lo = lo - decoded_at;
        a.src_hi = hi - decoded_at;
      };
      if (region->scale_denom == 1) {
        shift(args.x, crop.x, crop.x + crop.width, region->decoded.x);
        shift(args.y, crop.y, crop.y + crop.height, region->decoded.y);
      } else {
        // DCT-scaled: the window becomes the whole-pixel crop in the buffer.
        const PixelRect& c = region->crop_in_buffer;
        args.x.window_start = args.x.src_lo = c.x;
        args.x.window = c.width;
        args.x.src_hi = c.x + c.width;
        args.y.window_start = args.y.src_lo = c.y;
        args.y.window = c.height;
        args.y.src_hi = c.y + c.height;
      }
    } else {
      auto full = ComputeSampleArgs(p.chains()[f.chain], img.height(), img.width(), seed_,
                                    job.epoch, index);
      if (!full) return with_path(full.error());
      args = *full;
    }
    auto k0 = Clock::now();
    const Kernel& kernel = f.gpu ? *p.cpu_part_kernel(static_cast<size_t>(f.chain))
                                 : p.cpu_kernel(static_cast<size_t>(f.chain));
    Status st = kernel.Run(view, args, slot);
    out.kernel_ns += Ns(k0, Clock::now());
    if (!st) {
      fatal = true;
      return with_path(st.error());
    }
  }
  return Ok();
}

void LoaderCore::FillReferenceImage(Scratch& scratch) {
  const ImageBuffer& img = scratch.image;
  RefTensor& ref = scratch.ref_image;
  const int64_t h = img.height(), w = img.width(), c = img.channels();
  ref.type.dtype = DType::kUInt8;
  ref.type.layout = Layout::kHWC;
  ref.type.dims.assign({h, w, c});                  // keeps its capacity
  ref.data.resize(static_cast<size_t>(h * w * c));  // likewise
  for (int64_t y = 0; y < h; ++y) {
    const uint8_t* row = img.data() + static_cast<size_t>(y) * img.stride();
    float* dst = ref.data.data() + static_cast<size_t>(y * w * c);
    for (int64_t i = 0; i < w * c; ++i) dst[i] = row[i];
  }
}

Status LoaderCore::RunReference(const FieldLayout& f, uint64_t index, const Job& job,
                                const Scratch& scratch, uint8_t* slot) const {
  const RefTensor& ref = scratch.ref_image;
  const int64_t h = ref.height(), w = ref.width();
  const FusedChain& chain = plan_->reference_chains()[static_cast<size_t>(f.reference)];
  auto result = ReferenceChain(chain, ref, seed_, job.epoch, index);
  if (!result) {
    Error e = result.error();
    e.message = "batch field `" + f.name + "` (reference chain) on a " + std::to_string(w) + "x" +
                std::to_string(h) + " image: " + e.message;
    return std::unexpected(std::move(e));
  }
  if (result->type.dims != f.sample_shape || result->type.dtype != f.dtype) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "batch field `" + f.name + "`: its reference chain gives " +
                         result->type.ToString() + " for a " + std::to_string(w) + "x" +
                         std::to_string(h) + " image, not the field's " + chain.output.ToString(),
                     "end the chain with a crop, center_crop or resize to a fixed size");
  }
  ConvertTo(f.dtype, result->data, slot);
  return Ok();
}

bool LoaderCore::CompleteLocked(const Job& job, Outcome& o) {
  PoolBuffer& b = buffers_[static_cast<size_t>(job.buffer)];
  read_ns_ += o.read_ns;
  decode_ns_ += o.decode_ns;
  kernel_ns_ += o.kernel_ns;
  for (int i = 0; i < o.bad_count; ++i) {
    ++bad_total_;
    ++epoch_bad_;
    if (policy_ == ErrorPolicy::kSkip) ++skipped_;
    if (policy_ == ErrorPolicy::kReplace) ++replaced_;
    if (last_bad_.size() == 8) last_bad_.erase(last_bad_.begin());
    last_bad_.push_back(BadSample{source_->path(o.bad_index[i]), o.bad_error[i]->message});
  }
  if (o.fatal && !fatal_) fatal_ = o.fatal;
  if (o.error && !b.error) b.error = o.error;
  const double allowed = max_fraction_ * static_cast<double>(sampler_->samples_per_rank());
  if (!fatal_ && policy_ != ErrorPolicy::kFail && static_cast<double>(epoch_bad_) > allowed) {
    fatal_ = Err(ErrorCode::kCorruptData,
                 std::to_string(epoch_bad_) + " bad samples in epoch " + std::to_string(epoch_) +
                     " exceed on_error.max_fraction " + std::to_string(max_fraction_) + " of " +
                     std::to_string(sampler_->samples_per_rank()) +
                     " samples; last: " + last_bad_.back().path + ": " + last_bad_.back().reason,
                 "fix or remove the bad files, or raise output.on_error.max_fraction");
  }
  b.samples[static_cast<size_t>(job.slot)] = o.used_index;
  bool launch = false;
  if (--b.remaining == 0) {
    latency_.Add(std::chrono::duration<double>(Clock::now() - b.start).count());
    if (gpu_ && !b.error && !fatal_ && !stopping_) {
      b.state = BufferState::kTransferring;
      launch = true;
    } else {
      b.state = BufferState::kReady;
    }
    cv_.notify_all();
  }
  if (fatal_) cv_.notify_all();
  return launch;
}

Batch LoaderCore::MakeBatchLocked(int buffer) {
  PoolBuffer& b = buffers_[static_cast<size_t>(buffer)];
  b.state = BufferState::kHeld;
  Batch batch;
  batch.core_ = shared_from_this();
  batch.buffer_ = buffer;
  batch.size_ = batch_size_;
  batch.epoch_ = b.epoch;
  batch.index_ = b.index;
  batch.samples_ = b.samples;
  if (gpu_) batch.cuda_event_ = gpu_->events[static_cast<size_t>(buffer)]->get();
  for (const FieldLayout& f : fields_) {
    TensorView v;
    v.name = f.name;
    v.dtype = f.dtype;
    v.shape.push_back(batch_size_);
    v.shape.insert(v.shape.end(), f.sample_shape.begin(), f.sample_shape.end());
    v.strides.assign(v.shape.size(), 1);
    for (int i = static_cast<int>(v.shape.size()) - 2; i >= 0; --i) {
      v.strides[i] = v.strides[i + 1] * v.shape[i + 1];
    }
    v.data = b.data + f.offset;
    v.bytes = f.sample_bytes * static_cast<size_t>(batch_size_);
    if (f.gpu) {
      v.data = reinterpret_cast<void*>(
          static_cast<uintptr_t>(gpu_->block[static_cast<size_t>(buffer)] + f.device_output));
      v.device_type = DeviceType::kCUDA;
      v.device_id = gpu_->device->ordinal();
    }
    batch.fields_.push_back(std::move(v));
  }
  return batch;
}

Result<std::optional<Batch>> LoaderCore::Next() {
  auto t0 = Clock::now();
  std::unique_lock lock(mutex_);
  auto done_waiting = [&] {
    wait_seconds_ += std::chrono::duration<double>(Clock::now() - t0).count();
  };
  if (online_) ObserveLocked(t0);
  while (true) {
    if (fatal_) {
      done_waiting();
      return std::unexpected(*fatal_);
    }
    if (delivered_in_epoch_ >= batches_per_epoch()) {
      // End of epoch: report it once, then start the next.
      StartEpochLocked(epoch_ + 1, 0);
      PumpLocked();
      done_waiting();
      return std::optional<Batch>();
    }
    int pick = -1;
    for (size_t i = 0; i < buffers_.size(); ++i) {
      const PoolBuffer& b = buffers_[i];
      if (b.state != BufferState::kReady || b.epoch != epoch_) continue;
      if (relaxed_ ? (pick < 0 || b.index < buffers_[pick].index) : b.index == deliver_next_) {
        pick = static_cast<int>(i);
      }
    }
    if (pick >= 0) {
      PoolBuffer& b = buffers_[static_cast<size_t>(pick)];
      delivered_[b.index] = true;
      ++delivered_in_epoch_;
      while (deliver_next_ < delivered_.size() && delivered_[deliver_next_]) ++deliver_next_;
      if (b.error) {
        Error e = *b.error;
        b.state = BufferState::kFree;
        PumpLocked();
        done_waiting();
        return std::unexpected(std::move(e));
      }
      ++batches_;
      samples_ += static_cast<uint64_t>(batch_size_);
      Batch batch = MakeBatchLocked(pick);
      if (gpu_ && gpu_->wait) {
        lock.unlock();
        Status st = gpu_->events[static_cast<size_t>(pick)]->Synchronize();
        lock.lock();
        done_waiting();
        if (!st) return std::unexpected(st.error());
        return std::optional<Batch>(std::move(batch));
      }
      done_waiting();
      return std::optional<Batch>(std::move(batch));
    }
    // Nothing ready: is anything coming?
    const bool producing = std::any_of(buffers_.begin(), buffers_.end(), [](const PoolBuffer& b) {
      return b.state == BufferState::kFilling || b.state == BufferState::kTransferring ||
             b.state == BufferState::kReady;
    });
    if (!producing && !WorkAvailableLocked()) {
      done_waiting();
      return MakeError(ErrorCode::kInvalidArgument,
                       "every batch buffer (" + std::to_string(buffers_.size()) +
                           ") is held by the caller; the loader cannot fill another",
                       "destroy batches you no longer need, or raise output.prefetch");
    }
    PumpLocked();
    cv_.wait(lock);
  }
}

void LoaderCore::ObserveLocked(Clock::time_point now) {
  const double dt = std::chrono::duration<double>(now - tune_since_).count();
  if (tune_since_ == Clock::time_point{} || dt > 60.0) {  // first call, or a long pause
    tune_since_ = now;
    tune_samples_ = samples_;
    tune_wait_ = wait_seconds_;
    return;
  }
  if (dt < kTuneInterval) return;
  const double images_per_second = static_cast<double>(samples_ - tune_samples_) / dt;
  const double wait_fraction = std::clamp((wait_seconds_ - tune_wait_) / dt, 0.0, 1.0);
  tune_since_ = now;
  tune_samples_ = samples_;
  tune_wait_ = wait_seconds_;
  if (online_->Observe(images_per_second, wait_fraction)) {
    worker_cap_ = online_->workers();
    prefetch_cap_ = online_->prefetch();
    PumpLocked();
  }
}

void LoaderCore::Release(int buffer) {
  std::unique_lock lock(mutex_);
  buffers_[static_cast<size_t>(buffer)].state = BufferState::kFree;
  PumpLocked();
  cv_.notify_all();
}

LoaderState LoaderCore::State() const {
  std::unique_lock lock(mutex_);
  LoaderState s;
  s.spec_hash = plan_->spec_hash();
  if (delivered_in_epoch_ >= batches_per_epoch()) {
    s.epoch = epoch_ + 1;
    s.position = 0;
  } else {
    s.epoch = epoch_;
    s.position = deliver_next_ * static_cast<uint64_t>(batch_size_);
    for (uint64_t k = deliver_next_ + 1; k < delivered_.size(); ++k) {
      if (delivered_[k]) s.delivered_ahead.push_back(k);
    }
  }
  return s;
}

Status LoaderCore::Restore(const LoaderState& state) {
  if (state.spec_hash != plan_->spec_hash()) {
    return MakeError(
        ErrorCode::kInvalidArgument,
        "loader state is for spec " + state.spec_hash + ", this plan's is " + plan_->spec_hash(),
        "restore a state saved by a loader of the same plan");
  }
  const uint64_t b = static_cast<uint64_t>(batch_size_);
  if (state.position % b != 0 || state.position > sampler_->samples_per_rank()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "loader state position " + std::to_string(state.position) +
                         " is not a batch boundary within the epoch (" +
                         std::to_string(sampler_->samples_per_rank()) + " samples per epoch)");
  }
  uint64_t after = state.position / b;  // each index must exceed the one before
  for (uint64_t k : state.delivered_ahead) {
    if (k <= after || k >= batches_per_epoch()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "loader state's delivered batch " + std::to_string(k) +
                           " is not after batch " + std::to_string(state.position / b) +
                           " in ascending order within the epoch (" +
                           std::to_string(batches_per_epoch()) + " batches per epoch)",
                       "restore a state saved by a loader of the same plan");
    }
    after = k;
  }
  std::unique_lock lock(mutex_);
  const bool was_stopping = stopping_;
  stopping_ = true;  // no new jobs while draining
  WaitIdleLocked(lock);
  stopping_ = was_stopping;
  for (PoolBuffer& buf : buffers_) {
    if (buf.state != BufferState::kHeld) buf.state = BufferState::kFree;
  }
  fatal_.reset();
  StartEpochLocked(state.epoch, state.position, state.delivered_ahead);
  PumpLocked();
  return Ok();
}

LoaderStats LoaderCore::Stats() const {
  std::unique_lock lock(mutex_);
  LoaderStats s;
  s.samples = samples_;
  s.batches = batches_;
  s.seconds = std::chrono::duration<double>(Clock::now() - created_).count();
  s.images_per_second = s.seconds > 0 ? static_cast<double>(samples_) / s.seconds : 0;
  s.latency_p50 = latency_.Quantile(0.5);
  s.latency_p99 = latency_.Quantile(0.99);
  s.latency_max = latency_.max();
  s.consumer_wait_seconds = wait_seconds_;
  s.bad_samples = bad_total_;
  s.skipped = skipped_;
  s.replaced = replaced_;
  s.last_bad = last_bad_;
  s.read_seconds = static_cast<double>(read_ns_) * 1e-9;
  s.decode_seconds = static_cast<double>(decode_ns_) * 1e-9;
  s.kernel_seconds = static_cast<double>(kernel_ns_) * 1e-9;
  s.threads = threads_;
  s.in_flight = worker_cap_;
  s.prefetch = prefetch_cap_;
  s.online_tuning = online_.has_value();
  s.tuner_moves = online_ ? online_->moves() : 0;
  s.pool_buffers = static_cast<int>(buffers_.size());
  s.batch_bytes = static_cast<int64_t>(buffer_bytes_);
  s.device = device_;
  s.warnings = warnings_;
  return s;
}

}  // namespace sluice::runtime
