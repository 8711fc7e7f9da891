// JPEGs for the decoder tests, written with libjpeg's compress API.
#pragma once

#include <cstdio>  // jpeglib.h needs FILE and size_t first
// clang-format off
#include <jpeglib.h>
// clang-format on

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

namespace sluice::runtime::testing {

struct EncodeOptions {
  J_COLOR_SPACE in_space = JCS_RGB;  // layout of `pixels`
  int components = 3;
  J_COLOR_SPACE jpeg_space = JCS_UNKNOWN;  // JCS_UNKNOWN: libjpeg's default for in_space
  int quality = 95;
  int h_samp = 2, v_samp = 2;  // luma sampling factors (chroma is 1x1)
  bool progressive = false;
  int restart_interval = 0;  // MCUs per restart interval (0: none)
};

inline std::vector<uint8_t> Encode(const std::vector<uint8_t>& pixels, int w, int h,
                                   const EncodeOptions& o) {
  jpeg_compress_struct cinfo;
  jpeg_error_mgr jerr;
  cinfo.err = jpeg_std_error(&jerr);
  jpeg_create_compress(&cinfo);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buf, &size);
  cinfo.image_width = w;
  cinfo.image_height = h;
  cinfo.input_components = o.components;
  cinfo.in_color_space = o.in_space;
  jpeg_set_defaults(&cinfo);
  if (o.jpeg_space != JCS_UNKNOWN) jpeg_set_colorspace(&cinfo, o.jpeg_space);
  jpeg_set_quality(&cinfo, o.quality, TRUE);
  if (cinfo.num_components >= 3) {
    cinfo.comp_info[0].h_samp_factor = o.h_samp;
    cinfo.comp_info[0].v_samp_factor = o.v_samp;
  }
  if (o.progressive) jpeg_simple_progression(&cinfo);
  cinfo.restart_interval = static_cast<unsigned>(o.restart_interval);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(&pixels[size_t(cinfo.next_scanline) * w * o.components]);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::vector<uint8_t> out(buf, buf + size);
  std::free(buf);
  return out;
}

// Photo-like content: gradients, a disc and deterministic noise.
inline std::vector<uint8_t> Pattern(int w, int h, int c, unsigned seed = 1) {
  std::vector<uint8_t> p(size_t(w) * h * c);
  unsigned s = seed;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      s = s * 1103515245u + 12345u;
      int noise = int((s >> 16) % 17) - 8;
      bool disc = (x - w / 3) * (x - w / 3) + (y - h / 2) * (y - h / 2) < (w * h) / 16;
      for (int k = 0; k < c; ++k) {
        int v = (k == 0   ? 255 * x / std::max(1, w - 1)
                 : k == 1 ? 255 * y / std::max(1, h - 1)
                          : 128 + 60 * k) +
                (disc ? 70 - 40 * k : 0) + noise;
        p[(size_t(y) * w + x) * c + k] = uint8_t(std::clamp(v, 0, 255));
      }
    }
  }
  return p;
}

}  // namespace sluice::runtime::testing
