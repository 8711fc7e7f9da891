// libFuzzer harness: `sluice pack`'s lossless re-encoding with restart
// markers (pack/restart_markers.h), and the splice on what it writes.
//
// Input: kDecodePrefix request bytes (decode_fuzz_util.h; they choose a crop
// for the splice checks, [7] the splice's margin), then a JPEG. When
// AddRestartMarkers re-encodes it (abort on failure):
//   - the result decodes whole to the very pixels of the input;
//   - a second AddRestartMarkers keeps it as it is (its intervals already
//     divide the MCUs per row, as libjpeg counts them);
//   - the splice checks of splice_fuzz_util.h hold on it: these are valid
//     files with restart intervals, in whatever sampling layout the input had.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "bench/fuzz/decode_fuzz_util.h"
#include "bench/fuzz/splice_fuzz_util.h"
#include "pack/restart_markers.h"
#include "runtime/decode/jpeg_decoder.h"

using namespace sluice::runtime;

namespace {

[[noreturn]] void Fail(const char* what) {
  std::printf("restart markers check failed: %s\n", what);
  std::fflush(stdout);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < sluice::fuzz::kDecodePrefix) return 0;
  const std::span<const uint8_t> file(data + sluice::fuzz::kDecodePrefix,
                                      size - sluice::fuzz::kDecodePrefix);
  // Large SOF sizes are left to the unit tests, as in the decode harnesses.
  auto info = ReadJpegHeader(file);
  if (info && int64_t{info->width} * info->height > sluice::fuzz::kMaxFuzzPixels) return 0;
  std::vector<uint8_t> tiled;
  if (!AddRestartMarkers(file, tiled)) return 0;
  if (!info) Fail("re-encoded a file whose header libjpeg cannot read");

  static ImageBuffer before, after;
  const auto rb = DecodeJpeg(file, DecodeRequest{}, before);
  const auto ra = DecodeJpeg(tiled, DecodeRequest{}, after);
  if (!ra || ra->warnings != 0) Fail("the re-encoded file does not decode cleanly");
  if (rb) {  // the input may use what the decoder refuses (its limits)
    if (before.width() != after.width() || before.height() != after.height() ||
        before.channels() != after.channels()) {
      Fail("the re-encoded file decodes to another size");
    }
    const size_t row_bytes = static_cast<size_t>(after.width()) * after.channels();
    for (int y = 0; y < after.height(); ++y) {
      if (std::memcmp(before.row(y), after.row(y), row_bytes) != 0) Fail("other pixels");
    }
  }
  std::vector<uint8_t> again;
  if (AddRestartMarkers(tiled, again)) Fail("re-encoded its own output");

  auto tiled_info = ReadJpegHeader(tiled);
  if (!tiled_info) Fail("libjpeg cannot read the re-encoded header");
  uint8_t prefix[sluice::fuzz::kDecodePrefix];
  std::memcpy(prefix, data, sizeof prefix);
  prefix[0] = static_cast<uint8_t>((prefix[0] | 16) & ~(4 | 32));  // a crop inside; no strict
  const DecodeRequest request =
      sluice::fuzz::RequestFromBytes(prefix, tiled_info->width, tiled_info->height);
  sluice::fuzz::CheckSplice(tiled, *tiled_info, *request.crop, data[7] % 64);
  sluice::fuzz::CheckSplicedDecode(tiled, request);
  return 0;
}
