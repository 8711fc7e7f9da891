#include "compiler/codegen/codegen.h"

#include <Halide.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <set>
#include <stdexcept>

#include "compiler/codegen/chain_pipeline.h"
#include "ops/fusion/kernel_abi.h"
#include "ops/fusion/sample_args.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;

bool ValidSymbol(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; });
}

// Runs a shell command, returning its combined output and exit status.
std::pair<int, std::string> RunCommand(const std::string& cmd) {
  std::string out;
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  if (!pipe) return {-1, "popen failed"};
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int rc = pclose(pipe);
  return {rc, out};
}

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

template <class F>
Status CatchHalide(const std::string& what, F&& f) {
  try {
    f();
  } catch (const Halide::Error& e) {
    return MakeError(ErrorCode::kInternal, what + ": Halide: " + e.what());
  } catch (const std::exception& e) {
    return MakeError(ErrorCode::kInternal, what + ": " + e.what());
  }
  return Ok();
}

}  // namespace

bool HalideHasCuda() {
  static const bool has = [] {
    try {
      Halide::Func f("sluice_cuda_probe");
      Halide::Var x("x"), xo("xo"), xi("xi");
      f(x) = x * 2;
      f.gpu_tile(x, xo, xi, 16);
      Halide::Target t("x86-64-linux-cuda-cuda_capability_80-no_runtime");
      Halide::Module m = f.compile_to_module({}, "sluice_cuda_probe", t);
      return true;
    } catch (...) {
      return false;
    }
  }();
  return has;
}

Result<KernelArtifact> CompileKernels(const std::vector<FusedChain>& chains,
                                      const std::string& out_dir, const CodegenOptions& options) {
  if (options.cpu_targets.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "no CPU targets to compile kernels for");
  }
  std::set<std::string> seen;
  for (const FusedChain& chain : chains) {
    if (!ValidSymbol(chain.symbol) || !seen.insert(chain.symbol).second) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "kernel symbol `" + chain.symbol + "` is not a unique C identifier");
    }
    SLUICE_RETURN_IF_ERROR(CheckFusable(chain));
  }
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  const fs::path dir = fs::absolute(out_dir, ec);
  const fs::path work = dir / "kernels.build";
  fs::create_directories(work, ec);
  if (ec) return MakeError(ErrorCode::kIo, "cannot create " + work.string() + ": " + ec.message());

  KernelArtifact art;
  art.cpu_targets = options.cpu_targets;
  for (const char* name : kKernelArgNames) art.arg_names.push_back(name);

  // Halide picks the first target (in list order) the CPU supports and treats the
  // last as the baseline, so pass them best-first; options list the baseline first.
  std::vector<Halide::Target> targets;
  SLUICE_RETURN_IF_ERROR(CatchHalide("parsing CPU targets", [&] {
    for (auto it = options.cpu_targets.rbegin(); it != options.cpu_targets.rend(); ++it) {
      targets.push_back(Halide::Target(*it).with_feature(Halide::Target::NoRuntime));
    }
  }));
  bool cuda = options.cuda;
  Halide::Target cuda_target;
  if (cuda && !HalideHasCuda()) {
    cuda = false;
    art.cuda_note =
        "this Halide build cannot generate CUDA (PTX) code (LLVM without the NVPTX target); "
        "CUDA kernels were not built";
  }
  if (cuda) {
    SLUICE_RETURN_IF_ERROR(CatchHalide("parsing the CUDA target", [&] {
      cuda_target = Halide::Target(options.cuda_target).with_feature(Halide::Target::NoRuntime);
    }));
  }

  std::vector<std::string> archives;
  for (const FusedChain& chain : chains) {
    KernelArtifact::Kernel k{chain.symbol, ""};
    // Fail early (with a clear error) before Halide starts compiling.
    if (auto probe = codegen_internal::BuildChainPipeline(chain, /*gpu=*/false, targets.back());
        !probe) {
      return std::unexpected(probe.error());
    }
    const std::string prefix = (work / chain.symbol).string();
    SLUICE_RETURN_IF_ERROR(CatchHalide("compiling `" + chain.symbol + "` for the CPU", [&] {
      // compile_multitarget with the symbol given explicitly: the Func's own
      // name is uniquified per process by Halide (a second plan compiled in
      // the same process, e.g. from Python, would export sluice_chain_0_1).
      // The pipeline is built once per target so its schedule can use what
      // that target has.
      Halide::compile_multitarget(
          chain.symbol,
          {{Halide::OutputFileType::c_header, prefix + ".h"},
           {Halide::OutputFileType::static_library, prefix + ".a"}},
          targets, {}, [&](const std::string& fn, const Halide::Target& t) {
            auto cpu = codegen_internal::BuildChainPipeline(chain, /*gpu=*/false, t);
            if (!cpu) throw std::runtime_error(cpu.error().message);
            return cpu->pipeline.compile_to_module(cpu->args, fn, t);
          });
    }));
    archives.push_back(prefix + ".a");
    if (cuda) {
      auto gpu = codegen_internal::BuildChainPipeline(chain, /*gpu=*/true, cuda_target);
      if (!gpu) return std::unexpected(gpu.error());
      k.cuda_symbol = chain.symbol + kCudaSuffix;
      const std::string gprefix = (work / k.cuda_symbol).string();
      SLUICE_RETURN_IF_ERROR(CatchHalide("compiling `" + chain.symbol + "` for CUDA", [&] {
        gpu->pipeline.compile_to_static_library(gprefix, gpu->args, k.cuda_symbol, cuda_target);
      }));
      archives.push_back(gprefix + ".a");
    }
    art.kernels.push_back(std::move(k));
  }
  if (cuda) art.cuda_target = options.cuda_target;

  // One Halide runtime for the whole library: the baseline CPU target, plus CUDA.
  const std::string runtime_obj = (work / "halide_runtime.o").string();
  SLUICE_RETURN_IF_ERROR(CatchHalide("compiling the Halide runtime", [&] {
    Halide::Target rt(options.cpu_targets.front());
    if (cuda) rt = rt.with_feature(Halide::Target::CUDA);
    Halide::compile_standalone_runtime(runtime_obj, rt);
  }));

  const std::string lib = (dir / "kernels.so").string();
  const std::string tmp_lib = lib + ".tmp";
  std::string cmd = Quote(options.cxx) + " -shared -o " + Quote(tmp_lib) + " -Wl,--whole-archive";
  for (const std::string& a : archives) cmd += " " + Quote(a);
  cmd += " -Wl,--no-whole-archive " + Quote(runtime_obj) + " -ldl -lpthread";
  auto [rc, output] = RunCommand(cmd);
  if (rc != 0) {
    return MakeError(ErrorCode::kInternal, "linking kernels.so failed: " + cmd + "\n" + output);
  }
  fs::rename(tmp_lib, lib, ec);
  if (ec) return MakeError(ErrorCode::kIo, "cannot write " + lib + ": " + ec.message());
  fs::remove_all(work, ec);
  art.library = lib;
  return art;
}

}  // namespace sluice
