// libFuzzer harness: the spec front end (bench/fuzz/README in bench/README.md).
//
// Input: YAML spec text. ParseSpecText must turn any text into a Spec plus
// diagnostics without crashing; a spec it accepts (no diagnostics) must build
// a graph that passes VerifyGraph (the front end's contract with the IR) and
// prints.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "compiler/ir/ir.h"
#include "compiler/spec/diagnostics.h"
#include "compiler/spec/spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  sluice::Diagnostics diags;
  sluice::Spec spec = sluice::ParseSpecText(text, "fuzz.yaml", diags);
  if (diags.has_errors()) {
    (void)diags.Render();
    return 0;
  }
  sluice::Graph graph = sluice::BuildGraph(spec);
  if (sluice::Status ok = sluice::VerifyGraph(graph); !ok) {
    // An accepted spec whose graph is malformed: a front-end bug.
    __builtin_printf("accepted spec builds an invalid graph: %s\n", ok.error().ToString().c_str());
    std::abort();
  }
  (void)sluice::PrintGraph(graph);
  return 0;
}
