// Reading, writing and describing hardware profiles (common/hardware_profile.h).
//
// Parsing walks the yaml-cpp tree by hand so that every problem names the
// file:line:col of the offending key or value and says how to fix it. The
// field table below (kFields) is the single description of the format: the
// parser, the writer's order and the JSON Schema all come from it, so they
// cannot disagree. No yaml-cpp exception escapes.
#include "common/hardware_profile.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <vector>

namespace sluice {
namespace {

enum class Kind {
  kString,
  kInt,          // integer in [min_int, max_int]
  kPositive,     // number > 0 (a rate or a cost that cannot be zero)
  kNonNegative,  // number >= 0 (an overhead or a mean that may be unknown)
};

// One field of a section: where it lives in the struct and what it takes.
template <class S>
struct Field {
  const char* name;
  Kind kind;
  bool required;
  const char* doc;
  std::string S::*str = nullptr;
  double S::*num = nullptr;
  int S::*integer = nullptr;
  int min_int = 0;
  int max_int = std::numeric_limits<int>::max();
};

using Top = HardwareProfile;
using Cpu = HardwareProfile::Cpu;
using Storage = HardwareProfile::Storage;
using Gpu = HardwareProfile::Gpu;

template <class S>
Field<S> Str(const char* name, bool required, std::string S::*p, const char* doc) {
  Field<S> f{name, Kind::kString, required, doc};
  f.str = p;
  return f;
}
template <class S>
Field<S> Num(const char* name, Kind kind, bool required, double S::*p, const char* doc) {
  Field<S> f{name, kind, required, doc};
  f.num = p;
  return f;
}
template <class S>
Field<S> Int(const char* name, int min, int max, bool required, int S::*p, const char* doc) {
  Field<S> f{name, Kind::kInt, required, doc};
  f.integer = p;
  f.min_int = min;
  f.max_int = max;
  return f;
}

const std::vector<Field<Top>>& TopFields() {
  static const std::vector<Field<Top>> f = {
      Str<Top>("machine", true, &Top::machine, "Free text: which machine this is."),
      Str<Top>("measured_at", false, &Top::measured_at, "When it was measured (ISO 8601 UTC)."),
      Str<Top>("sluice_version", false, &Top::sluice_version,
               "The Sluice version that measured it."),
  };
  return f;
}

const std::vector<Field<Cpu>>& CpuFields() {
  static const std::vector<Field<Cpu>> f = {
      Int<Cpu>("cores", 1, HardwareProfile::kMaxCores, true, &Cpu::cores,
               "Hardware threads usable by the loader."),
      Str<Cpu>("model", false, &Cpu::model, "CPU model name."),
      Str<Cpu>("simd", false, &Cpu::simd, "Best kernel target: sse41, avx2 or avx512."),
      Num<Cpu>("decode_mpix_per_s", Kind::kPositive, true, &Cpu::decode_mpix_per_s,
               "libjpeg-turbo full decode, megapixels per second per core."),
      Num<Cpu>("decode_fixed_s", Kind::kNonNegative, false, &Cpu::decode_fixed_s,
               "Per-image decode overhead in seconds (headers, setup)."),
      Num<Cpu>("resample_ns_per_px", Kind::kPositive, true, &Cpu::resample_ns_per_px,
               "Fused resample kernel, nanoseconds per output pixel (all channels)."),
      Num<Cpu>("pointwise_ns_per_elem", Kind::kPositive, true, &Cpu::pointwise_ns_per_elem,
               "Fused pointwise tail, nanoseconds per output element."),
      Num<Cpu>("memory_bandwidth_gbps", Kind::kPositive, true, &Cpu::memory_bandwidth_gbps,
               "One-core memcpy bandwidth, GB/s (1e9 bytes)."),
  };
  return f;
}

const std::vector<Field<Storage>>& StorageFields() {
  static const std::vector<Field<Storage>> f = {
      Str<Storage>("path", true, &Storage::path, "The storage path that was measured."),
      Num<Storage>("read_mbps", Kind::kPositive, true, &Storage::read_mbps,
                   "Sequential whole-file reads, MB/s (1e6 bytes)."),
      Num<Storage>("latency_s", Kind::kNonNegative, true, &Storage::latency_s,
                   "Open plus first bytes of a file, seconds."),
      Num<Storage>("mean_file_bytes", Kind::kNonNegative, false, &Storage::mean_file_bytes,
                   "Mean size of the dataset's JPEGs (0: none sampled)."),
      Num<Storage>("mean_width", Kind::kNonNegative, false, &Storage::mean_width,
                   "Mean width of those JPEGs in pixels (0: none sampled)."),
      Num<Storage>("mean_height", Kind::kNonNegative, false, &Storage::mean_height,
                   "Mean height of those JPEGs in pixels (0: none sampled)."),
      Num<Storage>("decode_mpix_per_s", Kind::kNonNegative, false, &Storage::decode_mpix_per_s,
                   "Full decode of those JPEGs, megapixels/s per core, per-image overhead "
                   "included (0: none decoded)."),
  };
  return f;
}

const std::vector<Field<Gpu>>& GpuFields() {
  static const std::vector<Field<Gpu>> f = {
      Str<Gpu>("name", true, &Gpu::name, "CUDA device name."),
      Int<Gpu>("device", 0, std::numeric_limits<int>::max(), false, &Gpu::device,
               "CUDA device ordinal."),
      Num<Gpu>("h2d_pinned_gbps", Kind::kPositive, true, &Gpu::h2d_pinned_gbps,
               "Host-to-device copy from pinned memory, GB/s."),
      Num<Gpu>("h2d_pageable_gbps", Kind::kPositive, true, &Gpu::h2d_pageable_gbps,
               "Host-to-device copy from pageable memory, GB/s."),
      Num<Gpu>("pointwise_gelem_per_s", Kind::kPositive, true, &Gpu::pointwise_gelem_per_s,
               "Batch-wide pointwise kernel, 1e9 elements per second."),
      Num<Gpu>("launch_s", Kind::kNonNegative, false, &Gpu::launch_s,
               "Per kernel launch overhead, seconds."),
  };
  return f;
}

// ---- parsing ----------------------------------------------------------------

std::string Tick(const std::string& s) { return "`" + s + "`"; }

std::string Describe(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null: return "nothing";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a map";
    case YAML::NodeType::Scalar: return "`" + n.Scalar() + "`";
    default: return "an undefined value";
  }
}

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t prev = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cur = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] == b[j - 1] ? 0 : 1)});
      prev = cur;
    }
  }
  return row[b.size()];
}

class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  SourceMark MarkOf(const YAML::Node& n, const SourceMark& fallback) const {
    const YAML::Mark m = n.Mark();
    if (m.line < 0 || m.column < 0) return fallback;
    return SourceMark{file_, m.line + 1, m.column + 1};
  }
  SourceMark At(const YAML::Mark& m) const {
    if (m.line < 0 || m.column < 0) return SourceMark{file_, 1, 1};
    return SourceMark{file_, m.line + 1, m.column + 1};
  }

  // Checks a map's keys against `known`; returns key -> (key mark, value).
  Result<std::map<std::string, std::pair<SourceMark, YAML::Node>>> Keys(
      const YAML::Node& map, const std::string& where, const std::vector<std::string>& known,
      const SourceMark& map_mark) const {
    std::map<std::string, std::pair<SourceMark, YAML::Node>> out;
    for (auto it = map.begin(); it != map.end(); ++it) {
      SourceMark km = MarkOf(it->first, map_mark);
      if (!it->first.IsScalar()) {
        return MakeError(ErrorCode::kInvalidSpec, "a key in " + where + " is not a name",
                         "keys are plain names such as " + Tick(known.front()), km);
      }
      const std::string key = it->first.Scalar();
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        std::string best;
        size_t best_d = 3;
        for (const std::string& k : known) {
          size_t d = EditDistance(key, k);
          if (d < best_d) best_d = d, best = k;
        }
        std::string hint = best.empty() ? "" : "did you mean " + Tick(best) + "? ";
        std::string list;
        for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
        return MakeError(ErrorCode::kInvalidSpec, "unknown field " + Tick(key) + " in " + where,
                         hint + "valid fields: " + list, km);
      }
      if (out.count(key)) {
        return MakeError(ErrorCode::kInvalidSpec, "field " + Tick(key) + " given twice in " + where,
                         "keep only one", km);
      }
      out[key] = {km, it->second};
    }
    return out;
  }

  template <class S>
  Status Section(const YAML::Node& map, const std::string& where, const SourceMark& map_mark,
                 const std::vector<Field<S>>& fields, S& s,
                 const std::vector<std::string>& extra_keys = {}) const {
    if (!map.IsMap()) {
      return MakeError(ErrorCode::kInvalidSpec,
                       where + " must be a map of fields, got " + Describe(map),
                       "write it as `" + where + ":` followed by indented `name: value` lines",
                       map_mark);
    }
    std::vector<std::string> known = extra_keys;
    for (const Field<S>& f : fields) known.push_back(f.name);
    auto keys = Keys(map, where, known, map_mark);
    if (!keys) return std::unexpected(keys.error());
    for (const Field<S>& f : fields) {
      auto k = keys->find(f.name);
      const std::string qual = where == "the profile" ? f.name : where + "." + f.name;
      if (k == keys->end()) {
        if (!f.required) continue;
        return MakeError(ErrorCode::kInvalidSpec,
                         "missing required field " + Tick(qual),
                         std::string("add `") + f.name + ": ...` (" + f.doc + ")", map_mark);
      }
      const SourceMark vm = k->second.second.IsNull() ? k->second.first
                                                      : MarkOf(k->second.second, k->second.first);
      SLUICE_RETURN_IF_ERROR(Value(k->second.second, qual, f, vm, s));
    }
    return Ok();
  }

  template <class S>
  Status Value(const YAML::Node& v, const std::string& qual, const Field<S>& f,
               const SourceMark& mark, S& s) const {
    auto type_error = [&](const std::string& want, const std::string& example) {
      return MakeError(ErrorCode::kInvalidSpec,
                       Tick(qual) + " must be " + want + ", got " + Describe(v),
                       "for example `" + std::string(f.name) + ": " + example + "`", mark);
    };
    switch (f.kind) {
      case Kind::kString:
        if (!v.IsScalar()) return type_error("a string", "\"...\"");
        s.*f.str = v.Scalar();
        return Ok();
      case Kind::kInt: {
        int x = 0;
        if (!v.IsScalar() || !YAML::convert<int>::decode(v, x)) {
          return type_error("an integer", std::to_string(std::max(f.min_int, 1)));
        }
        if (x < f.min_int) {
          return MakeError(ErrorCode::kInvalidSpec,
                           Tick(qual) + " must be at least " + std::to_string(f.min_int) +
                               ", got " + std::to_string(x),
                           std::string("it counts ") + f.doc, mark);
        }
        if (x > f.max_int) {
          return MakeError(ErrorCode::kInvalidSpec,
                           Tick(qual) + " must be at most " + std::to_string(f.max_int) +
                               ", got " + std::to_string(x),
                           "the loader (and `sluice tune`) runs at most " +
                               std::to_string(f.max_int) +
                               " threads; write the number of cores the loader may use",
                           mark);
        }
        s.*f.integer = x;
        return Ok();
      }
      case Kind::kPositive:
      case Kind::kNonNegative: {
        double x = 0;
        if (!v.IsScalar() || !YAML::convert<double>::decode(v, x)) {
          return type_error("a number", f.kind == Kind::kPositive ? "1.5" : "0");
        }
        if (!std::isfinite(x)) {
          return MakeError(ErrorCode::kInvalidSpec, Tick(qual) + " must be finite, got " +
                                                        Describe(v),
                           "re-measure with `sluice profile`", mark);
        }
        if (f.kind == Kind::kPositive && !(x > 0)) {
          return MakeError(ErrorCode::kInvalidSpec,
                           Tick(qual) + " must be positive, got " + v.Scalar(),
                           std::string(f.doc) +
                               " A rate of zero would predict no throughput; re-measure with "
                               "`sluice profile`",
                           mark);
        }
        if (f.kind == Kind::kNonNegative && x < 0) {
          return MakeError(ErrorCode::kInvalidSpec,
                           Tick(qual) + " must not be negative, got " + v.Scalar(),
                           std::string(f.doc) + " Use 0 when unknown", mark);
        }
        s.*f.num = x;
        return Ok();
      }
    }
    return Ok();
  }

  Result<HardwareProfile> Profile(const std::string& text) const {
    YAML::Node root;
    try {
      root = YAML::Load(text);
    } catch (const YAML::ParserException& e) {
      return MakeError(ErrorCode::kInvalidSpec, "invalid YAML: " + e.msg,
                       "check the brackets, colons and indentation on this line and the one "
                       "before",
                       At(e.mark));
    } catch (const YAML::Exception& e) {
      return MakeError(ErrorCode::kInvalidSpec, "invalid YAML: " + e.msg, "", At(e.mark));
    }
    try {
      return Walk(root);
    } catch (const YAML::Exception& e) {
      return MakeError(ErrorCode::kInvalidSpec, "cannot read the profile: " + e.msg, "",
                       At(e.mark));
    }
  }

 private:
  Result<HardwareProfile> Walk(const YAML::Node& root) const {
    const SourceMark start{file_, 1, 1};
    if (!root.IsDefined() || root.IsNull()) {
      return MakeError(ErrorCode::kInvalidSpec, "the hardware profile is empty",
                       "create one with `sluice profile -o hw.yaml`", start);
    }
    if (!root.IsMap()) {
      return MakeError(ErrorCode::kInvalidSpec,
                       "a hardware profile must be a map, got " + Describe(root),
                       "create one with `sluice profile -o hw.yaml`", MarkOf(root, start));
    }
    HardwareProfile p;
    SourceMark root_mark = MarkOf(root, start);
    // format_version first: a file of another version is reported as such,
    // not as a missing field of this one.
    const YAML::Node version = root["format_version"];
    if (!version) {
      return MakeError(ErrorCode::kInvalidSpec, "missing required field `format_version`",
                       "add `format_version: " + std::to_string(HardwareProfile::kFormatVersion) +
                           "` at the top",
                       root_mark);
    }
    int v = 0;
    SourceMark vm = MarkOf(version, root_mark);
    if (!version.IsScalar() || !YAML::convert<int>::decode(version, v)) {
      return MakeError(ErrorCode::kInvalidSpec,
                       "`format_version` must be an integer, got " + Describe(version),
                       "write `format_version: " +
                           std::to_string(HardwareProfile::kFormatVersion) + "`",
                       vm);
    }
    if (v != HardwareProfile::kFormatVersion) {
      return MakeError(ErrorCode::kInvalidSpec,
                       "unsupported format_version " + std::to_string(v) + "; this Sluice reads " +
                           std::to_string(HardwareProfile::kFormatVersion),
                       "re-measure the machine with this Sluice: `sluice profile -o hw.yaml`", vm);
    }
    SLUICE_RETURN_IF_ERROR(
        Section(root, "the profile", root_mark, TopFields(), p,
                {"format_version", "cpu", "storage", "gpu"}));
    const YAML::Node cpu = root["cpu"];
    if (!cpu) {
      return MakeError(ErrorCode::kInvalidSpec, "missing required field `cpu`",
                       "add a `cpu:` section (cores, decode_mpix_per_s, resample_ns_per_px, "
                       "pointwise_ns_per_elem, memory_bandwidth_gbps)",
                       root_mark);
    }
    SLUICE_RETURN_IF_ERROR(Section(cpu, "cpu", MarkOf(cpu, root_mark), CpuFields(), p.cpu));
    static const std::set<std::string> kSimd = {"sse41", "avx2", "avx512"};
    if (!kSimd.count(p.cpu.simd)) {
      return MakeError(ErrorCode::kInvalidSpec, "unknown cpu.simd " + Tick(p.cpu.simd),
                       "valid: sse41, avx2, avx512",
                       MarkOf(cpu["simd"], MarkOf(cpu, root_mark)));
    }
    if (const YAML::Node st = root["storage"]; st && !st.IsNull()) {
      Storage s;
      SLUICE_RETURN_IF_ERROR(Section(st, "storage", MarkOf(st, root_mark), StorageFields(), s));
      p.storage = s;
    }
    if (const YAML::Node g = root["gpu"]; g && !g.IsNull()) {
      Gpu gpu;
      SLUICE_RETURN_IF_ERROR(Section(g, "gpu", MarkOf(g, root_mark), GpuFields(), gpu));
      p.gpu = gpu;
    }
    return p;
  }

  std::string file_;
};

// ---- writing ----------------------------------------------------------------

// Shortest text that reads back to the same double.
std::string Number(double x) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

// A YAML double-quoted string.
std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char b[8];
          std::snprintf(b, sizeof b, "\\x%02x", c);
          out += b;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

template <class S>
void WriteFields(std::ostringstream& out, const std::vector<Field<S>>& fields, const S& s,
                 const std::string& indent) {
  size_t width = 0;
  for (const Field<S>& f : fields) width = std::max(width, std::string(f.name).size());
  for (const Field<S>& f : fields) {
    std::string value;
    switch (f.kind) {
      case Kind::kString: value = Quote(s.*f.str); break;
      case Kind::kInt: value = std::to_string(s.*f.integer); break;
      default: value = Number(s.*f.num); break;
    }
    std::string line = indent + f.name + ": " + value;
    out << line;
    size_t col = indent.size() + width + 16;
    out << std::string(line.size() < col ? col - line.size() : 1, ' ') << "# " << f.doc << "\n";
  }
}

nlohmann::json FieldSchema(Kind kind, int min_int, int max_int, const char* doc) {
  nlohmann::json j;
  j["description"] = doc;
  switch (kind) {
    case Kind::kString: j["type"] = "string"; break;
    case Kind::kInt:
      j["type"] = "integer";
      j["minimum"] = min_int;
      if (max_int < std::numeric_limits<int>::max()) j["maximum"] = max_int;
      break;
    case Kind::kPositive:
      j["type"] = "number";
      j["exclusiveMinimum"] = 0;
      break;
    case Kind::kNonNegative:
      j["type"] = "number";
      j["minimum"] = 0;
      break;
  }
  return j;
}

template <class S>
nlohmann::json SectionSchema(const std::vector<Field<S>>& fields, const char* doc) {
  nlohmann::json j;
  j["type"] = "object";
  j["description"] = doc;
  j["additionalProperties"] = false;
  nlohmann::json props = nlohmann::json::object();
  nlohmann::json required = nlohmann::json::array();
  for (const Field<S>& f : fields) {
    props[f.name] = FieldSchema(f.kind, f.min_int, f.max_int, f.doc);
    if (f.required) required.push_back(f.name);
  }
  j["properties"] = props;
  j["required"] = required;
  return j;
}

}  // namespace

Result<HardwareProfile> ParseHardwareProfile(const std::string& text, const std::string& name) {
  return Reader(name).Profile(text);
}

Result<HardwareProfile> LoadHardwareProfile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return MakeError(ErrorCode::kNotFound, "cannot open hardware profile `" + path + "`",
                     "measure this machine with `sluice profile -o " + path + "`");
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return MakeError(ErrorCode::kIo, "cannot read hardware profile `" + path + "`");
  return ParseHardwareProfile(buffer.str(), path);
}

std::string HardwareProfileToYaml(const HardwareProfile& p) {
  std::ostringstream out;
  out << "# Sluice hardware profile (schemas/hardware.schema.json), written by `sluice profile`.\n"
      << "# Rates are per CPU core unless they say otherwise; times in seconds, sizes in bytes.\n"
      << "format_version: " << HardwareProfile::kFormatVersion << "\n";
  WriteFields(out, TopFields(), p, "");
  out << "# CPU: what one core does; the cost model multiplies by the cores it may use.\n"
      << "cpu:\n";
  WriteFields(out, CpuFields(), p.cpu, "  ");
  if (p.storage) {
    out << "# Storage: reads of the measured path, and the JPEGs sampled there.\n"
        << "storage:\n";
    WriteFields(out, StorageFields(), *p.storage, "  ");
  } else {
    out << "# Storage: not measured (pass --data PATH to `sluice profile`).\n";
  }
  if (p.gpu) {
    out << "# GPU: host-to-device bandwidth and batch-wide kernel throughput.\n"
        << "gpu:\n";
    WriteFields(out, GpuFields(), *p.gpu, "  ");
  } else {
    out << "# GPU: none measured.\n"
        << "gpu: null\n";
  }
  return out.str();
}

Status SaveHardwareProfile(const HardwareProfile& profile, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << HardwareProfileToYaml(profile);
  out.close();
  if (!out) return MakeError(ErrorCode::kIo, "cannot write hardware profile `" + path + "`");
  return Ok();
}

std::string HardwareProfileSchema() {
  nlohmann::json j;
  j["$schema"] = "https://json-schema.org/draft/2020-12/schema";
  j["$id"] = "https://sluice.dev/schemas/hardware.schema.json";
  j["title"] = "Sluice hardware profile";
  j["description"] =
      "What `sluice profile` measured on a machine; read by the cost model and `sluice tune`. "
      "Rates are per CPU core unless they say otherwise; times are seconds, sizes bytes.";
  j["type"] = "object";
  j["additionalProperties"] = false;
  nlohmann::json props = SectionSchema(TopFields(), "")["properties"];
  nlohmann::json version;
  version["description"] = "Version of this file format.";
  version["const"] = HardwareProfile::kFormatVersion;
  props["format_version"] = version;
  props["cpu"] = SectionSchema(CpuFields(), "What one CPU core does.");
  props["cpu"]["properties"]["simd"]["enum"] = {"sse41", "avx2", "avx512"};
  nlohmann::json storage = SectionSchema(StorageFields(), "Reads of a storage path; absent when "
                                                          "none was measured.");
  props["storage"] = {{"oneOf", {storage, {{"type", "null"}}}}};
  nlohmann::json gpu =
      SectionSchema(GpuFields(), "A CUDA device; absent or null without one.");
  props["gpu"] = {{"oneOf", {gpu, {{"type", "null"}}}}};
  j["properties"] = props;
  j["required"] = {"format_version", "machine", "cpu"};
  return j.dump(2) + "\n";
}

}  // namespace sluice
