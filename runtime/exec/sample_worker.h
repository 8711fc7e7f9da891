// The per-sample worker: read -> decode -> fused kernels / reference chains ->
// the sample's slot of a batch buffer.
//
// A SampleWorker is immutable after construction and shared by every worker
// task; each task brings its own Scratch (read buffer + decoded image, grown
// only when a larger file or image arrives, never per sample) and writes only
// the slot of its Job, so any number of tasks may call Process at once.
//
// Decode: the decoder is the one the plan's decode step names (MakeDecoder);
// the worker asks it for the image's size (ReadHeader) and, when the plan
// allows pushdown and the decoder's caps() can do it, requests only the
// union of what the single chain's window reads (region of interest) and, with
// dct_scaling, a DCT-scaled decode when the window is at least twice the
// resampled size. The decoder's DecodedRegion says what the buffer holds; the
// kernel's window is shifted into it. Region-of-interest decode is
// bit-identical to the whole-image path.
//
// Reference fields (Plan::reference_chains(): batch fields no fusion group
// writes) are computed per sample on the decoded image by the registry's
// reference implementations (ReferenceChain), keyed by (seed, epoch, sample,
// op_id) like the fused kernels; the documented slow path: those ops allocate
// per sample. With any reference field, decode pushdown is off (they need the
// whole image; LoaderConfig::pushdown).
//
// Bad samples follow the error policy (include/sluice/loader.h): skip draws a
// replacement from the rank's epoch order, replace takes the next dataset
// index, fail records the error; at most kMaxAttempts replacements. An error
// that is not the sample's fault (a kernel failure, but not Kernel::Run's
// kCorruptData for an image too large for the kernel) is `fatal`. A read that
// passes source.read_timeout (ReadPool) is a bad sample like a corrupt file.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "ops/fusion/sample_args.h"
#include "ops/reference/ref_tensor.h"
#include "runtime/decode/decoder.h"
#include "runtime/decode/image_buffer.h"
#include "runtime/exec/loader_config.h"
#include "runtime/exec/read_pool.h"
#include "runtime/sampling/epoch_sampler.h"
#include "runtime/sources/source.h"
#include "runtime/trace/trace_recorder.h"
#include "sluice/result.h"

namespace sluice::runtime {

// One worker task's reusable memory.
struct Scratch {
  ReadSlot read;  // the read buffer, owned through the ReadPool's request
  ImageBuffer image;
  // The decoded image as the reference implementations read it (reference
  // fields only); its storage is reused from sample to sample.
  RefTensor ref_image;
};

// One sample to fill: position `position` of `epoch`'s order into slot `slot`
// of pool buffer `buffer` (whose host memory starts at `data`).
struct Job {
  int buffer = -1;
  uint8_t* data = nullptr;
  int64_t slot = 0;
  uint64_t epoch = 0, position = 0;
  int track = 0;        // the worker loop's trace track (TraceRecorder)
  bool traced = false;  // record this sample's spans (tracing was on when it began)
};

// What filling one slot did (reset by Reset() before each job; no allocation).
struct Outcome {
  static constexpr int kMaxAttempts = 16;
  static constexpr int kMaxBad = kMaxAttempts + 1;
  uint64_t used_index = 0;
  int attempt = 0;  // the attempt under way (0: the sample itself; trace spans)
  // A span's "attempt" argument: the replacement's number, -1 (none) for the
  // sample itself.
  int64_t TraceAttempt() const { return attempt > 0 ? attempt : -1; }
  std::optional<Error> error;  // the sample could not be filled (fail or exhausted)
  std::optional<Error> fatal;  // a bug or a kernel failure: stops the loader
  int bad_count = 0;
  uint64_t bad_index[kMaxBad];
  std::optional<Error> bad_error[kMaxBad];
  int64_t read_ns = 0, decode_ns = 0, kernel_ns = 0;
  void Reset();
};

class SampleWorker {
 public:
  // `config`, `source`, `decoder` and `reads` must outlive the worker;
  // `config.fields` point into the plan, which must too. Every source read
  // goes through `reads` (the read deadline; `reads` reads `source`).
  // `trace` gets read, decode and kernel spans on the job's track for jobs
  // with `traced` set (required then).
  SampleWorker(const LoaderConfig& config, const Source& source, const Decoder& decoder,
               ReadPool& reads, TraceRecorder* trace = nullptr);

  // Fills `job`'s slot with the sample at `order[job.position]`, or a
  // replacement under the error policy; never throws for bad data.
  void Process(const Job& job, const EpochOrder& order, Scratch& scratch, Outcome& out) const;

 private:
  // Reads, decodes and runs every field for dataset index `index` into the
  // job's slot. `fatal` is set for errors that are not the sample's fault.
  Status RunSample(uint64_t index, const Job& job, Scratch& scratch, Outcome& out,
                   bool& fatal) const;
  // Records span `name` of `index` on the job's track when the job is
  // traced; with `error`, as failed (its code and its message without the
  // path in front).
  void TraceStep(const Job& job, const char* name, std::chrono::steady_clock::time_point begin,
                 std::chrono::steady_clock::time_point end, uint64_t index,
                 const Error* error = nullptr, int64_t a1 = -1, int64_t a2 = -1) const;
  // Fills `request` (and `pushed`: the chain's args on the whole image) when
  // the region the single chain reads can be pushed into the decode. Returns
  // whether it was.
  Result<bool> RequestRegion(const ImageHeader& header, uint64_t index, uint64_t epoch,
                             DecodeRequest& request, SampleArgs& pushed) const;
  // Writes fused field `f` from the decoded image: the pushed args shifted
  // into the decoded region, or args computed on the whole image.
  Status RunFused(const FieldLayout& f, uint64_t index, const Job& job, const Scratch& scratch,
                  const SampleArgs* pushed, const DecodeRequest& request,
                  const DecodedRegion& region, Outcome& out, bool& fatal) const;
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
  // `e` with the sample's path in front of its message (unless it has it).
  Error WithPath(const Error& e, uint64_t index) const;
  uint8_t* Slot(const Job& job, const FieldLayout& field) const {
    return job.data + field.offset + static_cast<size_t>(job.slot) * field.host_sample_bytes;
  }

  const LoaderConfig& config_;
  const Source& source_;
  const Decoder& decoder_;
  ReadPool& reads_;
  TraceRecorder* trace_ = nullptr;
  PushdownConfig pushdown_;                   // what this decoder does of config_.pushdown
  const FusedChain* region_chain_ = nullptr;  // the (single) fused chain pushdown is for
  bool has_reference_ = false;
};

}  // namespace sluice::runtime
