// sluice_decode_ceiling: the decode-only ceiling for the end-to-end benchmark.
//
//   sluice_decode_ceiling DIR [--threads T] [--reps R] [--images N]
//
// Finds every *.jpg / *.jpeg (any case) under DIR, sorted by path, and
// preloads the files into RAM before timing (so the ceiling measures decode
// alone: no file I/O, no page-cache lookups inside the timed loop). Each
// repetition decodes every image once at full size to interleaved RGB with
// TurboJPEG's tjDecompress2 on T std::threads that pull image indices from a
// shared atomic counter; each thread owns its tjhandle and a reused output
// buffer. Prints one line per repetition and, last, a machine-readable line
//
//   RESULT decode_ceiling images_per_s_median=X threads=T images=N reps=R
//
// This is a ceiling for a full-resolution decode; a loader that decodes only a
// crop's region of interest (as Sluice does) can exceed it.
#include <turbojpeg.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

bool ParseInt(std::string_view text, int& out) {
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size() && out > 0;
}

bool IsJpeg(const std::filesystem::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".jpg" || ext == ".jpeg";
}

int Usage() {
  std::fprintf(stderr, "usage: sluice_decode_ceiling DIR [--threads T] [--reps R] [--images N]\n");
  return 2;
}

struct Options {
  std::string dir;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int reps = 3;
  int max_images = 0;  // 0 = all
};

// The command line into *options; false on a usage error.
bool ParseArgs(int argc, char** argv, Options* options) {
  if (argc < 2) return false;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    auto value = [&](int& out) { return i + 1 < argc && ParseInt(argv[++i], out); };
    if (arg == "--threads") {
      if (!value(options->threads)) return false;
    } else if (arg == "--reps") {
      if (!value(options->reps)) return false;
    } else if (arg == "--images") {
      if (!value(options->max_images)) return false;
    } else if (!arg.starts_with("-") && options->dir.empty()) {
      options->dir = arg;
    } else {
      return false;
    }
  }
  return true;
}

// The JPEGs under options.dir, sorted, the first max_images of them, read into
// RAM; empty after printing the error.
std::vector<std::vector<unsigned char>> PreloadJpegs(const Options& options) {
  std::vector<std::filesystem::path> paths;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(options.dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file() && IsJpeg(it->path())) paths.push_back(it->path());
  }
  if (ec) {
    std::fprintf(stderr, "sluice_decode_ceiling: cannot list %s: %s\n", options.dir.c_str(),
                 ec.message().c_str());
    return {};
  }
  std::sort(paths.begin(), paths.end());
  if (options.max_images > 0 && paths.size() > static_cast<size_t>(options.max_images)) {
    paths.resize(options.max_images);
  }
  if (paths.empty()) {
    std::fprintf(stderr, "sluice_decode_ceiling: no JPEGs under %s\n", options.dir.c_str());
    return {};
  }
  std::vector<std::vector<unsigned char>> files(paths.size());
  for (size_t i = 0; i < paths.size(); ++i) {
    std::ifstream in(paths[i], std::ios::binary);
    files[i].assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (files[i].empty()) {
      std::fprintf(stderr, "sluice_decode_ceiling: cannot read %s\n", paths[i].c_str());
      return {};
    }
  }
  return files;
}

struct DecodeRound {
  double seconds = 0;
  uint64_t pixels = 0;
  int failures = 0;
};

// Decodes every file once to full-size RGB on `threads` threads.
DecodeRound DecodeAll(const std::vector<std::vector<unsigned char>>& files, int threads) {
  std::atomic<size_t> next{0};
  std::atomic<int> failures{0};
  std::atomic<uint64_t> pixels{0};
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      tjhandle handle = tjInitDecompress();
      std::vector<unsigned char> rgb;
      uint64_t local_pixels = 0;
      for (size_t i = next.fetch_add(1); i < files.size(); i = next.fetch_add(1)) {
        const auto& jpeg = files[i];
        int width = 0, height = 0, subsamp = 0, colorspace = 0;
        if (tjDecompressHeader3(handle, jpeg.data(), jpeg.size(), &width, &height, &subsamp,
                                &colorspace) != 0) {
          failures.fetch_add(1);
          continue;
        }
        const size_t need = static_cast<size_t>(width) * height * 3;
        if (rgb.size() < need) rgb.resize(need);
        if (tjDecompress2(handle, jpeg.data(), jpeg.size(), rgb.data(), width, 0, height,
                          TJPF_RGB, 0) != 0) {
          failures.fetch_add(1);
          continue;
        }
        local_pixels += static_cast<uint64_t>(width) * height;
      }
      pixels.fetch_add(local_pixels);
      tjDestroy(handle);
    });
  }
  for (auto& t : pool) t.join();
  return {std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
          pixels.load(), failures.load()};
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!ParseArgs(argc, argv, &options)) return Usage();
  const std::vector<std::vector<unsigned char>> files = PreloadJpegs(options);
  if (files.empty()) return 1;
  size_t total_bytes = 0;
  for (const auto& file : files) total_bytes += file.size();
  std::printf("decode ceiling: %zu JPEGs (%.1f MB) preloaded into RAM, %d threads, "
              "tjDecompress2 -> RGB, full size\n",
              files.size(), static_cast<double>(total_bytes) / 1e6, options.threads);

  std::vector<double> rates;
  for (int rep = 0; rep < options.reps; ++rep) {
    const DecodeRound round = DecodeAll(files, options.threads);
    if (round.failures != 0) {
      std::fprintf(stderr, "sluice_decode_ceiling: %d images failed to decode\n", round.failures);
      return 1;
    }
    const double rate = static_cast<double>(files.size()) / round.seconds;
    rates.push_back(rate);
    std::printf("rep %d: %.3f s, %.1f images/s (%.1f Mpixel/s)\n", rep + 1, round.seconds, rate,
                static_cast<double>(round.pixels) / round.seconds / 1e6);
  }
  std::vector<double> sorted = rates;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  const double median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  std::printf("RESULT decode_ceiling images_per_s_median=%.1f threads=%d images=%zu reps=%d\n",
              median, options.threads, files.size(), options.reps);
  return 0;
}
