// Reference implementations on small hand-computed inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <tuple>

#include "ops/random.h"
#include "ops/reference/resample.h"
#include "ops/registry.h"

namespace sluice {
namespace {

ParamValue Ints(std::vector<int64_t> v) { return ParamValue{std::move(v)}; }
ParamValue Floats(std::vector<double> v) { return ParamValue{std::move(v)}; }
ParamValue Str(std::string s) { return ParamValue{std::move(s)}; }

RefTensor RunOp(const std::string& op, const RefTensor& in, ParamList params,
                SampleRng* rng = nullptr) {
  RefContext ctx{rng};
  auto out = FindOp(op)->reference(in, params, ctx);
  EXPECT_TRUE(out) << op << ": " << (out ? "" : out.error().ToString());
  return out ? *out : RefTensor{};
}

// HWC image with value f(y, x, c).
template <class F>
RefTensor MakeImage(DType dtype, int64_t h, int64_t w, int64_t c, F f) {
  RefTensor t = RefTensor::Zeros(dtype, Layout::kHWC, {h, w, c});
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int64_t ch = 0; ch < c; ++ch) t.at(y, x, ch) = static_cast<float>(f(y, x, ch));
  return t;
}

TEST(ResizeRefTest, ConstantStaysConstant) {
  const RefTensor in =
      MakeImage(DType::kUInt8, 17, 23, 3, [](auto, auto, auto c) { return 40 + c; });
  for (const char* interp : {"bilinear", "bicubic", "area", "nearest"}) {
    for (bool aa : {true, false}) {
      for (auto size : {std::vector<int64_t>{5, 7}, std::vector<int64_t>{40, 31}}) {
        const RefTensor out = RunOp(
            "resize", in,
            {{"size", Ints(size)}, {"interpolation", Str(interp)}, {"antialias", ParamValue{aa}}});
        ASSERT_EQ(out.type.dims, (std::vector<int64_t>{size[0], size[1], 3}));
        for (int64_t y = 0; y < out.height(); ++y)
          for (int64_t x = 0; x < out.width(); ++x)
            for (int64_t c = 0; c < 3; ++c) ASSERT_EQ(out.at(y, x, c), 40 + c) << interp;
      }
    }
  }
}

TEST(ResizeRefTest, AreaHalvingAverages) {
  const RefTensor in =
      MakeImage(DType::kFloat32, 4, 4, 1, [](auto y, auto x, auto) { return y * 4 + x; });
  const RefTensor out =
      RunOp("resize", in, {{"size", Ints({2, 2})}, {"interpolation", Str("area")}});
  EXPECT_FLOAT_EQ(out.at(0, 0, 0), (0 + 1 + 4 + 5) / 4.0f);
  EXPECT_FLOAT_EQ(out.at(0, 1, 0), (2 + 3 + 6 + 7) / 4.0f);
  EXPECT_FLOAT_EQ(out.at(1, 1, 0), (10 + 11 + 14 + 15) / 4.0f);
  // Bilinear with antialias at 2x: the triangle of width 2 gives weights 1/8, 3/8, 3/8, 1/8,
  // renormalised at the border: output 0 sees pixels 0..2 with 3/8, 3/8, 1/8 -> /(7/8).
  const RefTensor row = MakeImage(DType::kFloat32, 1, 4, 1, [](auto, auto x, auto) { return x; });
  const RefTensor b = RunOp("resize", row, {{"size", Ints({1, 2})}});
  EXPECT_NEAR(b.at(0, 0, 0), (0 * 3 + 1 * 3 + 2 * 1) / 7.0, 1e-6);
  EXPECT_NEAR(b.at(0, 1, 0), (1 * 1 + 2 * 3 + 3 * 3) / 7.0, 1e-6);
}

TEST(ResizeRefTest, Uint8RoundsAndShorterSide) {
  const RefTensor in = MakeImage(DType::kUInt8, 1, 2, 1, [](auto, auto x, auto) { return x * 3; });
  const RefTensor out =
      RunOp("resize", in, {{"size", Ints({1, 1})}, {"interpolation", Str("area")}});
  EXPECT_EQ(out.at(0, 0, 0), 2.0f);  // 1.5 rounds half to even -> 2
  const RefTensor tall = RefTensor::Zeros(DType::kUInt8, Layout::kHWC, {300, 200, 3});
  EXPECT_EQ(RunOp("resize", tall, {{"size", Ints({100})}}).type.dims,
            (std::vector<int64_t>{150, 100, 3}));
  const RefTensor wide = RefTensor::Zeros(DType::kUInt8, Layout::kHWC, {3, 10, 1});
  EXPECT_EQ(RunOp("resize", wide, {{"size", Ints({2})}}).type.dims,
            (std::vector<int64_t>{2, 6, 1}));  // int(2 * 10 / 3) = 6
  EXPECT_EQ(
      RunOp("resize", wide, {{"size", Ints({2})}, {"max_size", ParamValue{int64_t{4}}}}).type.dims,
      (std::vector<int64_t>{1, 4, 1}));  // int(4 * 2 / 6) = 1
}

TEST(CropRefTest, CenterCropAndPadding) {
  const RefTensor in =
      MakeImage(DType::kUInt8, 4, 5, 1, [](auto y, auto x, auto) { return 1 + y * 5 + x; });
  // 2x2 from 4x5: top = round(1.0) = 1, left = round(1.5) = 2 (half to even).
  RefTensor out = RunOp("center_crop", in, {{"size", Ints({2})}});
  EXPECT_EQ(out.data, (std::vector<float>{8, 9, 13, 14}));
  // 6x7 from 4x5: padded by 1 on every side, zeros around the image.
  out = RunOp("center_crop", in, {{"size", Ints({6, 7})}});
  ASSERT_EQ(out.type.dims, (std::vector<int64_t>{6, 7, 1}));
  EXPECT_EQ(out.at(0, 0, 0), 0);
  EXPECT_EQ(out.at(1, 1, 0), 1);
  EXPECT_EQ(out.at(4, 5, 0), 20);
  EXPECT_EQ(out.at(5, 6, 0), 0);
  // Odd extra: 5 rows from 4: pad top 0, bottom 1.
  out = RunOp("center_crop", in, {{"size", Ints({5, 5})}});
  EXPECT_EQ(out.at(0, 0, 0), 1);
  EXPECT_EQ(out.at(4, 0, 0), 0);
  out = RunOp("crop", in,
              {{"top", ParamValue{int64_t{3}}},
               {"left", ParamValue{int64_t{4}}},
               {"height", ParamValue{int64_t{2}}},
               {"width", ParamValue{int64_t{2}}}});
  EXPECT_EQ(out.data, (std::vector<float>{20, 0, 0, 0}));
}

TEST(FlipRefTest, FlipTwiceIsIdentity) {
  const RefTensor in =
      MakeImage(DType::kUInt8, 3, 4, 2, [](auto y, auto x, auto c) { return y * 8 + x * 2 + c; });
  SampleRng rng(0, 0, 0, 0);
  ParamList both = {{"horizontal", ParamValue{1.0}}, {"vertical", ParamValue{1.0}}};
  const RefTensor once = RunOp("random_flip", in, both, &rng);
  EXPECT_EQ(once.at(0, 0, 1), in.at(2, 3, 1));
  EXPECT_NE(once.data, in.data);
  EXPECT_EQ(RunOp("random_flip", once, both, &rng).data, in.data);
  const RefTensor none = RunOp("random_flip", in, {{"horizontal", ParamValue{0.0}}}, &rng);
  EXPECT_EQ(none.data, in.data);
  const RefTensor h = RunOp("random_flip", in, {{"horizontal", ParamValue{1.0}}}, &rng);
  EXPECT_EQ(h.at(1, 0, 0), in.at(1, 3, 0));
}

TEST(PadRefTest, Modes) {
  const RefTensor in = MakeImage(DType::kUInt8, 1, 3, 1, [](auto, auto x, auto) { return x + 1; });
  auto row = [](const RefTensor& t, int64_t y) {
    std::vector<float> r;
    for (int64_t x = 0; x < t.width(); ++x) r.push_back(t.at(y, x, 0));
    return r;
  };
  ParamList p = {{"padding", Ints({2, 0})}, {"fill", ParamValue{7.6}}};
  EXPECT_EQ(row(RunOp("pad", in, p), 0), (std::vector<float>{8, 8, 1, 2, 3, 8, 8}));
  p["mode"] = Str("edge");
  EXPECT_EQ(row(RunOp("pad", in, p), 0), (std::vector<float>{1, 1, 1, 2, 3, 3, 3}));
  p["mode"] = Str("reflect");
  EXPECT_EQ(row(RunOp("pad", in, p), 0), (std::vector<float>{3, 2, 1, 2, 3, 2, 1}));
  const RefTensor out = RunOp("pad", in, {{"padding", Ints({0, 1, 0, 2})}});
  EXPECT_EQ(out.type.dims, (std::vector<int64_t>{4, 3, 1}));
  EXPECT_EQ(row(out, 1), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(row(out, 3), (std::vector<float>{0, 0, 0}));
}

TEST(RandomResizedCropRefTest, FallbackAndDeterminism) {
  // Scale [1, 1] with ratio [2, 3] on a square image can never fit: every try has
  // w = sqrt(A * r) > W. The fallback clamps the ratio to 2: full width, h = round(W / 2).
  SampleRng rng(1, 0, 5, 2);
  const ref::CropBox box = ref::RandomResizedCropBox(10, 10, {1.0, 1.0}, {2.0, 3.0}, rng);
  EXPECT_EQ(box, (ref::CropBox{2, 0, 5, 10}));
  // Within range: the whole image.
  EXPECT_EQ(ref::RandomResizedCropBox(10, 10, {1.0, 1.0}, {1.0, 1.0}, rng),
            (ref::CropBox{0, 0, 10, 10}));
  // A tall image with a wide-only ratio range: full width, height = round(W / ratio[0])... here
  // in_ratio 0.5 < 1 -> h = round(8 / 1) = 8, centred in 16 rows.
  EXPECT_EQ(ref::RandomResizedCropBox(16, 8, {1.0, 1.0}, {1.0, 2.0}, rng),
            (ref::CropBox{4, 0, 8, 8}));

  const RefTensor in = MakeImage(DType::kUInt8, 40, 50, 3,
                                 [](auto y, auto x, auto c) { return (y * 7 + x * 3 + c) % 256; });
  ParamList p = {{"size", Ints({8, 8})}};
  SampleRng a(3, 1, 99, 4), b(3, 1, 99, 4), c(3, 1, 100, 4);
  const RefTensor ra = RunOp("random_resized_crop", in, p, &a);
  EXPECT_EQ(ra.type.dims, (std::vector<int64_t>{8, 8, 3}));
  EXPECT_EQ(RunOp("random_resized_crop", in, p, &b).data, ra.data);
  // Boxes for many keys stay inside the image and vary.
  std::set<std::tuple<int64_t, int64_t, int64_t, int64_t>> boxes;
  for (uint64_t s = 0; s < 50; ++s) {
    SampleRng r(0, 0, s, 1);
    const ref::CropBox bx = ref::RandomResizedCropBox(40, 50, {0.08, 1.0}, {0.75, 4.0 / 3}, r);
    ASSERT_GE(bx.top, 0);
    ASSERT_GE(bx.left, 0);
    ASSERT_LE(bx.top + bx.height, 40);
    ASSERT_LE(bx.left + bx.width, 50);
    ASSERT_GT(bx.height, 0);
    ASSERT_GT(bx.width, 0);
    boxes.insert({bx.top, bx.left, bx.height, bx.width});
  }
  EXPECT_GT(boxes.size(), 40u);
  (void)c;
}

TEST(NormalizeRefTest, Arithmetic) {
  const RefTensor in =
      MakeImage(DType::kUInt8, 1, 1, 3, [](auto, auto, auto c) { return 51 * (c + 1); });
  const RefTensor out = RunOp("normalize", in,
                              {{"mean", Floats({0.5, 0.5, 0.5})},
                               {"std", Floats({0.25, 0.5, 1.0})},
                               {"scale", ParamValue{255.0}}});
  EXPECT_EQ(out.type.dtype, DType::kFloat32);
  EXPECT_NEAR(out.at(0, 0, 0), (0.2 - 0.5) / 0.25, 1e-6);
  EXPECT_NEAR(out.at(0, 0, 1), (0.4 - 0.5) / 0.5, 1e-6);
  EXPECT_NEAR(out.at(0, 0, 2), (0.6 - 0.5) / 1.0, 1e-6);
  RefTensor half = in;
  half.type.dtype = DType::kFloat16;
  const RefTensor h = RunOp("normalize", half, {{"mean", Floats({0})}, {"std", Floats({3})}});
  EXPECT_EQ(h.type.dtype, DType::kFloat16);
  EXPECT_EQ(h.at(0, 0, 0), RoundToDType(17.0f, DType::kFloat16));
  EXPECT_EQ(h.at(0, 0, 2), RoundToDType(51.0f, DType::kFloat16));
}

TEST(CastRefTest, Rounding) {
  RefTensor in = RefTensor::Zeros(DType::kFloat32, Layout::kHWC, {1, 4, 1});
  in.data = {0.1f, 2.5f, -1.0f, 300.0f};
  RefTensor h = RunOp("cast", in, {{"dtype", Str("float16")}});
  EXPECT_EQ(h.type.dtype, DType::kFloat16);
  EXPECT_EQ(h.data[0], 0.0999755859375f);
  RefTensor u = RunOp("cast", in, {{"dtype", Str("uint8")}});
  EXPECT_EQ(u.data, (std::vector<float>{0, 2, 0, 255}));
  RefTensor b = RunOp("cast", in, {{"dtype", Str("bfloat16")}});
  EXPECT_EQ(b.data[0], 0.10009765625f);
}

TEST(LayoutRefTest, Permutes) {
  const RefTensor in =
      MakeImage(DType::kUInt8, 2, 3, 2, [](auto y, auto x, auto c) { return y * 6 + x * 2 + c; });
  const RefTensor chw = RunOp("layout", in, {{"to", Str("CHW")}});
  EXPECT_EQ(chw.type.ToString(), "uint8[2,2,3] CHW");
  EXPECT_EQ(chw.data, (std::vector<float>{0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11}));
  EXPECT_EQ(RunOp("layout", chw, {{"to", Str("HWC")}}).data, in.data);
}

TEST(ColorRefTest, GrayscaleAndJitter) {
  const RefTensor in = MakeImage(DType::kUInt8, 1, 2, 3, [](auto, auto x, auto c) {
    return x == 0 ? (c == 0 ? 100 : c == 1 ? 50 : 200) : 10;
  });
  RefTensor g = RunOp("grayscale", in, {});
  EXPECT_EQ(g.type.dims, (std::vector<int64_t>{1, 2, 1}));
  EXPECT_EQ(g.at(0, 0, 0), 82);  // 29.9 + 29.35 + 22.8 = 82.05
  EXPECT_EQ(g.at(0, 1, 0), 10);
  g = RunOp("grayscale", in, {{"num_output_channels", ParamValue{int64_t{3}}}});
  EXPECT_EQ(g.at(0, 0, 2), 82);

  SampleRng rng(0, 0, 0, 0);
  // All factors zero-width: identity.
  EXPECT_EQ(RunOp("color_jitter", in, {}, &rng).data, in.data);
  // Brightness factor in [0.5, 1.5]: every value scales by the same factor (before rounding).
  SampleRng r1(4, 0, 0, 0), r2(4, 0, 0, 0);
  const double fb = r2.Uniform(0.5, 1.5);
  const RefTensor j = RunOp("color_jitter", in, {{"brightness", ParamValue{0.5}}}, &r1);
  EXPECT_EQ(j.at(0, 0, 2),
            RoundToDType(static_cast<float>(std::min(255.0, 200 * fb)), DType::kUInt8));
  EXPECT_EQ(j.at(0, 1, 0), RoundToDType(static_cast<float>(10 * fb), DType::kUInt8));
  // Saturation 0 factor range [0, 2] applied to a gray image leaves it unchanged.
  const RefTensor gray3 =
      MakeImage(DType::kUInt8, 2, 2, 3, [](auto y, auto x, auto) { return 30 + y * 2 + x; });
  SampleRng r3(9, 0, 0, 0);
  EXPECT_EQ(RunOp("color_jitter", gray3, {{"saturation", ParamValue{1.0}}}, &r3).data, gray3.data);
}

TEST(ReferenceTest, RejectsEncodedInput) {
  RefContext ctx;
  auto r = FindOp("cast")->reference(RefTensor::Encoded({1, 2}), {{"dtype", Str("uint8")}}, ctx);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("encoded bytes"), std::string::npos);
}

}  // namespace
}  // namespace sluice
