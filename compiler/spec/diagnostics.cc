#include "compiler/spec/diagnostics.h"

#include <algorithm>

namespace sluice {

std::string Diagnostics::Render() const {
  std::vector<const Error*> sorted;
  for (const Error& e : errors_) sorted.push_back(&e);
  std::stable_sort(sorted.begin(), sorted.end(), [](const Error* a, const Error* b) {
    if (a->mark.line != b->mark.line) return a->mark.line < b->mark.line;
    return a->mark.column < b->mark.column;
  });
  std::string out;
  for (const Error* e : sorted) out += e->ToString() + "\n";
  return out;
}

Error Diagnostics::ToError() const {
  std::string text = Render();
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return Error{ErrorCode::kInvalidSpec, text, {}, {}};
}

}  // namespace sluice
