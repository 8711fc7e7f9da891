// Colour ops (class pointwise): color_jitter, grayscale. Both accept uint8 or
// float images in either layout and keep the dtype. Value range: uint8 images
// are in [0, 255]; float images are taken to be in [0, 1] (torchvision's
// convention), and results are clamped to that range.
#include "ops/families.h"

namespace sluice {
namespace {

using namespace ops_internal;

Result<TensorType> ColorInput(std::string_view op, std::span<const TensorType> inputs) {
  SLUICE_RETURN_IF_ERROR(ExpectNumInputs(op, inputs, 1));
  SLUICE_RETURN_IF_ERROR(ExpectImage(op, inputs[0]));
  const TensorType& t = inputs[0];
  const int64_t c = t.dims[t.channel_axis()];
  if (c != 1 && c != 3) {
    return MakeError(ErrorCode::kInvalidSpec,
                     "`" + std::string(op) + "` expects a 1- or 3-channel image, got " +
                         t.ToString(),
                     "decode with color: rgb or color: gray");
  }
  return t;
}

ParamDef JitterParam(std::string name, std::string what) {
  return ParamDef{.name = std::move(name),
                  .type = ParamType::kFloat,
                  .doc = "How much to jitter " + what + ": factor drawn uniformly from "
                         "[max(0, 1 - v), 1 + v]; 0 leaves it unchanged.",
                  .default_value = VFloat(0.0),
                  .min = 0.0};
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
      .check = [](const ParamList& p) {
        std::vector<ParamIssue> issues;
        const int64_t n = P(p, "num_output_channels").AsInt();
        if (n != 1 && n != 3) {
          issues.push_back({"num_output_channels",
                            "num_output_channels must be 1 or 3, got " + std::to_string(n),
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
  });
}

}  // namespace sluice
