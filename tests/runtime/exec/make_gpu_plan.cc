// sluice_make_gpu_plan: compiles a spec into a plan whose first fusion group
// runs its pointwise tail on the GPU (SplitForGpu, gpu_plan_util.h), for the
// GPU kit (scripts/gpu_kit.sh), which ships such plans to a GPU machine that
// has no compiler.
//
//   sluice_make_gpu_plan SPEC.yaml OUT.plan [--sse41-only | --cpu-targets T1,T2,...]
//
// --sse41-only builds one CPU target (what the tests use; faster),
// --cpu-targets the given Halide targets (the first is the baseline), else the
// default multitarget set. Exit status 0 on success, 1 with the error on stderr.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "compiler/driver/compile_spec.h"
#include "tests/runtime/exec/gpu_plan_util.h"

int main(int argc, char** argv) {
  using namespace sluice;
  const bool sse41_only = argc == 4 && std::string(argv[3]) == "--sse41-only";
  const bool targets = argc == 5 && std::string(argv[3]) == "--cpu-targets";
  if (argc < 3 || (argc > 3 && !sse41_only && !targets)) {
    std::cerr << "usage: sluice_make_gpu_plan SPEC.yaml OUT.plan [--sse41-only | --cpu-targets "
                 "T1,T2,...]\n";
    return 2;
  }
  const std::string spec_path = argv[1], out = argv[2];
  std::ifstream in(spec_path);
  if (!in) {
    std::cerr << "sluice_make_gpu_plan: cannot read " << spec_path << "\n";
    return 1;
  }
  std::stringstream text;
  text << in.rdbuf();
  CodegenOptions options;
  if (sse41_only) options.cpu_targets = {"x86-64-linux-sse41"};
  if (targets) {
    options.cpu_targets.clear();
    std::stringstream list(argv[4]);
    for (std::string t; std::getline(list, t, ',');) options.cpu_targets.push_back(t);
  }
  options.cuda = false;  // SplitForGpu rebuilds kernels.so with CUDA
  if (Status st = CompileSpecText(text.str(), spec_path, out, options); !st) {
    std::cerr << "sluice_make_gpu_plan: " << st.error().ToString() << "\n";
    return 1;
  }
  auto cut = testing_gpu::SplitForGpu(out, options.cpu_targets);
  if (!cut) {
    std::cerr << "sluice_make_gpu_plan: " << cut.error().ToString() << "\n";
    return 1;
  }
  std::cout << out << ": steps [0, " << *cut << ") per sample on the CPU, the rest on the GPU\n";
  return 0;
}
