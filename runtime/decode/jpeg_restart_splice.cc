#include "runtime/decode/jpeg_restart_splice.h"

#include <algorithm>
#include <cstring>

namespace sluice::runtime {
namespace {

// What the splice needs from the headers before the (only) scan.
struct Frame {
  size_t sof_pos = 0;     // offset of the SOF marker's FF
  size_t scan_start = 0;  // first byte of entropy-coded data
  int width = 0, height = 0;
  int mcu_width = 0, mcu_height = 0;  // in pixels
  int interval = 0;                   // MCUs per restart interval
  int MCUsPerRow() const { return (width + mcu_width - 1) / mcu_width; }
  int McuRows() const { return (height + mcu_height - 1) / mcu_height; }
};

int Be16(std::span<const uint8_t> d, size_t at) { return (d[at] << 8) | d[at + 1]; }

// True for SOF markers other than baseline / extended sequential Huffman
// (progressive, lossless, hierarchical, arithmetic), and for DAC.
bool IsUnsupportedCoding(uint8_t m) {
  return (m >= 0xC2 && m <= 0xCF && m != 0xC4 && m != 0xC8) || m == 0xCC;
}

// Walks the markers from SOI to the first SOS. nullopt unless the file is one
// 8-bit sequential Huffman frame whose first scan holds every component.
std::optional<Frame> ParseFrame(std::span<const uint8_t> d) {
  Frame f;
  int components = 0, h_max = 1, v_max = 1;
  size_t i = 2;
  while (i + 4 <= d.size()) {
    if (d[i] != 0xFF) return std::nullopt;
    const uint8_t m = d[i + 1];
    if (m == 0xFF) {  // fill byte
      ++i;
      continue;
    }
    // No length follows these (libjpeg reads RSTn and TEM as markers without
    // one, FF 00 as stray data); read with one, the walk would leave libjpeg's
    // and could take bytes libjpeg skips for the frame header it rewrites.
    if (m == 0x00 || m == 0x01 || (m >= 0xD0 && m <= 0xD9)) return std::nullopt;
    const size_t len = static_cast<size_t>(Be16(d, i + 2));
    if (len < 2 || i + 2 + len > d.size()) return std::nullopt;
    if (IsUnsupportedCoding(m)) return std::nullopt;
    if (m == 0xC0 || m == 0xC1) {
      if (f.width != 0 || len < 8 || d[i + 4] != 8) return std::nullopt;
      f.sof_pos = i;
      f.height = Be16(d, i + 5);
      f.width = Be16(d, i + 7);
      components = d[i + 9];
      if (components < 1 || len < 8 + 3 * static_cast<size_t>(components)) return std::nullopt;
      for (int c = 0; c < components; ++c) {
        const uint8_t sampling = d[i + 11 + 3 * c];
        h_max = std::max(h_max, sampling >> 4);
        v_max = std::max(v_max, sampling & 15);
      }
    } else if (m == 0xDD) {
      if (len < 4) return std::nullopt;
      f.interval = Be16(d, i + 4);
    } else if (m == 0xDA) {
      if (f.width == 0 || f.height == 0 || len < 3 || d[i + 4] != components) return std::nullopt;
      f.scan_start = i + 2 + len;
      break;
    }
    i += 2 + len;
  }
  if (f.scan_start == 0 || f.interval <= 0 || h_max > 4 || v_max > 4) return std::nullopt;
  // A single-component scan is not interleaved: its MCU is one 8x8 block.
  f.mcu_width = components == 1 ? 8 : 8 * h_max;
  f.mcu_height = components == 1 ? 8 : 8 * v_max;
  if (f.MCUsPerRow() % f.interval != 0) return std::nullopt;
  return f;
}

// Records in `starts` where each restart interval's bytes begin, and returns
// the offset of the EOI marker that ends the last one. False on anything but
// stuffed bytes, fill bytes and restart markers in sequence before the EOI.
bool FindIntervals(std::span<const uint8_t> d, size_t scan_start, std::vector<uint32_t>& starts,
                   size_t* eoi) {
  starts.clear();
  starts.push_back(static_cast<uint32_t>(scan_start));
  const uint8_t* base = d.data();
  size_t j = scan_start;
  while (j + 1 < d.size()) {
    const void* ff = std::memchr(base + j, 0xFF, d.size() - 1 - j);
    if (!ff) return false;
    j = static_cast<size_t>(static_cast<const uint8_t*>(ff) - base);
    const uint8_t m = d[j + 1];
    if (m == 0x00) {
      j += 2;
    } else if (m == 0xFF) {
      j += 1;
    } else if (m >= 0xD0 && m <= 0xD7) {
      if (m != 0xD0 + (starts.size() - 1) % 8) return false;
      starts.push_back(static_cast<uint32_t>(j + 2));
      j += 2;
    } else if (m == 0xD9) {
      *eoi = j;
      return true;
    } else {
      return false;
    }
  }
  return false;
}

}  // namespace

std::optional<SpliceOrigin> SpliceRestartIntervals(std::span<const uint8_t> data,
                                                   const PixelRect& need, int margin,
                                                   std::vector<uint8_t>& out) {
  if (data.size() < 4 || data.size() > UINT32_MAX || data[0] != 0xFF || data[1] != 0xD8) {
    return std::nullopt;
  }
  const std::optional<Frame> f = ParseFrame(data);
  if (!f) return std::nullopt;
  if (margin < 0 || need.x < 0 || need.y < 0 || need.width <= 0 || need.height <= 0 ||
      int64_t{need.x} + need.width > f->width || int64_t{need.y} + need.height > f->height) {
    return std::nullopt;
  }
  // Wider than any image (65535): no sum below can overflow.
  margin = std::min(margin, 1 << 17);
  // Per thread, reused: no allocation per sample once it has grown.
  thread_local std::vector<uint32_t> starts;
  size_t eoi = 0;
  if (!FindIntervals(data, f->scan_start, starts, &eoi)) return std::nullopt;
  const int per_row = f->MCUsPerRow() / f->interval;
  if (starts.size() != static_cast<size_t>(per_row) * f->McuRows()) return std::nullopt;

  // The tiles (MCU rows x intervals) covering `need` grown by the margin.
  const int tile_width = f->interval * f->mcu_width;
  const int r0 = std::max(0, need.y - margin) / f->mcu_height;
  const int r1 =
      std::min(f->McuRows(), (need.y + need.height + margin + f->mcu_height - 1) / f->mcu_height);
  const int c0 = std::max(0, need.x - margin) / tile_width;
  const int c1 = std::min(per_row, (need.x + need.width + margin + tile_width - 1) / tile_width);
  auto end_of = [&](size_t k) { return k + 1 < starts.size() ? starts[k + 1] - 2 : eoi; };
  size_t kept = 0;
  for (int r = r0; r < r1; ++r) {
    kept += end_of(static_cast<size_t>(r) * per_row + c1 - 1) - starts[size_t(r) * per_row + c0];
  }
  // A plain cropped decode entropy-decodes every row down to the crop's last;
  // splicing pays a copy, so it must skip a good part of that.
  const size_t plain = end_of(static_cast<size_t>(r1) * per_row - 1) - f->scan_start;
  if (kept * 4 > plain * 3) return std::nullopt;

  const int x0 = c0 * tile_width, y0 = r0 * f->mcu_height;
  const int width = std::min(f->width, c1 * tile_width) - x0;
  const int height = std::min(f->height, r1 * f->mcu_height) - y0;
  out.assign(data.begin(), data.begin() + static_cast<ptrdiff_t>(f->scan_start));
  out[f->sof_pos + 5] = static_cast<uint8_t>(height >> 8);
  out[f->sof_pos + 6] = static_cast<uint8_t>(height & 0xFF);
  out[f->sof_pos + 7] = static_cast<uint8_t>(width >> 8);
  out[f->sof_pos + 8] = static_cast<uint8_t>(width & 0xFF);
  int restart = 0;
  for (int r = r0; r < r1; ++r) {
    for (int c = c0; c < c1; ++c) {
      if (r != r0 || c != c0) {
        out.push_back(0xFF);
        out.push_back(static_cast<uint8_t>(0xD0 + restart++ % 8));
      }
      const size_t k = static_cast<size_t>(r) * per_row + c;
      out.insert(out.end(), data.begin() + starts[k], data.begin() + end_of(k));
    }
  }
  out.push_back(0xFF);
  out.push_back(0xD9);
  return SpliceOrigin{x0, y0, f->width, f->height};
}

}  // namespace sluice::runtime
