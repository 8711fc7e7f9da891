// `sluice verify PLAN`: Plan::Verify's checks (plan.json, versions, ops, the
// batch memory layout, kernels.so's hash), without loading kernels.so. Prints "OK ..." and exits 0,
// or prints the problem and exits 1.
#include <iostream>
#include <string>

#include "cli/cli.h"
#include "sluice/plan.h"

namespace sluice::cli {

int Verify(const Args& args) {
  if (args.size() != 1 || args[0].starts_with("-")) {
    return UsageError(args.empty() ? "verify needs a plan: sluice verify PLAN"
                                   : "verify takes one plan directory: sluice verify PLAN");
  }
  auto check = Plan::Verify(args[0]);
  if (!check) {
    std::cerr << check.error().ToString() << "\n";
    return 1;
  }
  std::cout << "OK: plan `" << args[0] << "` (" << check->name << "): format version "
            << check->format_version << ", compiled by sluice " << check->compiler_version
            << ", spec " << check->spec_hash << "; kernels.so matches plan.json ("
            << check->kernels_hash << ")\n"
            << "note: the hash detects a damaged or mismatched kernels.so, not a malicious "
               "one; kernels.so is machine code that runs in your process: load only plans "
               "you built or trust (docs/plan.md)\n";
  return 0;
}

}  // namespace sluice::cli
