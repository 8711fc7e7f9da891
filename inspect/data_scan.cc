// inspect/data_scan.h: the dataset scan behind `sluice inspect --data`.
#include "inspect/data_scan.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdio>
#include <mutex>
#include <span>
#include <thread>

#include "common/usable_cores.h"
#include "compiler/cost/cost_model.h"
#include "runtime/decode/image_buffer.h"
#include "runtime/decode/image_decoder.h"

namespace sluice::inspect {
namespace {

using nlohmann::json;

// What one thread gathered; merged at the end (no shared counters in the loop).
struct Partial {
  uint64_t bytes = 0;
  std::map<std::string, uint64_t> formats;
  Log2Histogram file_bytes, widths, heights;
  Range file_size, width, height;
  std::map<int64_t, uint64_t> labels;
  std::vector<BadSample> bad;
  double decode_core_seconds = 0, megapixels = 0;
};

const char* FormatOf(std::span<const uint8_t> data) {
  if (runtime::LooksLikeJpeg(data)) return "jpeg";
  if (runtime::LooksLikePng(data)) return "png";
  return "other";
}

void ScanOne(const runtime::Source& source, uint64_t i, const runtime::ImageDecoder& decoder,
             const DataScanOptions& options, std::vector<uint8_t>& buffer,
             runtime::ImageBuffer& image, Partial& out) {
  out.labels[source.label(i)]++;
  auto n = source.Read(i, buffer);
  if (!n) {
    out.formats["unreadable"]++;
    out.bad.push_back({i, source.SampleName(i), "read: " + n.error().message});
    return;
  }
  std::span<const uint8_t> data(buffer.data(), *n);
  out.bytes += *n;
  out.file_bytes.Add(*n);
  out.file_size.Add(*n);
  const char* format = FormatOf(data);
  out.formats[format]++;
  if (std::string_view(format) == "other") {
    out.bad.push_back({i, source.SampleName(i), "decode: neither JPEG nor PNG"});
    return;
  }
  auto header = decoder.ReadHeader(data);
  if (!header) {
    out.bad.push_back({i, source.SampleName(i), "decode: " + header.error().message});
    return;
  }
  if (options.full_decode) {
    auto decoded = decoder.Decode(data, runtime::DecodeRequest{}, image);
    if (!decoded) {
      out.bad.push_back({i, source.SampleName(i), "decode: " + decoded.error().message});
      return;
    }
  }
  const auto w = static_cast<uint64_t>(header->width), h = static_cast<uint64_t>(header->height);
  out.widths.Add(w);
  out.heights.Add(h);
  out.width.Add(w);
  out.height.Add(h);
  out.megapixels += static_cast<double>(w * h) / 1e6;
  if (options.profile != nullptr) {
    out.decode_core_seconds +=
        DecodeSeconds(*options.profile, static_cast<double>(w), static_cast<double>(h));
  }
}

void Merge(Partial& into, Partial& from) {
  into.bytes += from.bytes;
  for (const auto& [k, v] : from.formats) into.formats[k] += v;
  into.file_bytes.Merge(from.file_bytes);
  into.widths.Merge(from.widths);
  into.heights.Merge(from.heights);
  into.file_size.Merge(from.file_size);
  into.width.Merge(from.width);
  into.height.Merge(from.height);
  for (const auto& [k, v] : from.labels) into.labels[k] += v;
  into.bad.insert(into.bad.end(), from.bad.begin(), from.bad.end());
  into.decode_core_seconds += from.decode_core_seconds;
  into.megapixels += from.megapixels;
}

// "512 B", "4 KiB", "1.5 MiB": binary units, so that the power-of-two
// histogram buckets read as round numbers.
std::string Human(double bytes) {
  char buf[32];
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  std::snprintf(buf, sizeof buf,
                u == 0 || bytes == static_cast<int64_t>(bytes) ? "%.0f %s" : "%.1f %s", bytes,
                units[u]);
  return buf;
}

std::string HistogramText(const Log2Histogram& h, bool bytes) {
  std::string out;
  uint64_t peak = 0;
  for (uint64_t c : h.counts) peak = std::max(peak, c);
  const json rows = h.ToJson();
  for (const json& row : rows) {
    const auto lo = row["lo"].get<uint64_t>(), hi = row["hi"].get<uint64_t>();
    const auto count = row["count"].get<uint64_t>();
    const int bar = peak == 0 ? 0 : static_cast<int>(40 * count / peak);
    char line[160];
    const std::string range =
        bytes ? Human(static_cast<double>(lo)) + " - " + Human(static_cast<double>(hi))
              : std::to_string(lo) + " - " + std::to_string(hi);
    std::snprintf(line, sizeof line, "    %-22s %8llu  %s\n", range.c_str(),
                  static_cast<unsigned long long>(count), std::string(bar, '#').c_str());
    out += line;
  }
  return out;
}

}  // namespace

void Log2Histogram::Add(uint64_t value) {
  const size_t k = value == 0 ? 0 : static_cast<size_t>(std::bit_width(value) - 1);
  if (counts.size() <= k) counts.resize(k + 1, 0);
  counts[k]++;
}

void Log2Histogram::Merge(const Log2Histogram& other) {
  if (counts.size() < other.counts.size()) counts.resize(other.counts.size(), 0);
  for (size_t k = 0; k < other.counts.size(); ++k) counts[k] += other.counts[k];
}

json Log2Histogram::ToJson() const {
  json rows = json::array();
  size_t first = 0;
  while (first < counts.size() && counts[first] == 0) ++first;
  for (size_t k = first; k < counts.size(); ++k) {
    rows.push_back(
        {{"lo", uint64_t{1} << k}, {"hi", uint64_t{1} << (k + 1)}, {"count", counts[k]}});
  }
  if (!rows.empty()) rows[0]["lo"] = first == 0 ? 0 : uint64_t{1} << first;
  return rows;
}

void Range::Add(uint64_t value) {
  min = n == 0 ? value : std::min(min, value);
  max = n == 0 ? value : std::max(max, value);
  sum += static_cast<double>(value);
  ++n;
}

void Range::Merge(const Range& other) {
  if (other.n == 0) return;
  min = n == 0 ? other.min : std::min(min, other.min);
  max = n == 0 ? other.max : std::max(max, other.max);
  sum += other.sum;
  n += other.n;
}

json Range::ToJson() const {
  if (n == 0) return json{{"n", 0}, {"min", nullptr}, {"max", nullptr}, {"mean", nullptr}};
  return json{{"n", n}, {"min", min}, {"max", max}, {"mean", mean()}};
}

Result<DataScan> ScanDataset(const runtime::Source& source, const std::string& format,
                             const std::string& path, const DataScanOptions& options) {
  DataScan scan;
  scan.source_format = format;
  scan.source_path = path;
  scan.full_decode = options.full_decode;
  scan.samples = source.size();
  scan.class_names = source.class_names();
  int threads = options.threads > 0 ? options.threads : UsableCores();
  threads = static_cast<int>(std::min<uint64_t>(threads, std::max<uint64_t>(1, scan.samples)));
  // Header reads and decodes with the decode_image defaults (rgb, no alpha).
  const runtime::ImageDecoder decoder(runtime::JpegDecoder::Options{}, runtime::PngOptions{});
  std::vector<Partial> partials(threads);
  std::atomic<uint64_t> next{0}, done{0};
  std::mutex progress_mu;
  auto work = [&](int t) {
    std::vector<uint8_t> buffer;
    runtime::ImageBuffer image;
    for (uint64_t i = next++; i < scan.samples; i = next++) {
      ScanOne(source, i, decoder, options, buffer, image, partials[t]);
      const uint64_t d = ++done;
      if (options.progress) {
        std::lock_guard lock(progress_mu);
        options.progress(d, scan.samples);
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (std::thread& th : pool) th.join();
  Partial all;
  for (Partial& p : partials) Merge(all, p);
  std::sort(all.bad.begin(), all.bad.end(),
            [](const BadSample& a, const BadSample& b) { return a.index < b.index; });
  scan.bytes = all.bytes;
  scan.formats = std::move(all.formats);
  scan.file_bytes = std::move(all.file_bytes);
  scan.widths = std::move(all.widths);
  scan.heights = std::move(all.heights);
  scan.file_size = all.file_size;
  scan.width = all.width;
  scan.height = all.height;
  scan.labels = std::move(all.labels);
  scan.bad = std::move(all.bad);
  scan.megapixels = all.megapixels;
  if (options.profile != nullptr) {
    scan.profile_machine = options.profile->machine;
    scan.decode_core_seconds = all.decode_core_seconds;
  }
  return scan;
}

json DataScan::ToJson() const {
  json classes = json::array();
  for (const auto& [label, count] : labels) {
    json c{{"label", label}, {"count", count}};
    if (label >= 0 && static_cast<size_t>(label) < class_names.size()) {
      c["name"] = class_names[label];
    }
    classes.push_back(std::move(c));
  }
  json bad_json = json::array();
  for (const BadSample& b : bad) {
    bad_json.push_back({{"sample", b.index}, {"name", b.name}, {"reason", b.reason}});
  }
  const uint64_t decoded = width.n;
  json cost = nullptr;
  if (!profile_machine.empty() || decode_core_seconds > 0) {
    cost = {{"profile", profile_machine},
            {"core_seconds", decode_core_seconds},
            {"ms_per_image", decoded == 0 ? 0.0 : 1e3 * decode_core_seconds / decoded}};
  }
  return json{{"source", {{"format", source_format}, {"path", source_path}}},
              {"samples", samples},
              {"bytes", bytes},
              {"full_decode", full_decode},
              {"formats", formats},
              {"file_bytes", {{"stats", file_size.ToJson()}, {"histogram", file_bytes.ToJson()}}},
              {"width", {{"stats", width.ToJson()}, {"histogram", widths.ToJson()}}},
              {"height", {{"stats", height.ToJson()}, {"histogram", heights.ToJson()}}},
              {"megapixels", megapixels},
              {"classes", classes},
              {"bad", bad_json},
              {"decode_cost", cost}};
}

std::string DataScan::ToText() const {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "dataset: %s %s\nsamples: %llu (%s)\n", source_format.c_str(),
                source_path.c_str(), static_cast<unsigned long long>(samples),
                Human(static_cast<double>(bytes)).c_str());
  out += line;
  out += "formats:";
  for (const auto& [name, count] : formats) {
    out += " " + name + " " + std::to_string(count);
  }
  out += "\n";
  if (file_size.n > 0) {
    std::snprintf(line, sizeof line, "file size: min %s, mean %s, max %s\n",
                  Human(static_cast<double>(file_size.min)).c_str(),
                  Human(file_size.mean()).c_str(),
                  Human(static_cast<double>(file_size.max)).c_str());
    out += line + HistogramText(file_bytes, true);
  }
  if (width.n > 0) {
    std::snprintf(line, sizeof line, "width: min %llu, mean %.0f, max %llu\n",
                  static_cast<unsigned long long>(width.min), width.mean(),
                  static_cast<unsigned long long>(width.max));
    out += line + HistogramText(widths, false);
    std::snprintf(line, sizeof line, "height: min %llu, mean %.0f, max %llu\n",
                  static_cast<unsigned long long>(height.min), height.mean(),
                  static_cast<unsigned long long>(height.max));
    out += line + HistogramText(heights, false);
  }
  uint64_t most = 0, least = UINT64_MAX;
  for (const auto& [label, count] : labels) {
    most = std::max(most, count);
    least = std::min(least, count);
  }
  std::snprintf(line, sizeof line, "classes: %zu", labels.size());
  out += line;
  if (!labels.empty()) {
    std::snprintf(line, sizeof line, " (smallest %llu, largest %llu samples; ratio %.2f)",
                  static_cast<unsigned long long>(least), static_cast<unsigned long long>(most),
                  least == 0 ? 0.0 : static_cast<double>(most) / static_cast<double>(least));
    out += line;
  }
  out += "\n";
  for (const auto& [label, count] : labels) {
    const std::string name =
        label >= 0 && static_cast<size_t>(label) < class_names.size() ? class_names[label] : "";
    std::snprintf(line, sizeof line, "    %6lld %-24s %8llu\n", static_cast<long long>(label),
                  name.c_str(), static_cast<unsigned long long>(count));
    out += line;
  }
  std::snprintf(line, sizeof line, "bad samples: %zu%s\n", bad.size(),
                full_decode ? " (headers and full decode checked)"
                            : " (headers checked; --decode also decodes every image)");
  out += line;
  for (const BadSample& b : bad) {
    out += "    " + std::to_string(b.index) + " " + b.name + ": " + b.reason + "\n";
  }
  if (profile_machine.empty() && decode_core_seconds == 0) {
    out += "decode cost: no estimate (give --profile HW.yaml from `sluice profile`)\n";
  } else {
    std::snprintf(line, sizeof line,
                  "decode cost (cost model, %s): %.3g core-seconds for one full-decode epoch, "
                  "%.2f ms/image, %.1f megapixels\n",
                  profile_machine.c_str(), decode_core_seconds,
                  width.n == 0 ? 0.0 : 1e3 * decode_core_seconds / static_cast<double>(width.n),
                  megapixels);
    out += line;
  }
  return out;
}

}  // namespace sluice::inspect
