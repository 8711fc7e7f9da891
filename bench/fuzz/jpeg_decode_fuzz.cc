// libFuzzer harness: the JPEG decode path (runtime/decode/jpeg_decoder.h),
// with region of interest, DCT scaling and EXIF orientation.
//
// Input: kDecodePrefix request bytes (decode_fuzz_util.h), then the file.
// ReadHeader and then Decode through the decode_jpeg Decoder (orientation
// ignore or exif), and DecodeJpeg directly with the same request; every file
// must decode or fail with an error, and a success must describe its buffer
// exactly (CheckRegion).
#include <cstdint>
#include <span>

#include "bench/fuzz/decode_fuzz_util.h"
#include "runtime/decode/jpeg_decoder.h"

using namespace sluice::runtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < sluice::fuzz::kDecodePrefix) return 0;
  const std::span<const uint8_t> file(data + sluice::fuzz::kDecodePrefix,
                                      size - sluice::fuzz::kDecodePrefix);
  (void)LooksLikeJpeg(file);
  const uint8_t flags = data[0];
  JpegDecoder::Options options;
  options.color = (flags & 1) ? OutputColor::kGray : OutputColor::kRGB;
  options.exif_orientation = (flags & 2) != 0;
  const JpegDecoder decoder(options);
  auto header = decoder.ReadHeader(file);
  if (!header) return 0;
  if (int64_t{header->width} * header->height > sluice::fuzz::kMaxFuzzPixels) return 0;

  static ImageBuffer out;  // reused across inputs, as a worker reuses its buffer
  const DecodeRequest request = sluice::fuzz::RequestFromBytes(data, header->width, header->height);
  auto region = decoder.Decode(file, request, out);
  if (region) sluice::fuzz::CheckRegion(*region, out, header->channels);

  // The same request on the stored image, without the orientation adapter.
  if (options.exif_orientation) {
    auto info = ReadJpegHeader(file);
    if (!info) std::abort();  // ReadHeader just parsed it
    const DecodeRequest plain = sluice::fuzz::RequestFromBytes(data, info->width, info->height);
    auto r2 = DecodeJpeg(file, plain, out);
    if (r2) sluice::fuzz::CheckRegion(*r2, out, plain.color == OutputColor::kGray ? 1 : 3);
  }
  return 0;
}
