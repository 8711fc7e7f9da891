// Test helper: spec texts the plan writer and plan document tests share.
#pragma once

namespace sluice::plan_test_specs {

// Two fields from two decodes of the same file: `x` fuses, `y` (after
// color_jitter) runs on the reference implementations.
inline constexpr const char* kMixed =
    "sluice: 1\nname: mixed\nsource: {format: image_folder, path: /d}\ngraph:\n"
    "  - decode_jpeg: {in: jpg, out: a}\n"
    "  - center_crop: {size: [16, 16], out: x}\n"
    "  - decode_jpeg: {in: jpg, out: b}\n"
    "  - color_jitter: {saturation: 0.5}\n"
    "  - center_crop: {size: [8, 8], out: y}\n"
    "batch: {size: 4, fields: {x: x, y: y, label: cls}}\n";

}  // namespace sluice::plan_test_specs
