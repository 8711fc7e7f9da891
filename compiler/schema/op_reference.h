// The op reference (markdown), generated from the op registry, and the
// helpers that keep docs/spec.md's generated section in sync with it.
//
// docs/spec.md holds the reference between two marker lines:
//   <!-- BEGIN GENERATED: sluice ops --markdown -->
//   <!-- END GENERATED -->
// `sluice ops --markdown --splice docs/spec.md` rewrites what is between them;
// a test fails when the checked-in text differs from OpReferenceMarkdown().
#pragma once

#include <string>

#include "sluice/result.h"

namespace sluice {

inline constexpr const char* kGeneratedBegin = "<!-- BEGIN GENERATED: sluice ops --markdown -->";
inline constexpr const char* kGeneratedEnd = "<!-- END GENERATED -->";

// The whole op reference: sources, graph ops by class, batch, and the
// sampling/output sections; one table of parameters per entry.
std::string OpReferenceMarkdown();

// The text strictly between the marker lines (excluding the marker lines and
// their newlines). Error when a marker is missing or they are out of order.
Result<std::string> ExtractGenerated(const std::string& document);
// `document` with the text between the markers replaced by `generated`.
Result<std::string> SpliceGenerated(const std::string& document, const std::string& generated);

}  // namespace sluice
