// Machine measurements for `sluice profile` (runtime/profile/machine_profiler.h).
#include "runtime/profile/machine_profiler.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <turbojpeg.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <span>

#include "runtime/decode/jpeg_decoder.h"
#include "runtime/kernels/kernel_library.h"
#include "runtime/plan/plan_internal.h"
#include "sluice/loader.h"
#include "sluice/plan.h"

#ifndef SLUICE_VERSION
#define SLUICE_VERSION "unknown"
#endif

namespace sluice::runtime {
static_assert(HardwareProfile::kMaxCores == LoaderOptions::kMaxThreads,
              "a profile's cpu.cores becomes the loader's CPU budget");
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// CPU seconds the calling thread has run. Compute probes time themselves with
// it rather than wall time: a rate "per core" is work per CPU-second, and on a
// shared machine other processes time-sharing the core would otherwise lower
// it (cache and memory-bandwidth contention still show).
double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Runs `body` (one unit of work) repeatedly: a warm-up, then `reps` timed
// rounds of at least `round_s` each; returns the median thread-CPU seconds per
// unit.
template <class F>
double MedianSecondsPerUnit(F&& body, double total_s, int reps = 5) {
  // Warm-up and calibration: how many units fill a round.
  const double round_s = std::max(0.01, total_s / (reps + 1));
  auto t0 = Clock::now();
  int64_t units = 0;
  do {
    body(units);
    ++units;
  } while (Since(t0) < round_s * 0.5 && units < (1 << 24));
  double per = Since(t0) / static_cast<double>(units);
  int64_t n = std::max<int64_t>(1, static_cast<int64_t>(round_s / std::max(per, 1e-9)));
  std::vector<double> rounds;
  for (int r = 0; r < reps; ++r) {
    const double c = ThreadCpuSeconds();
    for (int64_t i = 0; i < n; ++i) body(units + i);
    units += n;
    rounds.push_back((ThreadCpuSeconds() - c) / static_cast<double>(n));
  }
  return Median(rounds);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double Uniform(double lo, double hi) {
    return lo + (hi - lo) * (static_cast<double>(Next() >> 11) * 0x1.0p-53);
  }

 private:
  uint64_t state_;
};

// Four significant digits: measurements are not more precise than that, and
// the profile stays readable.
double Round4(double x) {
  if (!(x != 0) || !std::isfinite(x)) return x;
  double scale = std::pow(10.0, 3 - std::floor(std::log10(std::fabs(x))));
  return std::round(x * scale) / scale;
}

}  // namespace

std::string CpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("model name")) {
      size_t colon = line.find(':');
      if (colon == std::string::npos) break;
      size_t start = line.find_first_not_of(" \t", colon + 1);
      return start == std::string::npos ? "" : line.substr(start);
    }
  }
  return "";
}

std::string BestSimdLevel() {
  __builtin_cpu_init();
  // The kernels' AVX-512 target is avx512_skylake (F, CD, BW, DQ, VL).
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512cd")) {
    return "avx512";
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "avx2";
  return "sse41";
}

std::vector<uint8_t> MakeSampleJpeg(int width, int height, uint64_t seed) {
  Rng rng(seed ^ 0x5A17CEULL);
  std::vector<uint8_t> rgb(static_cast<size_t>(width) * height * 3);
  // Two-colour gradient, a low-frequency wave, a few soft ellipses, fine
  // texture and per-pixel noise: decodes like a photo (most DCT coefficients
  // non-zero), unlike flat colour.
  const double c0[3] = {rng.Uniform(40, 200), rng.Uniform(40, 200), rng.Uniform(40, 200)};
  const double c1[3] = {rng.Uniform(40, 200), rng.Uniform(40, 200), rng.Uniform(40, 200)};
  struct Blob {
    double cx, cy, r, col[3];
  } blobs[6];
  for (Blob& b : blobs) {
    b.cx = rng.Uniform(0, width);
    b.cy = rng.Uniform(0, height);
    b.r = rng.Uniform(0.05, 0.3) * std::min(width, height);
    for (double& c : b.col) c = rng.Uniform(0, 255);
  }
  const double fx = rng.Uniform(2, 6) * 2 * M_PI / width,
               fy = rng.Uniform(2, 6) * 2 * M_PI / height;
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      double t = (static_cast<double>(x) / width + static_cast<double>(y) / height) * 0.5;
      double wave = 18 * std::sin(x * fx) * std::cos(y * fy) + 6 * std::sin(x * 0.37 + y * 0.21);
      double c[3];
      for (int k = 0; k < 3; ++k) c[k] = c0[k] + (c1[k] - c0[k]) * t + wave;
      for (const Blob& b : blobs) {
        double d = std::hypot(x - b.cx, y - b.cy) / b.r;
        if (d >= 1.1) continue;
        double a = d < 0.9 ? 1.0 : (1.1 - d) / 0.2;
        for (int k = 0; k < 3; ++k) c[k] += (b.col[k] - c[k]) * a;
      }
      uint64_t bits = rng.Next();
      uint8_t* p = &rgb[(static_cast<size_t>(y) * width + x) * 3];
      for (int k = 0; k < 3; ++k) {
        int tri = static_cast<int>((bits >> (16 * k)) & 0xff) +
                  static_cast<int>((bits >> (16 * k + 8)) & 0xff) - 255;
        p[k] = static_cast<uint8_t>(std::clamp(std::lround(c[k] + tri / 255.0 * 10), 0L, 255L));
      }
    }
  }
  tjhandle tj = tjInitCompress();
  if (tj == nullptr) return {};
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  int rc = tjCompress2(tj, rgb.data(), width, 0, height, TJPF_RGB, &jpeg, &size, TJSAMP_420, 90,
                       TJFLAG_ACCURATEDCT);
  std::vector<uint8_t> out;
  if (rc == 0) out.assign(jpeg, jpeg + size);
  tjFree(jpeg);
  tjDestroy(tj);
  return out;
}

Result<DecodeCost> MeasureDecode(double seconds) {
  const int sizes[2][2] = {{250, 188}, {500, 375}};
  double t[2] = {0, 0};
  ImageBuffer image;
  for (int s = 0; s < 2; ++s) {
    // Four different images per size, decoded in turn.
    std::vector<std::vector<uint8_t>> jpegs;
    for (uint64_t k = 0; k < 4; ++k) {
      jpegs.push_back(MakeSampleJpeg(sizes[s][0], sizes[s][1], k));
      if (jpegs.back().empty()) return MakeError(ErrorCode::kInternal, "turbojpeg compress failed");
    }
    Status failed = Ok();
    t[s] = MedianSecondsPerUnit(
        [&](int64_t i) {
          const auto& j = jpegs[static_cast<size_t>(i) % jpegs.size()];
          auto r = DecodeJpeg(std::span<const uint8_t>(j.data(), j.size()), {}, image);
          if (!r && failed) failed = std::unexpected(r.error());
        },
        seconds / 2);
    SLUICE_RETURN_IF_ERROR(failed);
  }
  const double a0 = 250.0 * 188, a1 = 500.0 * 375;
  DecodeCost cost;
  cost.seconds_per_image_500x375 = t[1];
  double slope = (t[1] - t[0]) / (a1 - a0);  // seconds per pixel
  if (!(slope > 0)) slope = t[1] / a1;       // noise: no fixed part measurable
  cost.mpix_per_s = 1e-6 / slope;
  cost.fixed_s = std::max(0.0, t[1] - a1 * slope);
  return cost;
}

Result<double> MeasureMemoryBandwidth(double seconds) {
  long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  size_t bytes = std::max<size_t>(size_t{256} << 20, llc > 0 ? 4 * static_cast<size_t>(llc) : 0);
  bytes = std::min<size_t>(bytes, size_t{1} << 30);
  std::unique_ptr<char[]> src(new (std::nothrow) char[bytes]);
  std::unique_ptr<char[]> dst(new (std::nothrow) char[bytes]);
  if (!src || !dst) return MakeError(ErrorCode::kInternal, "cannot allocate the memcpy buffers");
  std::memset(src.get(), 1, bytes);  // fault the pages in before timing
  std::memset(dst.get(), 2, bytes);
  std::vector<double> rates;
  auto t0 = Clock::now();
  for (int r = 0; r < 9 && (r < 3 || Since(t0) < seconds); ++r) {
    const double c = ThreadCpuSeconds();
    std::memcpy(dst.get(), src.get(), bytes);
    double s = ThreadCpuSeconds() - c;
    // Keep the copy observable.
    asm volatile("" : : "r"(dst.get()) : "memory");
    if (r > 0) rates.push_back(static_cast<double>(bytes) / s / 1e9);
  }
  return Median(rates);
}

namespace {

// Up to max_files regular files of `path` (itself when it is a file), spread
// over the sorted listing (every class folder, not just the first); the scan
// stops at 100,000 files.
Result<std::vector<std::string>> SampleFiles(const std::string& path, int max_files) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return MakeError(ErrorCode::kNotFound, "storage path `" + path + "` does not exist",
                     "pass --data a dataset directory (or a file)");
  }
  std::vector<std::string> files;
  if (fs::is_regular_file(path, ec)) {
    files.push_back(path);
  } else {
    // Collect in sorted order (deterministic), stopping at a bounded scan.
    std::vector<std::string> all;
    for (auto it = fs::recursive_directory_iterator(
             path, fs::directory_options::skip_permission_denied, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_regular_file(ec) && !it->path().filename().string().starts_with(".")) {
        all.push_back(it->path().string());
      }
      if (all.size() >= 100000) break;
    }
    std::sort(all.begin(), all.end());
    size_t n = std::min<size_t>(all.size(), static_cast<size_t>(std::max(1, max_files)));
    for (size_t i = 0; i < n; ++i) files.push_back(all[i * all.size() / n]);
  }
  if (files.empty()) {
    return MakeError(ErrorCode::kNotFound, "no files under `" + path + "`",
                     "pass --data a directory that holds the dataset's files");
  }
  return files;
}

// Median open + pread of the first 4 KiB over `files`, for at most
// `seconds`; nullopt when none could be read.
std::optional<double> MedianOpenLatency(const std::vector<std::string>& files, double seconds) {
  std::vector<double> latencies;
  char head[4096];
  const auto t_start = Clock::now();
  for (const std::string& f : files) {
    auto t = Clock::now();
    int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ssize_t got = ::pread(fd, head, sizeof head, 0);
    double s = Since(t);
    ::close(fd);
    if (got > 0) latencies.push_back(s);
    if (Since(t_start) > seconds) break;
  }
  if (latencies.empty()) return std::nullopt;
  return Median(latencies);
}

// Whole-file sequential reads of the sampled files (for at most `seconds`),
// and what their JPEG headers say.
struct SampledReads {
  double read_s = 0, bytes = 0;
  double jpeg_bytes = 0, jpeg_w = 0, jpeg_h = 0;
  int jpegs = 0;
  // Up to 64 of the JPEGs, kept for the dataset's own decode rate.
  std::vector<std::vector<uint8_t>> kept;
  double kept_px = 0;
};

SampledReads ReadSampledFiles(const std::vector<std::string>& files, double seconds) {
  SampledReads r;
  std::vector<uint8_t> buf;
  const auto t_start = Clock::now();
  for (const std::string& f : files) {
    auto t = Clock::now();
    int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat sb;
    if (::fstat(fd, &sb) != 0) {
      ::close(fd);
      continue;
    }
    buf.resize(static_cast<size_t>(sb.st_size));
    size_t off = 0;
    while (off < buf.size()) {
      ssize_t got = ::read(fd, buf.data() + off, buf.size() - off);
      if (got <= 0) break;
      off += static_cast<size_t>(got);
    }
    ::close(fd);
    r.read_s += Since(t);
    r.bytes += static_cast<double>(off);
    std::span<const uint8_t> data(buf.data(), off);
    if (LooksLikeJpeg(data)) {
      if (auto info = ReadJpegHeader(data)) {
        ++r.jpegs;
        r.jpeg_bytes += static_cast<double>(off);
        r.jpeg_w += info->width;
        r.jpeg_h += info->height;
        if (r.kept.size() < 64) {
          r.kept.emplace_back(data.begin(), data.end());
          r.kept_px += static_cast<double>(info->width) * info->height;
        }
      }
    }
    if (Since(t_start) > seconds) break;
  }
  return r;
}

// Full decodes of the kept JPEGs, one pass over all of them per unit, in
// this thread's CPU time (robust to other load), after a warm-up pass
// (buffer growth, cold caches): megapixels/s by the median over the timed
// rounds; 0 when there are none or one fails.
double KeptDecodeRate(const SampledReads& r, double seconds) {
  if (r.kept.empty()) return 0;
  ImageBuffer decoded;
  bool ok = true;
  const double pass_s = MedianSecondsPerUnit(
      [&](int64_t) {
        for (const auto& j : r.kept) {
          if (!DecodeJpeg(std::span<const uint8_t>(j.data(), j.size()), {}, decoded)) ok = false;
        }
      },
      seconds);
  return ok && pass_s > 0 ? r.kept_px / pass_s / 1e6 : 0;
}

}  // namespace

Result<HardwareProfile::Storage> MeasureStorage(const std::string& path, int max_files,
                                                double seconds) {
  auto files = SampleFiles(path, max_files);
  if (!files) return std::unexpected(files.error());
  HardwareProfile::Storage st;
  std::error_code ec;
  st.path = std::filesystem::absolute(path, ec).string();
  const std::optional<double> latency = MedianOpenLatency(*files, seconds / 3);
  if (!latency) {
    return MakeError(ErrorCode::kIo, "cannot read any file under `" + path + "`",
                     "check the permissions");
  }
  st.latency_s = *latency;
  const SampledReads r = ReadSampledFiles(*files, seconds * 2 / 3);
  if (!(r.read_s > 0) || !(r.bytes > 0)) {
    return MakeError(ErrorCode::kIo, "read no bytes under `" + path + "`",
                     "the files are empty or unreadable");
  }
  st.read_mbps = r.bytes / r.read_s / 1e6;
  if (r.jpegs > 0) {
    st.mean_file_bytes = r.jpeg_bytes / r.jpegs;
    st.mean_width = r.jpeg_w / r.jpegs;
    st.mean_height = r.jpeg_h / r.jpegs;
  }
  const double decode = KeptDecodeRate(r, seconds / 3);
  if (decode > 0) st.decode_mpix_per_s = decode;
  return st;
}

Result<double> MeasureKernelSeconds(const std::string& plan_path, const std::vector<uint8_t>& jpeg,
                                    double seconds, int64_t* output_elements,
                                    int64_t* output_pixels) {
  auto plan = Plan::Load(plan_path, {{"DATA", "/nonexistent"}});
  if (!plan) return std::unexpected(plan.error());
  if (plan->chains().empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "plan `" + plan_path + "` has no fused chain");
  }
  const FusedChain& chain = plan->chains()[0];
  const Kernel& kernel = plan->cpu_kernel(0);
  ImageBuffer image;
  auto decoded = DecodeJpeg(std::span<const uint8_t>(jpeg.data(), jpeg.size()), {}, image);
  if (!decoded) return std::unexpected(decoded.error());
  const TensorType& out_type = kernel.output();
  int64_t elements = 1;
  for (int64_t d : out_type.dims) elements *= d;
  int64_t channels = 1;
  if (out_type.dims.size() == 3) {
    channels = out_type.layout == Layout::kCHW ? out_type.dims[0] : out_type.dims[2];
  }
  if (output_elements) *output_elements = elements;
  if (output_pixels) *output_pixels = elements / std::max<int64_t>(channels, 1);
  std::vector<uint8_t> out(static_cast<size_t>(elements) * DTypeSize(out_type.dtype));
  ImageView view{image.data(), image.height(), image.width(), image.channels(),
                 static_cast<int64_t>(image.stride())};
  // Precompute the arguments of 64 samples (different crops and flips).
  std::vector<SampleArgs> args;
  for (uint64_t s = 0; s < 64; ++s) {
    auto a = ComputeSampleArgs(chain, image.height(), image.width(), 0, 0, s);
    if (!a) return std::unexpected(a.error());
    args.push_back(*a);
  }
  Status failed = Ok();
  double per = MedianSecondsPerUnit(
      [&](int64_t i) {
        Status st = kernel.Run(view, args[static_cast<size_t>(i) % args.size()], out.data());
        if (!st && failed) failed = std::unexpected(st.error());
      },
      seconds);
  SLUICE_RETURN_IF_ERROR(failed);
  return per;
}

Result<HardwareProfile> ProfileMachine(const MachineProfileOptions& o) {
  auto say = [&](const std::string& line) {
    if (o.progress) o.progress(line);
  };
  const double budget = std::max(1.0, o.seconds);
  HardwareProfile p;
  p.sluice_version = SLUICE_VERSION;
  {
    char buf[32];
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    p.measured_at = buf;
  }
  // A machine with more usable cores than the loader runs threads says the
  // most it will use, so that the profile loads (HardwareProfile::kMaxCores).
  p.cpu.cores = std::min(UsableCores(), HardwareProfile::kMaxCores);
  p.cpu.model = CpuModelName();
  p.cpu.simd = BestSimdLevel();
  p.machine = !o.machine.empty() ? o.machine
                                 : std::to_string(p.cpu.cores) + "-core " +
                                       (p.cpu.model.empty() ? std::string("CPU") : p.cpu.model);
  say("cpu: " + std::to_string(p.cpu.cores) + " usable cores, " + p.cpu.model + ", " + p.cpu.simd);

  auto decode = MeasureDecode(budget * 0.3);
  if (!decode) return std::unexpected(decode.error());
  p.cpu.decode_mpix_per_s = decode->mpix_per_s;
  p.cpu.decode_fixed_s = decode->fixed_s;
  say("decode: " + std::to_string(decode->mpix_per_s) + " Mpx/s per core + " +
      std::to_string(decode->fixed_s * 1e6) + " us per image (500x375: " +
      std::to_string(1.0 / decode->seconds_per_image_500x375) + " images/s per core)");

  if (!o.resample_plan.empty() && !o.pointwise_plan.empty()) {
    std::vector<uint8_t> sample = MakeSampleJpeg(500, 375, 0);
    int64_t px = 0, elems_u8 = 0, elems = 0;
    // The two kernels are measured alternately, three times each, and the
    // medians compared: a load change during the probe hits both alike.
    std::vector<double> resample_runs, full_runs;
    for (int r = 0; r < 3; ++r) {
      auto tr = MeasureKernelSeconds(o.resample_plan, sample, budget * 0.05, &elems_u8, &px);
      if (!tr) return std::unexpected(tr.error());
      auto tf = MeasureKernelSeconds(o.pointwise_plan, sample, budget * 0.05, &elems);
      if (!tf) return std::unexpected(tf.error());
      resample_runs.push_back(*tr);
      full_runs.push_back(*tf);
    }
    const double resample_s = Median(resample_runs), full_s = Median(full_runs);
    const double* t_resample = &resample_s;
    const double* t_full = &full_s;
    p.cpu.resample_ns_per_px = *t_resample * 1e9 / static_cast<double>(std::max<int64_t>(px, 1));
    // The pointwise tail's cost is what it adds; a difference lost in the noise
    // is recorded as a small positive floor, not zero.
    double diff_ns =
        (*t_full - *t_resample) * 1e9 / static_cast<double>(std::max<int64_t>(elems, 1));
    p.cpu.pointwise_ns_per_elem = std::max(diff_ns, 0.01);
    say("kernels: resample " + std::to_string(p.cpu.resample_ns_per_px) +
        " ns per output pixel, pointwise " + std::to_string(p.cpu.pointwise_ns_per_elem) +
        " ns per output element");
  }

  auto bw = MeasureMemoryBandwidth(budget * 0.1);
  if (!bw) return std::unexpected(bw.error());
  p.cpu.memory_bandwidth_gbps = *bw;
  say("memory: " + std::to_string(*bw) + " GB/s one-core memcpy");

  if (!o.data.empty()) {
    auto st = MeasureStorage(o.data, o.max_files, budget * 0.25);
    if (!st) return std::unexpected(st.error());
    p.storage = *st;
    say("storage: " + std::to_string(st->read_mbps) + " MB/s, latency " +
        std::to_string(st->latency_s * 1e6) + " us, mean JPEG " +
        std::to_string(st->mean_file_bytes) + " bytes " + std::to_string(st->mean_width) + "x" +
        std::to_string(st->mean_height) + ", decoding at " + std::to_string(st->decode_mpix_per_s) +
        " Mpx/s per core");
  }
  for (double* v : {&p.cpu.decode_mpix_per_s, &p.cpu.decode_fixed_s, &p.cpu.resample_ns_per_px,
                    &p.cpu.pointwise_ns_per_elem, &p.cpu.memory_bandwidth_gbps}) {
    *v = Round4(*v);
  }
  if (p.storage) {
    for (double* v :
         {&p.storage->read_mbps, &p.storage->latency_s, &p.storage->mean_file_bytes,
          &p.storage->mean_width, &p.storage->mean_height, &p.storage->decode_mpix_per_s}) {
      *v = Round4(*v);
    }
  }
  return p;
}

}  // namespace sluice::runtime
