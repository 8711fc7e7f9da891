// Colour ops (class pointwise): color_jitter, grayscale. Both accept uint8 or
// float images in either layout and keep the dtype. Value range: uint8 images
// are in [0, 255]; float images are taken to be in [0, 1] (torchvision's
// convention), and results are clamped to that range.
#include <algorithm>
#include <array>

#include "ops/families.h"
#include "ops/random.h"

namespace sluice {
namespace {

using namespace ops_internal;

Result<TensorType> ColorInput(std::string_view op, std::span<const TensorType> inputs) {
  SLUICE_RETURN_IF_ERROR(ExpectNumInputs(op, inputs, 1));
  SLUICE_RETURN_IF_ERROR(ExpectImage(op, inputs[0]));
  const TensorType& t = inputs[0];
  const int64_t c = t.dims[t.channel_axis()];
  if (c != 1 && c != 3) {
    return MakeError(
        ErrorCode::kInvalidSpec,
        "`" + std::string(op) + "` expects a 1- or 3-channel image, got " + t.ToString(),
        "decode with color: rgb or color: gray");
  }
  return t;
}

ParamDef JitterParam(std::string name, std::string what) {
  return ParamDef{.name = std::move(name),
                  .type = ParamType::kFloat,
                  .doc = "How much to jitter " + what +
                         ": factor drawn uniformly from "
                         "[max(0, 1 - v), 1 + v]; 0 leaves it unchanged.",
                  .default_value = VFloat(0.0),
                  .min = 0.0};
}

// ITU-R 601 luma of pixel (y, x); a 1-channel image is its own luma.
double Luma(const RefTensor& t, int64_t y, int64_t x) {
  if (t.channels() == 1) return t.at(y, x, 0);
  return 0.299 * t.at(y, x, 0) + 0.587 * t.at(y, x, 1) + 0.114 * t.at(y, x, 2);
}

Status RefColorInput(std::string_view op, const RefTensor& in) {
  std::array<TensorType, 1> types = {in.type};
  auto t = ColorInput(op, types);
  if (!t) return std::unexpected(t.error());
  return Ok();
}

// Reference: factors drawn in a fixed order, always all three:
//   fb = rng.Uniform(max(0, 1 - brightness), 1 + brightness), then fc (contrast), then fs
//   (saturation) likewise. Then, per pixel value v in [0, B] (B = 255 for uint8, 1 for
//   float), each step clamped to [0, B] as torchvision:
//   brightness: v = fb * v
//   contrast:   v = fc * v + (1 - fc) * m, m = mean luma of the whole image (after brightness)
//   saturation: v = fs * v + (1 - fs) * luma(pixel) (3-channel images only)
// uint8 is rounded (half to even) once at the end; torchvision truncates after each step.
// The three factors (brightness, contrast, saturation) in draw order; used by
// the reference and by the fused kernel's draw slots.
std::array<double, 3> JitterFactors(const ParamList& p, SampleRng& rng) {
  std::array<double, 3> factor;
  const char* names[3] = {"brightness", "contrast", "saturation"};
  for (int i = 0; i < 3; ++i) {
    const double v = P(p, names[i]).AsFloat();
    factor[i] = rng.Uniform(std::max(0.0, 1.0 - v), 1.0 + v);
  }
  return factor;
}

Result<RefTensor> ColorJitterRef(const RefTensor& in, const ParamList& p, RefContext& ctx) {
  SLUICE_RETURN_IF_ERROR(RefColorInput("color_jitter", in));
  if (!ctx.rng) return MakeError(ErrorCode::kInternal, "color_jitter needs ctx.rng");
  const std::array<double, 3> factor = JitterFactors(p, *ctx.rng);
  const double bound = in.type.dtype == DType::kUInt8 ? 255.0 : 1.0;
  auto clamp = [bound](double v) { return std::clamp(v, 0.0, bound); };
  const int64_t h = in.height(), w = in.width(), c = in.channels();
  // Working copy in double, HWC order whatever the input layout.
  std::vector<double> v(static_cast<size_t>(h * w * c));
  auto at = [&](int64_t y, int64_t x, int64_t ch) -> double& { return v[(y * w + x) * c + ch]; };
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      for (int64_t ch = 0; ch < c; ++ch) at(y, x, ch) = in.at(y, x, ch);
    }
  }
  auto luma = [&](int64_t y, int64_t x) {
    if (c == 1) return at(y, x, 0);
    return 0.299 * at(y, x, 0) + 0.587 * at(y, x, 1) + 0.114 * at(y, x, 2);
  };
  for (double& e : v) e = clamp(factor[0] * e);
  double mean = 0.0;
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) mean += luma(y, x);
  }
  mean /= static_cast<double>(h * w);
  for (double& e : v) e = clamp(factor[1] * e + (1.0 - factor[1]) * mean);
  if (c == 3) {
    for (int64_t y = 0; y < h; ++y) {
      for (int64_t x = 0; x < w; ++x) {
        const double l = luma(y, x);
        for (int64_t ch = 0; ch < 3; ++ch) {
          at(y, x, ch) = clamp(factor[2] * at(y, x, ch) + (1.0 - factor[2]) * l);
        }
      }
    }
  }
  RefTensor out = in;
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      for (int64_t ch = 0; ch < c; ++ch) {
        out.at(y, x, ch) = RoundToDType(static_cast<float>(at(y, x, ch)), in.type.dtype);
      }
    }
  }
  return out;
}

// Reference: L = 0.299 R + 0.587 G + 0.114 B, rounded (half to even) for uint8 and
// written to every output channel; a 1-channel input is copied.
Result<RefTensor> GrayscaleRef(const RefTensor& in, const ParamList& p, RefContext&) {
  SLUICE_RETURN_IF_ERROR(RefColorInput("grayscale", in));
  const int64_t n = P(p, "num_output_channels").AsInt();
  const int64_t h = in.height(), w = in.width();
  RefTensor out = RefTensor::Zeros(in.type.dtype, in.type.layout,
                                   Image(in.type.dtype, in.type.layout, h, w, n).dims);
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      const float l = RoundToDType(static_cast<float>(Luma(in, y, x)), in.type.dtype);
      for (int64_t ch = 0; ch < n; ++ch) out.at(y, x, ch) = l;
    }
  }
  return out;
}

}  // namespace

void RegisterColorOps(std::vector<OpDef>& ops) {
  ops.push_back(OpDef{
      .name = "color_jitter",
      .op_class = OpClass::kPointwise,
      .doc = "Randomly changes brightness, contrast and saturation as torchvision ColorJitter, "
             "but always in that fixed order (torchvision shuffles the order per sample).",
      .params = {JitterParam("brightness", "brightness"), JitterParam("contrast", "contrast"),
                 JitterParam("saturation", "saturation")},
      .random = true,
      .infer = [](std::span<const TensorType> inputs,
                  const ParamList&) -> Result<std::vector<TensorType>> {
        auto in = ColorInput("color_jitter", inputs);
        if (!in) return std::unexpected(in.error());
        return std::vector<TensorType>{*in};
      },
      .reference = ColorJitterRef,
      .fusion = FusionRole::kPointwise,
      // Slots: brightness, contrast, saturation factors (compiler/codegen/lower/color_lower.cc).
      .draw_slots = 3,
      .draw =
          [](const ParamList& p, SampleRng& rng, std::span<float> slots) {
            const std::array<double, 3> f = JitterFactors(p, rng);
            for (int i = 0; i < 3; ++i) slots[i] = static_cast<float>(f[i]);
          },
  });
  ops.push_back(OpDef{
      .name = "grayscale",
      .op_class = OpClass::kPointwise,
      .doc = "Converts to luma L = 0.299 R + 0.587 G + 0.114 B (ITU-R 601, as torchvision "
             "Grayscale), repeated over num_output_channels channels.",
      .params = {ParamDef{.name = "num_output_channels",
                          .type = ParamType::kInt,
                          .doc = "1, or 3 to keep an RGB-shaped image with equal channels.",
                          .default_value = VInt(1),
                          .min = 1,
                          .max = 3}},
      .check =
          [](const ParamList& p) {
            std::vector<ParamIssue> issues;
            const int64_t n = P(p, "num_output_channels").AsInt();
            if (n != 1 && n != 3) {
              issues.push_back({"num_output_channels",
                                "`num_output_channels` must be 1 or 3, got " + std::to_string(n),
                                "use 1 for a single channel or 3 for an RGB-shaped result"});
            }
            return issues;
          },
      .infer = [](std::span<const TensorType> inputs,
                  const ParamList& p) -> Result<std::vector<TensorType>> {
        auto in = ColorInput("grayscale", inputs);
        if (!in) return std::unexpected(in.error());
        TensorType out = *in;
        out.dims[out.channel_axis()] = P(p, "num_output_channels").AsInt();
        return std::vector<TensorType>{out};
      },
      .reference = GrayscaleRef,
      .fusion = FusionRole::kPointwise,
      .gpu_batch = true,
  });
}

}  // namespace sluice
