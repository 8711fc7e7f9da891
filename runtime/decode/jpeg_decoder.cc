#include "runtime/decode/jpeg_decoder.h"

#include <jerror.h>
#include <jpeglib.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>  // jpeglib.h needs FILE and size_t first
#include <cstring>
#include <string>
#include <utility>

#include "runtime/decode/jpeg_restart_splice.h"
#include "runtime/decode/orientation.h"

namespace sluice::runtime {
namespace {

// Progressive files with more scans than this are rejected: a crafted file can
// otherwise make decoding take minutes (libjpeg-turbo's known scan-count DoS).
constexpr int kMaxScans = 1000;
// Columns decoded beyond each side of the crop (in scaled pixels, before iMCU
// alignment). Fancy upsampling of 2x-subsampled chroma reads the neighbouring
// chroma sample, and at the buffer's edge that neighbour is replicated, so the
// outermost decoded column can differ from a full decode; one pixel of margin
// keeps the crop's own pixels identical (tests check 4:4:4, 4:2:2, 4:2:0,
// progressive, at every scale). Four is cheap and leaves slack.
constexpr int kEdgeMargin = 4;

// libjpeg error manager whose fatal path longjmps back to the caller.
// Plain data only: the frames longjmp unwinds hold no C++ objects.
struct ErrorMgr {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  int warnings;
  bool premature_end;
  char first_warning[JMSG_LENGTH_MAX];
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void ErrorExit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorMgr*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

void EmitMessage(j_common_ptr cinfo, int msg_level) {
  if (msg_level >= 0) return;  // trace messages
  auto* err = reinterpret_cast<ErrorMgr*>(cinfo->err);
  if (err->warnings == 0) (*cinfo->err->format_message)(cinfo, err->first_warning);
  ++err->warnings;
  if (cinfo->err->msg_code == JWRN_JPEG_EOF) err->premature_end = true;
}

void OutputMessage(j_common_ptr) {}

void ProgressMonitor(j_common_ptr cinfo) {
  if (!cinfo->is_decompressor) return;
  auto* dinfo = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (dinfo->input_scan_number > kMaxScans) {
    auto* err = reinterpret_cast<ErrorMgr*>(cinfo->err);
    std::snprintf(err->message, sizeof(err->message), "more than %d progressive scans", kMaxScans);
    std::longjmp(err->jump, 1);
  }
}

struct Decompressor {
  jpeg_decompress_struct cinfo;
  ErrorMgr err;
  jpeg_progress_mgr progress;
};

// Sets up the error manager and progress monitor. Call before
// jpeg_create_decompress.
void InitErrorHandling(Decompressor& d) {
  jpeg_std_error(&d.err.pub);
  d.err.pub.error_exit = ErrorExit;
  d.err.pub.emit_message = EmitMessage;
  d.err.pub.output_message = OutputMessage;
  d.err.warnings = 0;
  d.err.premature_end = false;
  d.err.first_warning[0] = '\0';
  d.err.message[0] = '\0';
  d.cinfo.err = &d.err.pub;
  d.progress.progress_monitor = ProgressMonitor;
}

JpegColorSpace ToColorSpace(J_COLOR_SPACE cs) {
  switch (cs) {
    case JCS_GRAYSCALE:
      return JpegColorSpace::kGray;
    case JCS_YCbCr:
      return JpegColorSpace::kYCbCr;
    case JCS_RGB:
      return JpegColorSpace::kRGB;
    case JCS_CMYK:
      return JpegColorSpace::kCMYK;
    case JCS_YCCK:
      return JpegColorSpace::kYCCK;
    default:
      return JpegColorSpace::kUnknown;
  }
}

// Outcome of the libjpeg-calling body; on kCorrupt and kBadRequest, `message`
// in the error manager says why (kOverPixelLimit: cinfo's image size does).
enum class BodyStatus { kOk, kCorrupt, kBadRequest, kOverPixelLimit };

inline uint8_t Mul255(int a, int b) { return static_cast<uint8_t>((a * b + 127) / 255); }

// Converts one row of CMYK (Adobe-inverted when `inverted`) to RGB or gray.
void ConvertCmykRow(const uint8_t* in, uint8_t* out, int width, bool inverted, bool gray) {
  for (int x = 0; x < width; ++x, in += 4) {
    int c = in[0], m = in[1], y = in[2], k = in[3];
    if (!inverted) c = 255 - c, m = 255 - m, y = 255 - y, k = 255 - k;
    uint8_t r = Mul255(c, k), g = Mul255(m, k), b = Mul255(y, k);
    if (gray) {
      *out++ = static_cast<uint8_t>((19595 * r + 38470 * g + 7471 * b + 32768) >> 16);
    } else {
      *out++ = r;
      *out++ = g;
      *out++ = b;
    }
  }
}

// Checks the header's size against the decoder's limits and `req` (its crop
// inside the image), and sets *crop (the whole image without one). Writes a
// message into `msg` for kCorrupt and kBadRequest. No libjpeg calls.
BodyStatus CheckDecodeRequest(const jpeg_decompress_struct& cinfo, const DecodeRequest& req,
                              char* msg, PixelRect* crop) {
  const int64_t w = cinfo.image_width, h = cinfo.image_height;
  if (w > kMaxJpegSide || h > kMaxJpegSide) {
    std::snprintf(msg, JMSG_LENGTH_MAX, "image %lldx%lld exceeds the decoder's limit (%d per side)",
                  static_cast<long long>(w), static_cast<long long>(h), kMaxJpegSide);
    return BodyStatus::kCorrupt;
  }
  // The caller words it with CheckPixelLimit (no std::string here: longjmp).
  if (w * h > req.max_pixels) return BodyStatus::kOverPixelLimit;
  *crop = PixelRect{0, 0, static_cast<int>(w), static_cast<int>(h)};
  if (!req.crop) return BodyStatus::kOk;
  const PixelRect& c = *req.crop;
  if (c.width <= 0 || c.height <= 0 || c.x < 0 || c.y < 0 || int64_t{c.x} + c.width > w ||
      int64_t{c.y} + c.height > h) {
    std::snprintf(msg, JMSG_LENGTH_MAX,
                  "crop (x=%d y=%d w=%d h=%d) is not inside the %lldx%lld image", c.x, c.y, c.width,
                  c.height, static_cast<long long>(w), static_cast<long long>(h));
    return BodyStatus::kBadRequest;
  }
  *crop = c;
  return BodyStatus::kOk;
}

// The largest DCT scaling (1/8, 1/4, 1/2) that keeps the crop at least
// req.min_width x req.min_height; 1 when neither is set.
int DctScaleDenom(const PixelRect& crop, const DecodeRequest& req) {
  if (req.min_width <= 0 && req.min_height <= 0) return 1;
  for (int d8 : {8, 4, 2}) {
    if (int64_t{crop.width} >= int64_t{req.min_width} * d8 &&
        int64_t{crop.height} >= int64_t{req.min_height} * d8) {
      return d8;
    }
  }
  return 1;
}

// True when an EOI marker (FF D9) follows `from`. In entropy-coded data an
// FF byte is followed by 00 or a restart marker, so an FF D9 there is the
// EOI; a file cut short has none.
bool HasEoiAfter(std::span<const uint8_t> data, size_t from) {
  for (size_t i = data.size(); i >= from + 2; --i) {
    if (data[i - 2] == 0xFF && data[i - 1] == 0xD9) return true;
  }
  return false;
}

// jpeg_crop_scanline (libjpeg-turbo 2.1) sets each component's
// downsampled_width to ceil(output_width * h / h_max), which misses a component
// whose IDCT scaling was raised to spare upsampling: luma 4x2 with chroma 1x1
// at scale 1/2 decodes chroma at 8 samples per 16 output pixels (h2v1
// upsampling), not 4. Fancy upsampling then read past the samples decoded
// for the row, and the last decoded column came from uninitialized memory
// (valgrind; it differed from run to run). The width as jdmaster.c computes
// it for the whole image, on the cropped output width.
void FixCroppedSampleWidths(j_decompress_ptr cinfo) {
  const int64_t denominator = int64_t{cinfo->max_h_samp_factor} * cinfo->min_DCT_scaled_size;
  for (int ci = 0; ci < cinfo->num_components; ++ci) {
    jpeg_component_info* c = &cinfo->comp_info[ci];
    const int64_t numerator = int64_t{cinfo->output_width} * c->h_samp_factor * c->DCT_scaled_size;
    c->downsampled_width = static_cast<JDIMENSION>((numerator + denominator - 1) / denominator);
  }
}

// All libjpeg calls of a decode. It may longjmp out, so it creates no C++
// objects with destructors; `out` is only resized (before any row is read).
BodyStatus DecodeBody(Decompressor& d, std::span<const uint8_t> data, const DecodeRequest& req,
                      ImageBuffer& out, DecodedRegion& region) {
  j_decompress_ptr cinfo = &d.cinfo;
  char* msg = d.err.message;
  jpeg_mem_src(cinfo, data.data(), static_cast<unsigned long>(data.size()));
  jpeg_read_header(cinfo, TRUE);
  const size_t scan_start = static_cast<size_t>(cinfo->src->next_input_byte - data.data());
  PixelRect crop;
  if (BodyStatus st = CheckDecodeRequest(*cinfo, req, msg, &crop); st != BodyStatus::kOk) {
    return st;
  }
  const int denom = DctScaleDenom(crop, req);

  const bool cmyk = cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK;
  const bool gray = req.color == OutputColor::kGray;
  cinfo->out_color_space = cmyk ? JCS_CMYK : (gray ? JCS_GRAYSCALE : JCS_RGB);
  cinfo->scale_num = 1;
  cinfo->scale_denom = static_cast<unsigned>(denom);
  cinfo->dct_method = req.fast_dct ? JDCT_IFAST : JDCT_ISLOW;
  cinfo->do_fancy_upsampling = TRUE;
  cinfo->progress = &d.progress;

  jpeg_start_decompress(cinfo);
  const int sw = static_cast<int>(cinfo->output_width);
  const int sh = static_cast<int>(cinfo->output_height);

  // The crop in scaled coordinates, widened to whole pixels.
  const int sx0 = crop.x / denom, sy0 = crop.y / denom;
  const int sx1 = std::min(sw, (crop.x + crop.width + denom - 1) / denom);
  const int sy1 = std::min(sh, (crop.y + crop.height + denom - 1) / denom);

  JDIMENSION xoff = static_cast<JDIMENSION>(std::max(0, sx0 - kEdgeMargin));
  JDIMENSION cw = static_cast<JDIMENSION>(std::min(sw, sx1 + kEdgeMargin)) - xoff;
  if (xoff > 0 || static_cast<int>(cw) < sw) {
    jpeg_crop_scanline(cinfo, &xoff, &cw);
    FixCroppedSampleWidths(cinfo);
  }
  // Rows: libjpeg-turbo's skip keeps the upsampling context, so no margin.
  const int y0 = sy0, y1 = sy1;
  if (y0 > 0) {
    JDIMENSION skipped = jpeg_skip_scanlines(cinfo, static_cast<JDIMENSION>(y0));
    if (static_cast<int>(skipped) != y0) {
      std::snprintf(msg, JMSG_LENGTH_MAX, "could not skip to row %d", y0);
      return BodyStatus::kCorrupt;
    }
  }

  const int ow = static_cast<int>(cinfo->output_width);  // == cw after cropping
  const int channels = gray ? 1 : 3;
  out.Reset(ow, y1 - y0, channels);

  JSAMPARRAY tmp = nullptr;
  if (cmyk) {
    tmp = (*cinfo->mem->alloc_sarray)(reinterpret_cast<j_common_ptr>(cinfo), JPOOL_IMAGE,
                                      static_cast<JDIMENSION>(ow) * 4, 1);
  }
  const bool inverted = cinfo->saw_Adobe_marker;
  while (static_cast<int>(cinfo->output_scanline) < y1) {
    uint8_t* dst = out.row(static_cast<int>(cinfo->output_scanline) - y0);
    JSAMPROW row = cmyk ? tmp[0] : dst;
    if (jpeg_read_scanlines(cinfo, &row, 1) != 1) {
      std::snprintf(msg, JMSG_LENGTH_MAX, "decoder returned no row %u", cinfo->output_scanline);
      return BodyStatus::kCorrupt;
    }
    if (cmyk) ConvertCmykRow(tmp[0], dst, ow, inverted, gray);
  }
  // A crop that ends above the last row leaves the rest of the data unread,
  // so a file cut short below it looked good: whether a sample was bad
  // depended on its random crop. Without an EOI the rest is read (skipped),
  // and a short file is found as a full decode finds it.
  // (A skip to the very end reads nothing: skip to the last row, read it.)
  const int rows_left = sh - static_cast<int>(cinfo->output_scanline);
  if (rows_left > 0 && !HasEoiAfter(data, scan_start)) {
    if (rows_left > 1) jpeg_skip_scanlines(cinfo, static_cast<JDIMENSION>(rows_left - 1));
    JSAMPARRAY last = (*cinfo->mem->alloc_sarray)(
        reinterpret_cast<j_common_ptr>(cinfo), JPOOL_IMAGE,
        static_cast<JDIMENSION>(ow) * static_cast<JDIMENSION>(cinfo->output_components), 1);
    jpeg_read_scanlines(cinfo, last, 1);
  }
  jpeg_abort_decompress(cinfo);

  region.scale_denom = denom;
  region.scaled_width = sw;
  region.scaled_height = sh;
  region.decoded = PixelRect{static_cast<int>(xoff), y0, ow, y1 - y0};
  region.crop_x = static_cast<double>(crop.x) / denom - region.decoded.x;
  region.crop_y = static_cast<double>(crop.y) / denom - region.decoded.y;
  region.crop_width = static_cast<double>(crop.width) / denom;
  region.crop_height = static_cast<double>(crop.height) / denom;
  region.crop_in_buffer = PixelRect{sx0 - region.decoded.x, sy0 - y0, sx1 - sx0, sy1 - sy0};
  return BodyStatus::kOk;
}

}  // namespace

bool LooksLikeJpeg(std::span<const uint8_t> data) {
  return data.size() >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF;
}

Result<JpegInfo> ReadJpegHeader(std::span<const uint8_t> data) {
  Decompressor d;
  InitErrorHandling(d);
  if (setjmp(d.err.jump)) {
    jpeg_destroy_decompress(&d.cinfo);
    return MakeError(ErrorCode::kCorruptData, std::string("JPEG header: ") + d.err.message);
  }
  jpeg_create_decompress(&d.cinfo);
  jpeg_mem_src(&d.cinfo, data.data(), static_cast<unsigned long>(data.size()));
  jpeg_read_header(&d.cinfo, TRUE);
  JpegInfo info;
  info.width = static_cast<int>(d.cinfo.image_width);
  info.height = static_cast<int>(d.cinfo.image_height);
  info.components = d.cinfo.num_components;
  info.colorspace = ToColorSpace(d.cinfo.jpeg_color_space);
  info.progressive = d.cinfo.progressive_mode;
  const bool premature = d.err.premature_end;
  jpeg_destroy_decompress(&d.cinfo);
  if (premature) return MakeError(ErrorCode::kCorruptData, "JPEG header: premature end of data");
  return info;
}

Result<DecodedRegion> DecodeJpegUnspliced(std::span<const uint8_t> data,
                                          const DecodeRequest& request, ImageBuffer& out) {
  Decompressor d;
  InitErrorHandling(d);
  DecodedRegion region;
  volatile BodyStatus status = BodyStatus::kCorrupt;
  if (setjmp(d.err.jump) == 0) {
    jpeg_create_decompress(&d.cinfo);
    status = DecodeBody(d, data, request, out, region);
  }
  // Reached normally or by longjmp (status then still kCorrupt).
  const int64_t width = d.cinfo.image_width, height = d.cinfo.image_height;
  jpeg_destroy_decompress(&d.cinfo);
  if (status == BodyStatus::kOverPixelLimit) {
    return std::unexpected(CheckPixelLimit("JPEG", width, height, request.max_pixels).error());
  }
  if (status == BodyStatus::kBadRequest) {
    return MakeError(ErrorCode::kInvalidArgument, std::string("JPEG decode: ") + d.err.message);
  }
  if (status != BodyStatus::kOk) {
    return MakeError(ErrorCode::kCorruptData, std::string("JPEG decode: ") + d.err.message);
  }
  if (d.err.premature_end) {
    return MakeError(ErrorCode::kCorruptData, "JPEG decode: premature end of data");
  }
  if (request.fail_on_warning && d.err.warnings > 0) {
    return MakeError(ErrorCode::kCorruptData,
                     std::string("JPEG decode: warning: ") + d.err.first_warning);
  }
  region.warnings = d.err.warnings;
  return region;
}

Result<DecodedRegion> DecodeJpeg(std::span<const uint8_t> data, const DecodeRequest& request,
                                 ImageBuffer& out) {
  if (!request.crop) return DecodeJpegUnspliced(data, request, out);
  // A JPEG with row-aligned restart intervals is cut down to the tiles the
  // crop needs before any entropy decoding (jpeg_restart_splice.h). The
  // margin covers what the plain path decodes beyond the crop: kEdgeMargin
  // scaled columns (then whole iMCUs, as tiles are), and the chroma row above
  // and below that fancy upsampling reads (two scaled rows); so the buffer is
  // the plain path's, bit for bit.
  const int denom = DctScaleDenom(*request.crop, request);
  const int margin = kEdgeMargin * denom;
  thread_local std::vector<uint8_t> spliced;  // per thread, reused
  const std::optional<SpliceOrigin> origin =
      SpliceRestartIntervals(data, *request.crop, margin, spliced);
  if (!origin) return DecodeJpegUnspliced(data, request, out);
  // The limits apply to the image, not to the part of it decoded.
  const int width = origin->image_width, height = origin->image_height;
  if (width > kMaxJpegSide || height > kMaxJpegSide ||
      int64_t{width} * height > request.max_pixels) {
    return DecodeJpegUnspliced(data, request, out);
  }
  DecodeRequest part = request;
  part.crop->x -= origin->x;
  part.crop->y -= origin->y;
  auto region = DecodeJpegUnspliced(spliced, part, out);
  if (!region) return region;
  // Back into the whole image's scaled coordinates (origins are multiples of
  // the MCU size, so of every scale); crop_* are relative to `decoded`.
  const int d = region->scale_denom;
  region->scaled_width = (width + d - 1) / d;
  region->scaled_height = (height + d - 1) / d;
  region->decoded.x += origin->x / d;
  region->decoded.y += origin->y / d;
  return region;
}

// ---- JpegDecoder: the decode_jpeg op ----------------------------------------

Result<JpegDecoder::Options> JpegDecoder::ParseOptions(std::string_view op,
                                                       const ParamList& params) {
  auto color = DecoderColorParam(params, op);
  if (!color) return std::unexpected(color.error());
  auto orientation = DecoderEnumParam(params, op, "orientation", "ignore", {"ignore", "exif"});
  if (!orientation) return std::unexpected(orientation.error());
  auto max_pixels = DecoderMaxPixelsParam(params, op);
  if (!max_pixels) return std::unexpected(max_pixels.error());
  return Options{
      .color = *color, .exif_orientation = *orientation == "exif", .max_pixels = *max_pixels};
}

Result<std::unique_ptr<Decoder>> JpegDecoder::Create(const ParamList& params) {
  return CreateDecoder<JpegDecoder>("decode_jpeg", params);
}

Result<ImageHeader> JpegDecoder::ReadHeader(std::span<const uint8_t> data) const {
  auto info = ReadJpegHeader(data);
  if (!info) return std::unexpected(info.error());
  SLUICE_RETURN_IF_ERROR(CheckPixelLimit("JPEG", info->width, info->height, options_.max_pixels));
  ImageHeader header{info->width, info->height, options_.color == OutputColor::kGray ? 1 : 3};
  if (options_.exif_orientation && SwapsAxes(JpegExifOrientation(data))) {
    std::swap(header.width, header.height);
  }
  return header;
}

Result<DecodedRegion> JpegDecoder::Decode(std::span<const uint8_t> data,
                                          const DecodeRequest& request, ImageBuffer& out) const {
  DecodeRequest r = request;
  r.color = options_.color;
  r.max_pixels = options_.max_pixels;
  const int orientation = options_.exif_orientation ? JpegExifOrientation(data) : 1;
  if (orientation == 1) return DecodeJpeg(data, r, out);

  // Decode the stored image (the crop mapped into it), then turn the buffer.
  if (r.crop) {
    auto info = ReadJpegHeader(data);
    if (!info) return std::unexpected(info.error());
    const bool swap = SwapsAxes(orientation);
    const int w = swap ? info->height : info->width, h = swap ? info->width : info->height;
    PixelRect c = *r.crop;
    SLUICE_RETURN_IF_ERROR(CheckCropInside("JPEG", c, w, h, orientation));
    UnorientRect(orientation, w, h, c.x, c.y, c.width, c.height);
    r.crop = c;
  }
  if (SwapsAxes(orientation)) std::swap(r.min_width, r.min_height);
  // Per thread, reused: no allocation per sample once it has grown.
  thread_local ImageBuffer stored;
  auto region = DecodeJpeg(data, r, stored);
  if (!region) return region;
  ApplyOrientation(orientation, stored, out);
  return OrientRegion(orientation, *region, stored.width(), stored.height());
}

}  // namespace sluice::runtime
