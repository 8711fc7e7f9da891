// Cropped, DCT-scaled decodes of JPEGs whose luma is sampled 4x2 (chroma 1x1):
// at 1/2 and 1/4, libjpeg raises the chroma's IDCT size and upsamples it by 2
// only, which jpeg_crop_scanline's sample widths miss (jpeg_decoder.cc,
// FixCroppedSampleWidths). The crop's pixels must be those of the whole
// image decoded at the same scale, and the restart-interval splice must give
// the plain path's buffer.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "runtime/decode/jpeg_decoder.h"
#include "tests/runtime/decode/jpeg_test_images.h"

namespace sluice::runtime {
namespace {

using testing::Encode;
using testing::EncodeOptions;
using testing::Pattern;

// Leaves freed heap blocks full of `byte`, so that memory libjpeg allocates
// next and reads before writing shows (uninitialized reads are otherwise
// whatever the heap held, and can match by chance).
void DirtyTheHeap(uint8_t byte) {
  std::vector<void*> blocks;
  for (size_t size = 64; size <= (size_t{1} << 18); size = size * 3 / 2) {
    void* p = std::malloc(size);
    std::memset(p, byte, size);
    blocks.push_back(p);
  }
  for (void* p : blocks) std::free(p);
}

// The whole image at 1/d (d from the request's min sizes).
ImageBuffer WholeAt(const std::vector<uint8_t>& jpeg, int w, int h, int d) {
  DecodeRequest req;
  req.crop = PixelRect{0, 0, w, h};
  req.min_width = w / d;
  req.min_height = h / d;
  ImageBuffer out;
  auto r = DecodeJpegUnspliced(jpeg, req, out);
  EXPECT_TRUE(r.has_value());
  EXPECT_EQ(r->scale_denom, d);
  return out;
}

TEST(JpegCropSampling, Luma4x2CropsAtDctScalesMatchTheWholeImage) {
  const int w = 227, h = 61;
  EncodeOptions o;
  o.h_samp = 4;
  o.v_samp = 2;
  o.restart_interval = 1;  // 8 MCUs of 32 per row: tiles for the splice
  const std::vector<uint8_t> jpeg = Encode(Pattern(w, h, 3), w, h, o);
  const PixelRect crops[] = {{218, 40, 9, 2},  {190, 20, 37, 30}, {100, 0, 127, 61},
                             {0, 10, 40, 20},  {64, 32, 60, 29},  {219, 53, 8, 8},
                             {150, 5, 70, 40}, {33, 17, 5, 9}};
  for (int d : {2, 4}) {
    const ImageBuffer whole = WholeAt(jpeg, w, h, d);
    for (const PixelRect& crop : crops) {
      SCOPED_TRACE(::testing::Message() << "1/" << d << " crop " << crop.x << "," << crop.y << " "
                                        << crop.width << "x" << crop.height);
      DecodeRequest req;
      req.crop = crop;
      req.min_width = crop.width / d;
      req.min_height = crop.height / d;
      ImageBuffer plain, spliced;
      DirtyTheHeap(0x5A);
      auto rp = DecodeJpegUnspliced(jpeg, req, plain);
      DirtyTheHeap(0xC3);
      auto rs = DecodeJpeg(jpeg, req, spliced);
      ASSERT_TRUE(rp.has_value()) << rp.error().ToString();
      ASSERT_TRUE(rs.has_value()) << rs.error().ToString();
      ASSERT_EQ(rp->scale_denom, d);
      EXPECT_EQ(rs->decoded, rp->decoded);
      ASSERT_EQ(spliced.width(), plain.width());
      ASSERT_EQ(spliced.height(), plain.height());
      // The splice's contract: every decoded pixel.
      for (int y = 0; y < plain.height(); ++y) {
        ASSERT_EQ(0, std::memcmp(plain.row(y), spliced.row(y), size_t(plain.width()) * 3))
            << "row " << y;
      }
      // The crop's pixels are the whole image's (its outer decoded columns
      // may differ: upsampling replicates at the edges of what is decoded).
      const PixelRect& c = rp->crop_in_buffer;
      for (int y = c.y; y < c.y + c.height; ++y) {
        const uint8_t* ref = whole.row(rp->decoded.y + y) + size_t(rp->decoded.x + c.x) * 3;
        ASSERT_EQ(0, std::memcmp(plain.row(y) + size_t(c.x) * 3, ref, size_t(c.width) * 3))
            << "row " << y;
      }
    }
  }
}

}  // namespace
}  // namespace sluice::runtime
