// SampleWorker: see sample_worker.h for the contract.
#include "runtime/exec/sample_worker.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstring>
#include <string_view>

#include "ops/fusion/sample_args.h"
#include "runtime/kernels/kernel_library.h"

namespace sluice::runtime {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t Mix(uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

int64_t Ns(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count();
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
      return;  // not a batch field type (the config rejects it)
  }
}

// `pushed` (the chain's args on the whole image) mapped into the decoded
// region: the window shifted by where the decode started, or, after a
// DCT-scaled decode, the whole-pixel crop in the buffer.
SampleArgs ShiftIntoRegion(SampleArgs args, const PixelRect& crop, const DecodedRegion& region) {
  auto shift = [](AxisArgs& a, int lo, int hi, int decoded_at) {
    a.window_start -= decoded_at;
    a.src_lo = lo - decoded_at;
    a.src_hi = hi - decoded_at;
  };
  if (region.scale_denom == 1) {
    shift(args.x, crop.x, crop.x + crop.width, region.decoded.x);
    shift(args.y, crop.y, crop.y + crop.height, region.decoded.y);
    return args;
  }
  const PixelRect& c = region.crop_in_buffer;
  args.x.window_start = args.x.src_lo = c.x;
  args.x.window = c.width;
  args.x.src_hi = c.x + c.width;
  args.y.window_start = args.y.src_lo = c.y;
  args.y.window = c.height;
  args.y.src_hi = c.y + c.height;
  return args;
}

}  // namespace

void Outcome::Reset() {
  used_index = 0;
  attempt = 0;
  error.reset();
  fatal.reset();
  bad_count = 0;
  read_ns = decode_ns = kernel_ns = 0;
}

SampleWorker::SampleWorker(const LoaderConfig& config, const Source& source, const Decoder& decoder,
                           ReadPool& reads, TraceRecorder* trace)
    : config_(config),
      source_(source),
      decoder_(decoder),
      reads_(reads),
      trace_(trace),
      pushdown_(EffectivePushdown(config.pushdown, decoder.caps())) {
  for (const FieldLayout& f : config.fields) {
    has_reference_ |= f.reference >= 0;
    if (f.chain >= 0) region_chain_ = f.steps;
  }
  if (region_chain_ == nullptr) pushdown_ = PushdownConfig{};
}

void SampleWorker::Process(const Job& job, const EpochOrder& order, Scratch& scratch,
                           Outcome& out) const {
  const uint64_t index = order[job.position];
  const uint64_t n = source_.size();
  const uint64_t local_n = order.size();
  for (int attempt = 0; attempt <= Outcome::kMaxAttempts; ++attempt) {
    uint64_t candidate = index;
    if (attempt > 0) {
      if (config_.policy == ErrorPolicy::kReplace) {
        candidate = (index + static_cast<uint64_t>(attempt)) % n;
      } else {
        uint64_t h = Mix(Mix(config_.seed ^ Mix(job.epoch)) ^ Mix(job.position * 131 + attempt));
        candidate = order[h % local_n];
      }
    }
    out.attempt = attempt;
    const Clock::time_point attempt_begin = job.traced ? Clock::now() : Clock::time_point{};
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
    // The failed attempt, around its read/decode spans (the slot's "sample"
    // span, recorded by the loader, encloses it and names what was written).
    TraceStep(job, "bad sample", attempt_begin, Clock::now(), candidate, &st.error(), attempt);
    if (out.bad_count < Outcome::kMaxBad) {
      out.bad_index[out.bad_count] = candidate;
      out.bad_error[out.bad_count] = st.error();
      ++out.bad_count;
    }
    if (config_.policy == ErrorPolicy::kFail) {
      out.error = st.error();
      return;
    }
  }
  Error e;
  e.code = ErrorCode::kCorruptData;
  e.message = "no decodable sample after " + std::to_string(Outcome::kMaxAttempts) +
              " replacement attempts for " + source_.SampleName(index);
  out.error = std::move(e);
}

Error SampleWorker::WithPath(const Error& e, uint64_t index) const {
  Error copy = e;
  const std::string path = source_.SampleName(index);
  if (copy.message.find(path) == std::string::npos) copy.message = path + ": " + copy.message;
  return copy;
}

void SampleWorker::TraceStep(const Job& job, const char* name, Clock::time_point begin,
                             Clock::time_point end, uint64_t index, const Error* error, int64_t a1,
                             int64_t a2) const {
  if (!job.traced) return;
  if (error == nullptr) {
    trace_->Span(job.track, name, begin, end, index, a1, a2);
    return;
  }
  // The bad path: naming the sample allocates.
  std::string_view reason = error->message;
  const std::string path = source_.SampleName(index);
  if (reason.starts_with(path) && reason.substr(path.size()).starts_with(": ")) {
    reason.remove_prefix(path.size() + 2);
  }
  trace_->FailedSpan(job.track, name, begin, end, error->code, reason, index, a1, a2);
}

Status SampleWorker::RunSample(uint64_t index, const Job& job, Scratch& scratch, Outcome& out,
                               bool& fatal) const {
  const int64_t attempt = out.TraceAttempt();
  // A failed step: its span marked failed, the error returned with the path.
  auto failed = [&](const char* step, Clock::time_point begin, const Error& e) -> Status {
    Error with_path = WithPath(e, index);
    TraceStep(job, step, begin, Clock::now(), index, &with_path, attempt);
    return std::unexpected(std::move(with_path));
  };
  auto t0 = Clock::now();
  auto bytes = reads_.Read(index, scratch.read);
  auto t1 = Clock::now();
  out.read_ns += Ns(t0, t1);
  if (!bytes) return failed("read", t0, bytes.error());
  TraceStep(job, "read", t0, t1, index, nullptr, attempt);
  std::span<const uint8_t> data(scratch.read.buffer().data(), *bytes);
  auto header = decoder_.ReadHeader(data);
  if (!header) return failed("decode", t1, header.error());
  DecodeRequest request;
  request.color = config_.channels == 1 ? OutputColor::kGray : OutputColor::kRGB;
  SampleArgs pushed;
  auto is_pushed = RequestRegion(*header, index, job.epoch, request, pushed);
  if (!is_pushed) return failed("decode", t1, is_pushed.error());
  auto region = decoder_.Decode(data, request, scratch.image);
  const auto t2 = Clock::now();
  out.decode_ns += Ns(t1, t2);
  if (!region) return failed("decode", t1, region.error());
  if (scratch.image.channels() != config_.channels) {
    return failed(
        "decode", t1,
        Error{ErrorCode::kCorruptData, "decoded to " + std::to_string(scratch.image.channels()) +
                                           " channels; the plan's chains read " +
                                           std::to_string(config_.channels)});
  }
  TraceStep(job, "decode", t1, t2, index, nullptr, attempt);
  if (has_reference_) {
    auto r0 = Clock::now();
    FillReferenceImage(scratch);
    const auto r1 = Clock::now();
    out.kernel_ns += Ns(r0, r1);
    TraceStep(job, "kernel", r0, r1, index, nullptr, -1, attempt);
  }
  for (const FieldLayout& f : config_.fields) {
    uint8_t* slot = Slot(job, f);
    const int64_t field = &f - config_.fields.data();
    if (f.reference >= 0) {
      auto k0 = Clock::now();
      Status st = RunReference(f, index, job, scratch, slot);
      const auto k1 = Clock::now();
      out.kernel_ns += Ns(k0, k1);
      if (!st) {
        Error with_path = WithPath(st.error(), index);
        TraceStep(job, "kernel", k0, k1, index, &with_path, field, attempt);
        return std::unexpected(std::move(with_path));
      }
      TraceStep(job, "kernel", k0, k1, index, nullptr, field, attempt);
    } else if (f.chain < 0) {
      int64_t label = source_.label(index);
      std::memcpy(slot, &label, sizeof(label));
    } else {
      Status st = RunFused(f, index, job, scratch, *is_pushed ? &pushed : nullptr, request, *region,
                           out, fatal);
      if (!st) return std::unexpected(WithPath(st.error(), index));
    }
  }
  return Ok();
}

Result<bool> SampleWorker::RequestRegion(const ImageHeader& header, uint64_t index, uint64_t epoch,
                                         DecodeRequest& request, SampleArgs& pushed) const {
  // The union of what the single chain's window reads.
  if (!pushdown_.region) return false;
  auto args =
      ComputeSampleArgs(*region_chain_, header.height, header.width, config_.seed, epoch, index);
  if (!args) return std::unexpected(args.error());
  const int64_t y_lo = std::max<int64_t>({args->y.window_start, args->y.src_lo, 0});
  const int64_t y_hi = std::min<int64_t>(
      {int64_t{args->y.window_start} + args->y.window, args->y.src_hi, header.height});
  const int64_t x_lo = std::max<int64_t>({args->x.window_start, args->x.src_lo, 0});
  const int64_t x_hi = std::min<int64_t>(
      {int64_t{args->x.window_start} + args->x.window, args->x.src_hi, header.width});
  if (y_lo >= y_hi || x_lo >= x_hi) return false;
  request.crop = PixelRect{static_cast<int>(x_lo), static_cast<int>(y_lo),
                           static_cast<int>(x_hi - x_lo), static_cast<int>(y_hi - y_lo)};
  const bool whole_window =
      y_lo == args->y.window_start && y_hi == args->y.window_start + args->y.window &&
      x_lo == args->x.window_start && x_hi == args->x.window_start + args->x.window;
  if (pushdown_.dct_scaling && whole_window && args->y.window >= 2 * args->y.resized &&
      args->x.window >= 2 * args->x.resized) {
    request.min_width = args->x.resized;
    request.min_height = args->y.resized;
  }
  pushed = *args;
  return true;
}

Status SampleWorker::RunFused(const FieldLayout& f, uint64_t index, const Job& job,
                              const Scratch& scratch, const SampleArgs* pushed,
                              const DecodeRequest& request, const DecodedRegion& region,
                              Outcome& out, bool& fatal) const {
  const ImageBuffer& img = scratch.image;
  SampleArgs args;
  if (pushed != nullptr) {
    args = ShiftIntoRegion(*pushed, *request.crop, region);
  } else {
    auto full =
        ComputeSampleArgs(*f.steps, img.height(), img.width(), config_.seed, job.epoch, index);
    if (!full) return std::unexpected(full.error());
    args = *full;
  }
  ImageView view{img.data(), img.height(), img.width(), img.channels(),
                 static_cast<int64_t>(img.stride())};
  auto k0 = Clock::now();
  Status st = f.kernel->Run(view, args, Slot(job, f));
  const auto k1 = Clock::now();
  out.kernel_ns += Ns(k0, k1);
  TraceStep(job, "kernel", k0, k1, index, st ? nullptr : &st.error(), &f - config_.fields.data(),
            out.TraceAttempt());
  if (!st && st.error().code != ErrorCode::kCorruptData) fatal = true;  // else the image's fault
  return st;
}

void SampleWorker::FillReferenceImage(Scratch& scratch) {
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

Status SampleWorker::RunReference(const FieldLayout& f, uint64_t index, const Job& job,
                                  const Scratch& scratch, uint8_t* slot) const {
  const RefTensor& ref = scratch.ref_image;
  const int64_t h = ref.height(), w = ref.width();
  const FusedChain& chain = *f.steps;
  auto result = ReferenceChain(chain, ref, config_.seed, job.epoch, index);
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

}  // namespace sluice::runtime
