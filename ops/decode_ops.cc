// Decode ops: encoded bytes -> uint8 HWC image.
//
// decode_jpeg's reference implementation uses libjpeg-turbo's TurboJPEG API.
// Colour handling: with color: rgb, grayscale JPEGs are expanded to three equal
// channels and CMYK/YCCK JPEGs (stored inverted, as Adobe writes them and as
// libjpeg-turbo's own CMYK code assumes) are converted with R = C*K/255 (likewise
// G, B), rounded; with color: gray, colour JPEGs become ITU-R 601 luma (libjpeg's
// own conversion; CMYK goes through RGB first). Corrupt or truncated data is
// ErrorCode::kCorruptData with libjpeg-turbo's reason; warnings other than a
// premature end of data (e.g. extraneous bytes before a marker) are tolerated,
// as PIL does.
#include <turbojpeg.h>

#include <cmath>
#include <memory>

#include "ops/families.h"

namespace sluice {
namespace {

using namespace ops_internal;

Result<std::vector<TensorType>> InferDecodeJpeg(std::span<const TensorType> inputs,
                                                const ParamList& params) {
  SLUICE_RETURN_IF_ERROR(ExpectNumInputs("decode_jpeg", inputs, 1));
  const TensorType& t = inputs[0];
  if (!t.encoded()) {
    return MakeError(ErrorCode::kInvalidSpec,
                     "`decode_jpeg` expects encoded bytes, got " + t.ToString(),
                     "decode_jpeg reads a source's `jpg` tensor; remove it if the image is "
                     "already decoded");
  }
  const int64_t channels = P(params, "color").AsString() == "gray" ? 1 : 3;
  return std::vector<TensorType>{Image(DType::kUInt8, Layout::kHWC, kDynamic, kDynamic, channels)};
}

struct TjDeleter {
  void operator()(void* handle) const { tjDestroy(handle); }
};

Result<RefTensor> DecodeJpegReference(const RefTensor& in, const ParamList& params, RefContext&) {
  if (!in.type.encoded()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "decode_jpeg expects encoded bytes, got " + in.type.ToString());
  }
  const bool gray = P(params, "color").AsString() == "gray";
  std::unique_ptr<void, TjDeleter> tj(tjInitDecompress());
  if (!tj) return MakeError(ErrorCode::kInternal, "tjInitDecompress failed");
  auto* buf = const_cast<unsigned char*>(in.bytes.data());
  const auto size = static_cast<unsigned long>(in.bytes.size());
  int width = 0, height = 0, subsamp = 0, colorspace = 0;
  if (in.bytes.empty() ||
      tjDecompressHeader3(tj.get(), buf, size, &width, &height, &subsamp, &colorspace) != 0) {
    return MakeError(ErrorCode::kCorruptData,
                     std::string("not a readable JPEG: ") +
                         (in.bytes.empty() ? "empty input" : tjGetErrorStr2(tj.get())));
  }
  const bool cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  const int pixel_format = cmyk ? TJPF_CMYK : gray ? TJPF_GRAY : TJPF_RGB;
  const int src_channels = tjPixelSize[pixel_format];
  std::vector<unsigned char> pixels(static_cast<size_t>(width) * height * src_channels);
  if (tjDecompress2(tj.get(), buf, size, pixels.data(), width, 0, height, pixel_format,
                    TJFLAG_ACCURATEDCT) != 0) {
    const std::string reason = tjGetErrorStr2(tj.get());
    if (tjGetErrorCode(tj.get()) == TJERR_FATAL ||
        reason.find("Premature end") != std::string::npos) {
      return MakeError(ErrorCode::kCorruptData, "corrupt JPEG: " + reason);
    }
  }
  const int64_t out_channels = gray ? 1 : 3;
  RefTensor out = RefTensor::Zeros(DType::kUInt8, Layout::kHWC, {height, width, out_channels});
  for (int64_t i = 0; i < static_cast<int64_t>(width) * height; ++i) {
    const unsigned char* px = &pixels[static_cast<size_t>(i) * src_channels];
    if (cmyk) {
      float rgb[3];
      for (int c = 0; c < 3; ++c) rgb[c] = std::nearbyint(px[c] * px[3] / 255.0f);
      if (gray) {
        out.data[i] =
            RoundToDType(0.299f * rgb[0] + 0.587f * rgb[1] + 0.114f * rgb[2], DType::kUInt8);
      } else {
        for (int c = 0; c < 3; ++c) out.data[i * 3 + c] = rgb[c];
      }
    } else {
      for (int c = 0; c < out_channels; ++c) out.data[i * out_channels + c] = px[c];
    }
  }
  return out;
}

}  // namespace

void RegisterDecodeOps(std::vector<OpDef>& ops) {
  ops.push_back(OpDef{
      .name = "decode_jpeg",
      .op_class = OpClass::kDecode,
      .doc = "Decodes a JPEG file's bytes into a uint8 HWC image; corrupt data is a per-sample "
             "error handled by output.on_error.",
      .params = {ParamDef{.name = "color",
                          .type = ParamType::kEnum,
                          .doc = "Output colour: rgb (3 channels; grayscale and CMYK JPEGs are "
                                 "converted) or gray (1 channel, ITU-R 601 luma).",
                          .default_value = VStr("rgb"),
                          .choices = {"rgb", "gray"}}},
      .infer = InferDecodeJpeg,
      .reference = DecodeJpegReference,
  });
}

}  // namespace sluice
