// Pointwise ops: normalize, layout, cast. They work on images in either layout.
#include <array>

#include "ops/families.h"

namespace sluice {
namespace {

using namespace ops_internal;

Result<TensorType> PointwiseInput(std::string_view op, std::span<const TensorType> inputs) {
  SLUICE_RETURN_IF_ERROR(ExpectNumInputs(op, inputs, 1));
  SLUICE_RETURN_IF_ERROR(ExpectImage(op, inputs[0]));
  return inputs[0];
}

Result<std::vector<TensorType>> InferNormalize(std::span<const TensorType> inputs,
                                               const ParamList& p) {
  auto in = PointwiseInput("normalize", inputs);
  if (!in) return std::unexpected(in.error());
  const int64_t channels = in->dims[in->channel_axis()];
  for (const char* name : {"mean", "std"}) {
    const size_t n = P(p, name).AsFloatList().size();
    if (n != 1 && channels != kDynamic && static_cast<int64_t>(n) != channels) {
      return MakeError(ErrorCode::kInvalidSpec,
                       "`normalize` has " + std::to_string(n) + " " + name +
                           " values but the image has " + std::to_string(channels) +
                           (channels == 1 ? " channel (" : " channels (") + in->ToString() + ")",
                       "give one value per channel, or a single value for all channels");
    }
  }
  TensorType out = *in;
  if (!IsFloat(out.dtype)) out.dtype = DType::kFloat32;
  return std::vector<TensorType>{out};
}

Status RefPointwiseInput(std::string_view op, const RefTensor& in) {
  return ExpectImage(op, in.type);
}

// Reference: out = (x / scale - mean[c]) / std[c] in double, rounded to the output dtype.
Result<RefTensor> NormalizeRef(const RefTensor& in, const ParamList& p, RefContext&) {
  SLUICE_RETURN_IF_ERROR(RefPointwiseInput("normalize", in));
  std::array<TensorType, 1> types = {in.type};
  auto out_types = InferNormalize(types, p);
  if (!out_types) return std::unexpected(out_types.error());
  const auto& mean = P(p, "mean").AsFloatList();
  const auto& std_dev = P(p, "std").AsFloatList();
  const double scale = P(p, "scale").AsFloat();
  RefTensor out = in;
  out.type = (*out_types)[0];
  for (int64_t y = 0; y < in.height(); ++y) {
    for (int64_t x = 0; x < in.width(); ++x) {
      for (int64_t c = 0; c < in.channels(); ++c) {
        const double m = mean.size() == 1 ? mean[0] : mean[c];
        const double s = std_dev.size() == 1 ? std_dev[0] : std_dev[c];
        out.at(y, x, c) =
            RoundToDType(static_cast<float>((in.at(y, x, c) / scale - m) / s), out.type.dtype);
      }
    }
  }
  return out;
}

Result<RefTensor> LayoutRef(const RefTensor& in, const ParamList& p, RefContext&) {
  SLUICE_RETURN_IF_ERROR(RefPointwiseInput("layout", in));
  const Layout to = *ParseLayout(P(p, "to").AsString());
  const int64_t h = in.height(), w = in.width(), c = in.channels();
  RefTensor out = RefTensor::Zeros(in.type.dtype, to, Image(in.type.dtype, to, h, w, c).dims);
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      for (int64_t ch = 0; ch < c; ++ch) out.at(y, x, ch) = in.at(y, x, ch);
    }
  }
  return out;
}

// Reference: RoundToDType to the new dtype (uint8 saturates, half to even).
Result<RefTensor> CastRef(const RefTensor& in, const ParamList& p, RefContext&) {
  SLUICE_RETURN_IF_ERROR(RefPointwiseInput("cast", in));
  RefTensor out = in;
  out.type.dtype = *ParseDType(P(p, "dtype").AsString());
  for (float& v : out.data) v = RoundToDType(v, out.type.dtype);
  return out;
}

}  // namespace

void RegisterPointwiseOps(std::vector<OpDef>& ops) {
  ops.push_back(OpDef{
      .name = "normalize",
      .op_class = OpClass::kPointwise,
      .doc = "out = (x / scale - mean[c]) / std[c] per channel c; the result is float32 (or the "
             "input's float dtype).",
      .params =
          {
              ParamDef{.name = "mean",
                       .type = ParamType::kFloatList,
                       .doc = "Per-channel mean (one value, or one per channel), after scaling.",
                       .required = true,
                       .list_lengths = {1, 3}},
              ParamDef{.name = "std",
                       .type = ParamType::kFloatList,
                       .doc = "Per-channel standard deviation (> 0), after scaling.",
                       .required = true,
                       .list_lengths = {1, 3}},
              ParamDef{.name = "scale",
                       .type = ParamType::kFloat,
                       .doc = "Divisor applied first, e.g. 255 to map uint8 to [0, 1].",
                       .default_value = VFloat(1.0)},
          },
      .check =
          [](const ParamList& p) {
            std::vector<ParamIssue> issues;
            for (double s : P(p, "std").AsFloatList()) {
              if (!(s > 0)) {
                issues.push_back(
                    {"std", "std values must be greater than 0, got " + P(p, "std").ToString(),
                     "use the dataset's per-channel standard deviation, e.g. "
                     "[0.229, 0.224, 0.225]"});
                break;
              }
            }
            if (!(P(p, "scale").AsFloat() > 0)) {
              issues.push_back({"scale",
                                "scale must be greater than 0, got " + P(p, "scale").ToString(),
                                "use 255 for uint8 images or 1 for images already in [0, 1]"});
            }
            return issues;
          },
      .infer = InferNormalize,
      .reference = NormalizeRef,
      .fusion = FusionRole::kPointwise,
      .gpu_batch = true,
  });
  ops.push_back(OpDef{
      .name = "layout",
      .op_class = OpClass::kPointwise,
      .doc = "Permutes the image to HWC (height, width, channel) or CHW (channel-first, as "
             "PyTorch models expect).",
      .params = {ParamDef{.name = "to",
                          .type = ParamType::kEnum,
                          .doc = "Target layout: HWC or CHW.",
                          .required = true,
                          .choices = {"HWC", "CHW"}}},
      .infer = [](std::span<const TensorType> inputs,
                  const ParamList& p) -> Result<std::vector<TensorType>> {
        auto in = PointwiseInput("layout", inputs);
        if (!in) return std::unexpected(in.error());
        const Layout to = *ParseLayout(P(p, "to").AsString());
        const int64_t h = in->dims[in->height_axis()], w = in->dims[in->width_axis()],
                      c = in->dims[in->channel_axis()];
        return std::vector<TensorType>{Image(in->dtype, to, h, w, c)};
      },
      .reference = LayoutRef,
      .fusion = FusionRole::kPointwise,
      .gpu_batch = true,
  });
  ops.push_back(OpDef{
      .name = "cast",
      .op_class = OpClass::kPointwise,
      .doc = "Converts the element type; to uint8 rounds half to even and saturates, to "
             "float16/bfloat16 rounds to nearest even.",
      .params = {ParamDef{.name = "dtype",
                          .type = ParamType::kEnum,
                          .doc = "Target element type.",
                          .required = true,
                          .choices = {"uint8", "float16", "bfloat16", "float32"}}},
      .infer = [](std::span<const TensorType> inputs,
                  const ParamList& p) -> Result<std::vector<TensorType>> {
        auto in = PointwiseInput("cast", inputs);
        if (!in) return std::unexpected(in.error());
        TensorType out = *in;
        out.dtype = *ParseDType(P(p, "dtype").AsString());
        return std::vector<TensorType>{out};
      },
      .reference = CastRef,
      .fusion = FusionRole::kPointwise,
      .gpu_batch = true,
  });
}

}  // namespace sluice
