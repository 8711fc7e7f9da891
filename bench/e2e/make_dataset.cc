// sluice_make_dataset: writes a synthetic ImageNet-like image_folder tree.
//
//   sluice_make_dataset OUT_DIR --images N --classes K [--seed S]
//
// OUT_DIR/c0000/c0000_000000.JPEG ... : N JPEGs spread evenly over K class
// folders (image i goes to class i mod K). Content is photo-like (smooth
// gradients, soft-edged shapes, texture and sensor-like noise, with a
// class-dependent palette) so that decode and resize costs resemble real
// photos rather than flat colour. Sizes: width 300-700, aspect ratio 0.6-1.6
// (60% 4:3, 10% 3:2, 10% square), about 500x400 on average; quality 85-95; 4:2:0
// chroma subsampling (10% 4:4:4); about 3% grayscale. The output depends only
// on (N, K, S): each image has its own generator keyed by (S, i).
#include <turbojpeg.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

// splitmix64 stream.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double Uniform() { return double(Next() >> 11) * 0x1.0p-53; }
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  int Int(int lo, int hi) { return lo + int(Next() % uint64_t(hi - lo + 1)); }

 private:
  uint64_t state_;
};

struct Color {
  double r, g, b;
};

Color RandomColor(Rng& rng, double hue_center) {
  // A hue near the class's hue; saturation and value vary per image.
  double h = std::fmod(hue_center + rng.Uniform(-0.08, 0.08) + 1.0, 1.0) * 6.0;
  double s = rng.Uniform(0.25, 0.9), v = rng.Uniform(0.3, 1.0);
  int i = int(h) % 6;
  double f = h - std::floor(h);
  double p = v * (1 - s), q = v * (1 - s * f), t = v * (1 - s * (1 - f));
  Color c[] = {{v, t, p}, {q, v, p}, {p, v, t}, {p, q, v}, {t, p, v}, {v, p, q}};
  return {c[i].r * 255, c[i].g * 255, c[i].b * 255};
}

struct Shape {
  bool ellipse;
  double cx, cy, rx, ry, angle, softness;
  Color inner, outer;
};

// Renders one image into rgb (w*h*3).
void Render(Rng& rng, int w, int h, double class_hue, std::vector<uint8_t>& rgb) {
  rgb.resize(size_t(w) * h * 3);
  Color a = RandomColor(rng, class_hue), b = RandomColor(rng, class_hue + 0.5);
  double theta = rng.Uniform(0, 2 * M_PI);
  double gx = std::cos(theta), gy = std::sin(theta);
  double wave_fx = rng.Uniform(1, 6) * 2 * M_PI / w, wave_fy = rng.Uniform(1, 6) * 2 * M_PI / h;
  double wave_amp = rng.Uniform(5, 25), phase = rng.Uniform(0, 2 * M_PI);
  double tex_f = rng.Uniform(0.05, 0.4), tex_amp = rng.Uniform(2, 10);
  double noise_amp = rng.Uniform(4, 12);
  double grain_amp = rng.Uniform(4, 16);

  std::vector<Shape> shapes(size_t(rng.Int(3, 9)));
  for (Shape& s : shapes) {
    s.ellipse = rng.Uniform() < 0.6;
    s.cx = rng.Uniform(0, w);
    s.cy = rng.Uniform(0, h);
    s.rx = rng.Uniform(0.05, 0.35) * w;
    s.ry = rng.Uniform(0.05, 0.35) * h;
    s.angle = rng.Uniform(0, M_PI);
    s.softness = rng.Uniform(0.01, 0.15);
    s.inner = RandomColor(rng, class_hue + rng.Uniform(-0.2, 0.2));
    s.outer = RandomColor(rng, class_hue + rng.Uniform(-0.2, 0.2));
  }

  const double diag = std::sqrt(double(w) * w + double(h) * h);
  // Separable terms, precomputed per column and per row.
  std::vector<double> wave_x(w), wave_y(h), tex_x(w), tex_y(h);
  for (int x = 0; x < w; ++x) {
    wave_x[x] = std::sin(x * wave_fx + phase);
    tex_x[x] = std::sin(x * tex_f);
  }
  for (int y = 0; y < h; ++y) {
    wave_y[y] = wave_amp * std::cos(y * wave_fy);
    tex_y[y] = tex_amp * std::sin(y * tex_f * 1.3);
  }
  std::vector<double> cos_a(shapes.size()), sin_a(shapes.size());
  for (size_t k = 0; k < shapes.size(); ++k) {
    cos_a[k] = std::cos(shapes[k].angle);
    sin_a[k] = std::sin(shapes[k].angle);
  }
  const uint64_t grain_key = rng.Next();
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      double t = std::clamp(((x - w / 2.0) * gx + (y - h / 2.0) * gy) / diag + 0.5, 0.0, 1.0);
      double wave = wave_x[x] * wave_y[y];
      Color c = {a.r + (b.r - a.r) * t + wave, a.g + (b.g - a.g) * t + wave,
                 a.b + (b.b - a.b) * t + wave};
      for (size_t k = 0; k < shapes.size(); ++k) {
        const Shape& s = shapes[k];
        double dx = x - s.cx, dy = y - s.cy;
        double u = (dx * cos_a[k] + dy * sin_a[k]) / s.rx;
        double v = (-dx * sin_a[k] + dy * cos_a[k]) / s.ry;
        double d = s.ellipse ? std::sqrt(u * u + v * v) : std::max(std::abs(u), std::abs(v));
        if (d > 1 + s.softness) continue;
        double alpha = d < 1 - s.softness ? 1.0 : (1 + s.softness - d) / (2 * s.softness);
        double m = std::min(d, 1.0);
        Color fill = {s.inner.r + (s.outer.r - s.inner.r) * m,
                      s.inner.g + (s.outer.g - s.inner.g) * m,
                      s.inner.b + (s.outer.b - s.inner.b) * m};
        c.r += (fill.r - c.r) * alpha;
        c.g += (fill.g - c.g) * alpha;
        c.b += (fill.b - c.b) * alpha;
      }
      // Texture: a periodic pattern plus 2x2-pixel grain (luma-like, shared by
      // the channels), then per-channel noise, triangular in [-1, 1) * amp.
      uint64_t g = (uint64_t(y >> 1) << 32 | uint64_t(x >> 1)) * 0x9e3779b97f4a7c15ULL ^ grain_key;
      g = (g ^ (g >> 29)) * 0xbf58476d1ce4e5b9ULL;
      double grain = (double((g >> 40) & 0xff) - 127.5) / 127.5 * grain_amp;
      double tex = tex_x[x] * tex_y[y] + grain;
      uint64_t bits = rng.Next();
      uint8_t* p = &rgb[(size_t(y) * w + x) * 3];
      double vals[3] = {c.r, c.g, c.b};
      for (int k = 0; k < 3; ++k) {
        int tri = int((bits >> (16 * k)) & 0xff) + int((bits >> (16 * k + 8)) & 0xff) - 255;
        double n = tri / 255.0 * noise_amp;
        p[k] = uint8_t(std::clamp(std::lround(vals[k] + tex + n), 0L, 255L));
      }
    }
  }
}

bool ParseU64(std::string_view s, uint64_t& out) {
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return !s.empty() && ec == std::errc() && ptr == s.data() + s.size();
}

int Usage() {
  std::fprintf(stderr, "usage: sluice_make_dataset OUT_DIR --images N --classes K [--seed S]\n");
  return 2;
}

struct Options {
  std::string out_dir;
  uint64_t images = 0, classes = 0, seed = 0;
};

// The command line into *options; an exit status when main should return.
std::optional<int> ParseArgs(int argc, char** argv, Options* options) {
  bool have_images = false, have_classes = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    auto value = [&](uint64_t& dst) {
      if (i + 1 >= argc || !ParseU64(argv[i + 1], dst)) return false;
      ++i;
      return true;
    };
    if (arg == "--images") {
      if (!value(options->images)) return Usage();
      have_images = true;
    } else if (arg == "--classes") {
      if (!value(options->classes)) return Usage();
      have_classes = true;
    } else if (arg == "--seed") {
      if (!value(options->seed)) return Usage();
    } else if (arg == "-h" || arg == "--help") {
      Usage();
      return 0;
    } else if (!arg.starts_with("-") && options->out_dir.empty()) {
      options->out_dir = std::string(arg);
    } else {
      return Usage();
    }
  }
  if (options->out_dir.empty() || !have_images || !have_classes || options->classes == 0 ||
      options->classes > 100000) {
    return Usage();
  }
  return std::nullopt;
}

// OUT_DIR/cNNNN for each class that gets at least one image.
bool CreateClassDirs(const Options& options) {
  std::error_code ec;
  for (uint64_t c = 0; c < std::min(options.classes, options.images); ++c) {
    char name[32];
    std::snprintf(name, sizeof(name), "c%04llu", static_cast<unsigned long long>(c));
    std::filesystem::create_directories(std::filesystem::path(options.out_dir) / name, ec);
    if (ec) {
      std::fprintf(stderr, "sluice_make_dataset: cannot create %s/%s: %s\n",
                   options.out_dir.c_str(), name, ec.message().c_str());
      return false;
    }
  }
  return true;
}

// Renders, encodes and writes image `i` (a pure function of seed and i);
// adds its size to *total_bytes. False after printing the error.
bool WriteImage(tjhandle tj, const Options& options, uint64_t i, std::vector<uint8_t>& rgb,
                std::vector<uint8_t>& gray, uint64_t* total_bytes) {
  Rng rng(options.seed * 0x9e3779b97f4a7c15ULL ^ (i + 1) * 0xd1b54a32d192ed03ULL);
  const uint64_t cls = i % options.classes;
  const double class_hue = std::fmod(double(cls) * 0.61803398875, 1.0);
  const int w = rng.Int(300, 700);
  const double pick = rng.Uniform();
  const double aspect = pick < 0.6   ? 4.0 / 3.0
                        : pick < 0.7 ? 1.5
                        : pick < 0.8 ? 1.0
                                     : rng.Uniform(0.6, 1.6);
  const int h = std::clamp(int(std::lround(w / aspect)), 16, 1200);
  const int quality = rng.Int(85, 95);
  const bool is_gray = rng.Uniform() < 0.03;
  const int subsamp = is_gray ? TJSAMP_GRAY : (rng.Uniform() < 0.1 ? TJSAMP_444 : TJSAMP_420);
  Render(rng, w, h, class_hue, rgb);
  const uint8_t* src = rgb.data();
  int pixel_format = TJPF_RGB;
  if (is_gray) {
    gray.resize(size_t(w) * h);
    for (size_t p = 0; p < gray.size(); ++p) {
      gray[p] = uint8_t((299 * rgb[3 * p] + 587 * rgb[3 * p + 1] + 114 * rgb[3 * p + 2]) / 1000);
    }
    src = gray.data();
    pixel_format = TJPF_GRAY;
  }
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  if (tjCompress2(tj, src, w, 0, h, pixel_format, &jpeg, &size, subsamp, quality,
                  TJFLAG_ACCURATEDCT) != 0) {
    std::fprintf(stderr, "sluice_make_dataset: encode %llu: %s\n",
                 static_cast<unsigned long long>(i), tjGetErrorStr2(tj));
    tjFree(jpeg);
    return false;
  }
  char rel[80];  // three 20-digit numbers at most
  std::snprintf(rel, sizeof(rel), "c%04llu/c%04llu_%06llu.JPEG",
                static_cast<unsigned long long>(cls), static_cast<unsigned long long>(cls),
                static_cast<unsigned long long>(i));
  std::string path = (std::filesystem::path(options.out_dir) / rel).string();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  bool ok = f && std::fwrite(jpeg, 1, size, f) == size;
  if (f && std::fclose(f) != 0) ok = false;
  tjFree(jpeg);
  if (!ok) {
    std::fprintf(stderr, "sluice_make_dataset: cannot write %s: %s\n", path.c_str(),
                 std::strerror(errno));
    return false;
  }
  *total_bytes += size;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (std::optional<int> status = ParseArgs(argc, argv, &options)) return *status;
  if (!CreateClassDirs(options)) return 1;

  tjhandle tj = tjInitCompress();
  if (!tj) {
    std::fprintf(stderr, "sluice_make_dataset: %s\n", tjGetErrorStr2(nullptr));
    return 1;
  }
  std::vector<uint8_t> rgb, gray;
  uint64_t total_bytes = 0;
  for (uint64_t i = 0; i < options.images; ++i) {
    if (!WriteImage(tj, options, i, rgb, gray, &total_bytes)) {
      tjDestroy(tj);
      return 1;
    }
  }
  tjDestroy(tj);
  std::printf("wrote %llu images in %llu classes to %s (%.1f MB)\n",
              static_cast<unsigned long long>(options.images),
              static_cast<unsigned long long>(std::min(options.classes, options.images)),
              options.out_dir.c_str(), total_bytes / 1e6);
  return 0;
}
