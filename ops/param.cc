#include "ops/param.h"

#include <charconv>
#include <cstdio>
#include <system_error>

namespace sluice {
namespace {

// Shortest text that reads back as the same double ("0.5", "0.08", "1", "1e-05").
std::string FormatDouble(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  if (ec != std::errc()) return "nan";
  return std::string(buf, end);
}

// Double-quoted with JSON-style escapes, so the text form is unambiguous.
std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char esc[8];
          std::snprintf(esc, sizeof(esc), "\\u%04x", static_cast<unsigned>(c));
          out += esc;
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

}  // namespace

std::string ParamTypeName(ParamType type) {
  switch (type) {
    case ParamType::kBool:
      return "bool";
    case ParamType::kInt:
      return "int";
    case ParamType::kFloat:
      return "float";
    case ParamType::kString:
      return "string";
    case ParamType::kEnum:
      return "enum";
    case ParamType::kIntList:
      return "int list";
    case ParamType::kFloatList:
      return "float list";
    case ParamType::kAutoInt:
      return "int or auto";
    case ParamType::kStringMap:
      return "string map";
    case ParamType::kSection:
      return "section";
  }
  return "?";
}

std::string ParamValue::ToString() const {
  struct Visitor {
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return FormatDouble(d); }
    std::string operator()(const std::string& s) const { return Quote(s); }
    std::string operator()(const std::vector<int64_t>& v) const {
      std::string out = "[";
      for (size_t i = 0; i < v.size(); ++i) {
        if (i) out += ",";
        out += std::to_string(v[i]);
      }
      return out + "]";
    }
    std::string operator()(const std::vector<double>& v) const {
      std::string out = "[";
      for (size_t i = 0; i < v.size(); ++i) {
        if (i) out += ",";
        out += FormatDouble(v[i]);
      }
      return out + "]";
    }
    std::string operator()(const std::map<std::string, std::string>& m) const {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : m) {
        if (!first) out += ", ";
        first = false;
        out += k + ": " + Quote(v);
      }
      return out + "}";
    }
    std::string operator()(const ParamList& m) const {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : m) {
        if (!first) out += ", ";
        first = false;
        out += k + ": " + v.ToString();
      }
      return out + "}";
    }
  };
  return std::visit(Visitor{}, value);
}

const ParamValue* FindParam(const ParamList& params, const std::string& name) {
  auto it = params.find(name);
  return it == params.end() ? nullptr : &it->second;
}

}  // namespace sluice
