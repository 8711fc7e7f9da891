// MakeDecoder: the decode op name -> Decoder table.
//
// Adding a decoder: write its class (one file pair under runtime/decode/, with
// a static Create(const ParamList&)), then add its header and one row to
// kDecoders below. The op itself (params, type rule, reference) lives in
// ops/decode_ops.cc.
#include <algorithm>
#include <array>
#include <string>

#include "runtime/decode/decoder.h"
#include "runtime/decode/image_decoder.h"
#include "runtime/decode/jpeg_decoder.h"
#include "runtime/decode/png_decoder.h"

namespace sluice::runtime {
namespace {

struct DecoderEntry {
  std::string_view op;
  Result<std::unique_ptr<Decoder>> (*create)(const ParamList& params);
};

constexpr auto kDecoders = std::to_array<DecoderEntry>({
    {"decode_jpeg", &JpegDecoder::Create},
    {"decode_png", &PngDecoder::Create},
    {"decode_image", &ImageDecoder::Create},
});

std::string JoinNames() {
  std::string names;
  for (const DecoderEntry& e : kDecoders) {
    if (!names.empty()) names += ", ";
    names += e.op;
  }
  return names;
}

}  // namespace

Result<std::unique_ptr<Decoder>> MakeDecoder(std::string_view op, const ParamList& params) {
  for (const DecoderEntry& e : kDecoders) {
    if (e.op == op) return e.create(params);
  }
  return MakeError(ErrorCode::kUnsupported,
                   "no decoder for op `" + std::string(op) + "`; this build has: " + JoinNames());
}

std::vector<std::string_view> DecoderNames() {
  std::vector<std::string_view> names;
  for (const DecoderEntry& e : kDecoders) names.push_back(e.op);
  return names;
}

Result<std::string> DecoderEnumParam(const ParamList& params, std::string_view op,
                                     const std::string& name, std::string_view fallback,
                                     std::initializer_list<std::string_view> choices) {
  const ParamValue* v = FindParam(params, name);
  if (v == nullptr) return std::string(fallback);
  const std::string* s = std::get_if<std::string>(&v->value);
  if (s != nullptr && std::find(choices.begin(), choices.end(), *s) != choices.end()) return *s;
  std::string allowed;
  for (std::string_view c : choices) {
    if (!allowed.empty()) allowed += " | ";
    allowed += c;
  }
  return MakeError(ErrorCode::kInvalidArgument, std::string(op) + ": param `" + name + "` is " +
                                                    v->ToString() + ", expected " + allowed);
}

}  // namespace sluice::runtime
