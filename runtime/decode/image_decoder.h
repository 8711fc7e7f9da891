// The `decode_image` op: JPEG or PNG, chosen per file by its magic bytes, so a
// folder mixing both just works.
//
// Params: color (rgb | gray) for both formats; alpha (drop | keep) for PNG
// (with keep, a JPEG gets an opaque alpha channel so every sample has the same
// channel count); orientation (ignore | exif) for JPEG (PNG files are never
// turned).
//
// Caps are those of the JPEG path (region of interest, DCT scaling): the
// loader plans pushdown as for decode_jpeg. A PNG decode ignores the crop and
// the minimum size and decodes the whole image at full resolution; its
// DecodedRegion says so (scale_denom 1, decoded = the whole image), so the
// loader's per-sample mapping through DecodedRegion handles both formats
// without knowing which one it got.
//
// Bytes that are neither JPEG nor PNG are kCorruptData naming both formats.
#pragma once

#include <memory>

#include "runtime/decode/decoder.h"
#include "runtime/decode/jpeg_decoder.h"
#include "runtime/decode/png_decoder.h"

namespace sluice::runtime {

class ImageDecoder final : public Decoder {
 public:
  ImageDecoder(JpegDecoder::Options jpeg, PngOptions png)
      : jpeg_(jpeg), png_(png), keep_alpha_(png.keep_alpha) {}
  // Errors: kInvalidArgument for a param value the op does not accept.
  static Result<std::unique_ptr<Decoder>> Create(const ParamList& params);

  std::string_view op_name() const override { return "decode_image"; }
  DecoderCaps caps() const override { return jpeg_.caps(); }
  Result<ImageHeader> ReadHeader(std::span<const uint8_t> data) const override;
  Result<DecodedRegion> Decode(std::span<const uint8_t> data, const DecodeRequest& request,
                               ImageBuffer& out) const override;

 private:
  JpegDecoder jpeg_;
  PngDecoder png_;
  bool keep_alpha_;
};

}  // namespace sluice::runtime
