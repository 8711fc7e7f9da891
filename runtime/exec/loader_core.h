// The engine behind sluice::Loader (include/sluice/loader.h): scheduling,
// per-sample work, the batch pool and statistics.
//
// Scheduling: samples are numbered by their position in the current epoch
// (rank-local). A worker task takes the next position under the lock; the
// first position of a batch claims a free pool buffer (no free buffer = no work
// until the consumer releases one). Each of the W = min(threads, in_flight)
// workers owns one Scratch (read buffer + decoded image, grown only when a
// larger file or image arrives, never per sample) and loops take -> process ->
// complete until no work is left, then goes idle; Pump() re-launches idle
// workers (tbb::task_arena::enqueue) when work appears (a buffer freed, a new
// epoch, Restore). Only one epoch is scheduled at a time.
//
// Shutdown: stopping_ stops new work; the destructor of Loader waits (condition
// variable) until every worker has returned. Batches still held keep the core
// (and its buffers) alive through shared_ptr; their release is then a no-op
// besides freeing memory with the last reference.
//
// Reference fields (Plan::reference_chains(): batch fields no fusion group
// writes) are computed per sample on the decoded image by the registry's
// reference implementations (ReferenceChain), keyed by (seed, epoch, sample,
// op_id) like the fused kernels; the documented slow path: those ops allocate
// per sample. With any reference field, decode pushdown is off (they need the
// whole image), and the loader warns once (Stats().warnings, stderr).
//
// No exception escapes a worker: its body is wrapped, and an exception becomes
// a fatal kInternal error returned by the next Next().
//
// GPU path (docs/gpu.md; only when the plan has GPU stages and a CUDA device
// is usable): batch buffers are page-locked (cuMemHostAlloc); a chain with a
// GPU stage writes its uint8 staging image through the CPU-part kernel into
// the buffer; the worker that completes a batch enqueues, on the loader's own
// stream, the host-to-device copy of the staging blocks and one batch kernel
// per GPU chain into a fixed device arena (one block per pool buffer), then
// records the buffer's event (state kTransferring -> kReady). Next() waits on
// the event (or not: LoaderOptions::wait_for_device). Before a buffer is
// refilled its event is waited on, so a pending copy never reads a slot being
// rewritten. No device or host allocation per batch.
#pragma once

#include <tbb/global_control.h>
#include <tbb/task_arena.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ops/fusion/kernel_abi.h"
#include "ops/reference/ref_tensor.h"
#include "runtime/decode/image_buffer.h"
#include "runtime/device/cuda_driver.h"
#include "runtime/exec/online_tuner.h"
#include "runtime/metrics/latency_recorder.h"
#include "runtime/sampling/epoch_sampler.h"
#include "runtime/sources/source.h"
#include "sluice/loader.h"

namespace sluice::runtime {

enum class ErrorPolicy { kSkip, kReplace, kFail };

class LoaderCore : public std::enable_shared_from_this<LoaderCore> {
 public:
  static Result<std::shared_ptr<LoaderCore>> Create(const Plan& plan, const LoaderOptions& options);
  ~LoaderCore();
  LoaderCore(const LoaderCore&) = delete;
  LoaderCore& operator=(const LoaderCore&) = delete;

  // Stops scheduling and waits until every worker task has returned.
  void Shutdown();

  Result<std::optional<Batch>> Next();
  LoaderState State() const;
  Status Restore(const LoaderState& state);
  LoaderStats Stats() const;
  // Called by ~Batch: the buffer goes back to the pool.
  void Release(int buffer);

  uint64_t batches_per_epoch() const { return sampler_->batches_per_rank(); }
  int64_t batch_size() const { return batch_size_; }
  size_t dataset_size() const { return source_->size(); }

  static constexpr int kMaxAttempts = 16;
  // Seconds of Next() calls between two observations of the online tuner.
  static constexpr double kTuneInterval = 0.5;

 private:
  using Clock = std::chrono::steady_clock;
  struct FieldLayout {
    std::string name;
    DType dtype = DType::kUInt8;
    std::vector<int64_t> sample_shape;
    size_t sample_bytes = 0;
    size_t offset = 0;   // of the field's [B, ...] block in a buffer
    int chain = -1;      // chain index writing it, or -1 for the label
    int reference = -1;  // reference chain index computing it (chain == -1), or -1
    // GPU path: the host block holds the staging images (host_sample_bytes
    // each); the device block has the staging copy then the output.
    bool gpu = false;
    size_t host_sample_bytes = 0;                  // == sample_bytes on the CPU path
    size_t device_staging = 0, device_output = 0;  // offsets in the buffer's device block
  };
  enum class BufferState { kFree, kFilling, kTransferring, kReady, kHeld };
  struct Gpu {
    std::shared_ptr<cuda::CudaDevice> device;
    std::unique_ptr<cuda::CudaStream> stream;
    std::unique_ptr<cuda::DeviceArena> arena;
    std::vector<std::unique_ptr<cuda::PinnedBuffer>> pinned;  // per pool buffer
    std::vector<std::unique_ptr<cuda::CudaEvent>> events;     // per pool buffer
    std::vector<cuda::CUdeviceptr> block;                     // per pool buffer
    std::vector<GpuBatchKernelFn> batch_fn;                   // per chain (null: CPU)
    SetCudaContextFn set_context = nullptr;
    const halide_device_interface_t* interface = nullptr;
    bool wait = true;
  };
  struct PoolBuffer {
    uint8_t* data = nullptr;  // 64-byte aligned, buffer_bytes_
    BufferState state = BufferState::kFree;
    uint64_t epoch = 0, index = 0;
    int64_t remaining = 0;
    Clock::time_point start;
    std::optional<Error> error;     // fail policy: first failing sample's error
    std::vector<uint64_t> samples;  // dataset index per slot (sized once)
  };
  struct Scratch {
    std::vector<uint8_t> read;
    ImageBuffer image;
    // The decoded image as the reference implementations read it (reference
    // fields only); its storage is reused from sample to sample.
    RefTensor ref_image;
  };
  struct Job {
    int buffer = -1;
    int64_t slot = 0;
    uint64_t epoch = 0, position = 0;
  };
  static constexpr int kMaxBadPerSample = kMaxAttempts + 1;
  struct Outcome {
    uint64_t used_index = 0;
    std::optional<Error> error;  // the sample could not be filled (fail or exhausted)
    std::optional<Error> fatal;  // a bug or a kernel failure: stops the loader
    int bad_count = 0;
    uint64_t bad_index[kMaxBadPerSample];
    std::optional<Error> bad_error[kMaxBadPerSample];
    int64_t read_ns = 0, decode_ns = 0, kernel_ns = 0;
  };

  LoaderCore() = default;
  void PumpLocked();
  bool WorkAvailableLocked() const;
  // Feeds the online tuner one interval's images/s and consumer wait (every
  // kTuneInterval seconds) and applies its caps.
  void ObserveLocked(Clock::time_point now);
  bool TakeJobLocked(Job& job);
  void WorkerLoop(int worker);
  // True when the job completed a batch that must now be launched on the GPU
  // (LaunchBatch, outside the lock).
  bool CompleteLocked(const Job& job, Outcome& outcome);
  // Enqueues the batch's copies and kernels and records its event.
  Status LaunchBatch(int buffer);
  // Sets up the GPU path (device chosen by Create). Errors are the caller's to
  // report.
  Status SetUpGpu(int ordinal);
  void ProcessSample(const Job& job, Scratch& scratch, Outcome& out) const;
  // Reads, decodes and runs every chain for dataset index `index` into the
  // job's slot. `fatal` is set for errors that are not the sample's fault.
  Status RunSample(uint64_t index, const Job& job, Scratch& scratch, Outcome& out,
                   bool& fatal) const;
  // Copies the decoded image (scratch.image) into scratch.ref_image, reusing
  // its storage: once per sample, for all reference fields.
  static void FillReferenceImage(Scratch& scratch);
  // Computes reference field `f` of dataset index `index` from
  // scratch.ref_image into `slot`: the chain's reference implementations step
  // by step, keyed like the fused kernels, then converted to the field's
  // dtype. A result whose shape is not the field's is the sample's error (not
  // fatal).
  Status RunReference(const FieldLayout& f, uint64_t index, const Job& job, const Scratch& scratch,
                      uint8_t* slot) const;
  uint8_t* Slot(int buffer, const FieldLayout& field, int64_t slot) const {
    return buffers_[buffer].data + field.offset +
           static_cast<size_t>(slot) * field.host_sample_bytes;
  }
  // Starts `epoch` at sample `position` (a batch boundary); the batches in
  // `delivered_ahead` (after position, checked by Restore) count as delivered
  // and are not produced again.
  void StartEpochLocked(uint64_t epoch, uint64_t position,
                        const std::vector<uint64_t>& delivered_ahead = {});
  // Moves sched_pos_ past batches already delivered (only a restored relaxed
  // state has any ahead of it). Call at a batch boundary.
  void SkipDeliveredBatchesLocked();
  void WaitIdleLocked(std::unique_lock<std::mutex>& lock);
  Batch MakeBatchLocked(int buffer);

  // Immutable after Create.
  std::unique_ptr<Plan> plan_;
  std::unique_ptr<Source> source_;
  std::optional<EpochSampler> sampler_;
  std::vector<FieldLayout> fields_;
  std::vector<DType> chain_dtype_;
  uint64_t seed_ = 0;
  int64_t batch_size_ = 0;
  size_t buffer_bytes_ = 0;
  ErrorPolicy policy_ = ErrorPolicy::kSkip;
  double max_fraction_ = 0;
  bool relaxed_ = false;
  bool dct_scaling_ = false;
  bool gray_ = false;
  int threads_ = 1, workers_ = 1, prefetch_ = 1;
  // TBB sizes its worker pool for hardware_concurrency - 1 workers (it expects
  // the calling thread to join); our workers are all TBB workers, so the
  // loader raises the process-wide limit to threads + 1 while it lives. With
  // several loaders alive TBB applies the smallest of their limits.
  std::unique_ptr<tbb::global_control> parallelism_;
  std::unique_ptr<tbb::task_arena> arena_;
  std::vector<Scratch> scratch_;  // one per worker
  Clock::time_point created_;
  std::unique_ptr<Gpu> gpu_;  // GPU path, else null
  std::string device_ = "cpu";
  std::vector<std::string> warnings_;

  // Guarded by mutex_.
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<PoolBuffer> buffers_;
  std::vector<int> idle_workers_;
  int active_workers_ = 0;
  bool stopping_ = false;
  std::optional<Error> fatal_;
  uint64_t epoch_ = 0;
  std::optional<EpochOrder> order_;  // of epoch_; read by workers only while they hold jobs
  uint64_t sched_pos_ = 0;           // next position to schedule
  int fill_buffer_ = -1;
  uint64_t deliver_next_ = 0;  // strict: next batch index to hand out
  uint64_t delivered_in_epoch_ = 0;
  std::vector<bool> delivered_;  // relaxed: which batches of the epoch were handed out
  uint64_t epoch_bad_ = 0;
  // Stats.
  uint64_t samples_ = 0, batches_ = 0, bad_total_ = 0, skipped_ = 0, replaced_ = 0;
  int64_t read_ns_ = 0, decode_ns_ = 0, kernel_ns_ = 0;
  double wait_seconds_ = 0;
  // Online tuning (auto knobs only): the caps the workers and the buffer
  // claims obey; equal to workers_ / prefetch_ when tuning is off.
  std::optional<OnlineTuner> online_;
  int worker_cap_ = 1, prefetch_cap_ = 1;
  Clock::time_point tune_since_;
  uint64_t tune_samples_ = 0;
  double tune_wait_ = 0;
  LatencyRecorder latency_;
  std::vector<BadSample> last_bad_;
};

}  // namespace sluice::runtime
