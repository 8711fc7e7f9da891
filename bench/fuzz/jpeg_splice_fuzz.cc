// libFuzzer harness: the restart-interval splice (runtime/decode/
// jpeg_restart_splice.h) and its use in DecodeJpeg.
//
// Input: kDecodePrefix request bytes (decode_fuzz_util.h; the crop bit is
// implied, and [7] is the splice's margin), then the file. Seeds are small
// JPEGs with row-aligned restart intervals. Checks (abort on failure):
//   - SpliceRestartIntervals on a success: an origin on the MCU grid, the
//     image size libjpeg reads from the header, and a spliced file whose
//     header libjpeg reads as the tiles that cover the crop grown by the margin;
//   - DecodeJpeg (which splices) against DecodeJpegUnspliced (which does not),
//     same request: when the unspliced decode succeeds without a warning, the
//     spliced one must too, with the same DecodedRegion and the same buffer.
// Also the decode_jpeg Decoder with `orientation: exif` (crop mapped to the
// stored image, then DecodeJpeg), for memory errors and CheckRegion only.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "bench/fuzz/decode_fuzz_util.h"
#include "bench/fuzz/splice_fuzz_util.h"
#include "runtime/decode/jpeg_decoder.h"
#include "runtime/decode/jpeg_restart_splice.h"

using namespace sluice::runtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < sluice::fuzz::kDecodePrefix) return 0;
  const std::span<const uint8_t> file(data + sluice::fuzz::kDecodePrefix,
                                      size - sluice::fuzz::kDecodePrefix);
  auto info = ReadJpegHeader(file);
  if (!info || info->width <= 0 || info->height <= 0) return 0;
  if (int64_t{info->width} * info->height > sluice::fuzz::kMaxFuzzPixels) return 0;

  uint8_t prefix[sluice::fuzz::kDecodePrefix];
  std::memcpy(prefix, data, sizeof prefix);
  prefix[0] = static_cast<uint8_t>((prefix[0] | 16) & ~(4 | 32));  // a crop inside; no strict
  DecodeRequest request = sluice::fuzz::RequestFromBytes(prefix, info->width, info->height);
  sluice::fuzz::CheckSplice(file, *info, *request.crop, data[7] % 64);
  sluice::fuzz::CheckSplicedDecode(file, request);

  // The EXIF adapter maps the crop into the stored image and calls DecodeJpeg.
  JpegDecoder::Options options;
  options.exif_orientation = true;
  options.color = request.color;
  const JpegDecoder decoder(options);
  auto header = decoder.ReadHeader(file);
  if (!header) return 0;
  static ImageBuffer out;
  const DecodeRequest oriented =
      sluice::fuzz::RequestFromBytes(prefix, header->width, header->height);
  auto region = decoder.Decode(file, oriented, out);
  if (region) sluice::fuzz::CheckRegion(*region, out, header->channels);
  return 0;
}
