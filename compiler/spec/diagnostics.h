// Diagnostics: every error found in one compile, reported together.
//
// The front end and the passes add errors as they find them and keep going, so
// a user sees all of a spec's mistakes in one run. Rendering sorts by position
// and prints, for each: "file:line:col: error: message" and "  hint: fix".
#pragma once

#include <string>
#include <vector>

#include "sluice/result.h"

namespace sluice {

class Diagnostics {
 public:
  void Add(Error error) { errors_.push_back(std::move(error)); }
  void Add(const SourceMark& mark, std::string message, std::string hint = {}) {
    errors_.push_back(Error{ErrorCode::kInvalidSpec, std::move(message), std::move(hint), mark});
  }

  bool has_errors() const { return !errors_.empty(); }
  const std::vector<Error>& errors() const { return errors_; }
  // All errors, sorted by (line, column), one Error::ToString() per entry,
  // each followed by a newline.
  std::string Render() const;
  // The whole set as one Error (code kInvalidSpec) whose message is Render().
  Error ToError() const;

 private:
  std::vector<Error> errors_;
};

}  // namespace sluice
