// The source registry's table (see source_registry.h): one line per source.
#include "runtime/sources/source_registry.h"

#include "runtime/sources/file_list_source.h"
#include "runtime/sources/image_folder_source.h"
#include "runtime/sources/tar_shards_source.h"

namespace sluice::runtime {
namespace {

constexpr SourceEntry kSources[] = {
    {"image_folder", OpenImageFolderSource},
    {"file_list", OpenFileListSource},
    {"tar_shards", OpenTarShardsSource},
};

SourceEntry override_entry{};  // ScopedSourceOverride's; format empty when none

}  // namespace

ScopedSourceOverride::ScopedSourceOverride(std::string_view format, OpenSourceFn open) {
  override_entry = SourceEntry{format, open};
}
ScopedSourceOverride::~ScopedSourceOverride() { override_entry = SourceEntry{}; }

std::span<const SourceEntry> RegisteredSources() { return kSources; }

const SourceEntry* FindSource(std::string_view format) {
  for (const SourceEntry& entry : kSources) {
    if (entry.format == format) return &entry;
  }
  return nullptr;
}

Result<std::unique_ptr<Source>> OpenSource(std::string_view format, const ParamList& params) {
  if (!override_entry.format.empty() && override_entry.format == format) {
    return override_entry.open(params);
  }
  if (const SourceEntry* entry = FindSource(format)) return entry->open(params);
  std::string known;
  for (const SourceEntry& entry : kSources) {
    known += (known.empty() ? "" : ", ") + std::string(entry.format);
  }
  return MakeError(ErrorCode::kInvalidArgument,
                   "unknown source format '" + std::string(format) + "'",
                   "supported formats: " + known);
}

std::string SourceParamString(const ParamList& params, const std::string& name,
                              const std::string& fallback) {
  const ParamValue* v = FindParam(params, name);
  if (v == nullptr || !std::holds_alternative<std::string>(v->value)) return fallback;
  return v->AsString();
}

}  // namespace sluice::runtime
