#include "compiler/codegen/lower/lowering.h"

#include <string>

namespace sluice::codegen_internal {
namespace {

const LoweringTable& Table() {
  static const LoweringTable table = [] {
    LoweringTable t;
    RegisterColorLowerings(t);
    RegisterPointwiseLowerings(t);
    return t;
  }();
  return table;
}

}  // namespace

Halide::Expr LowerContext::At(const Halide::Func& f, Halide::Expr ce, Halide::Expr xe,
                              Halide::Expr ye) const {
  std::vector<Halide::Expr> args = {std::move(ce), std::move(xe), std::move(ye)};
  for (const Halide::Var& v : batch) args.push_back(v);
  return f(args);
}

std::vector<Halide::Var> LowerContext::Args() const {
  std::vector<Halide::Var> args = {c, x, y};
  args.insert(args.end(), batch.begin(), batch.end());
  return args;
}

std::vector<Halide::Expr> LowerContext::BatchArgs() const {
  return std::vector<Halide::Expr>(batch.begin(), batch.end());
}

LowerFn FindLowering(const OpDef* op) {
  for (const auto& [def, fn] : Table()) {
    if (def == op) return fn;
  }
  return nullptr;
}

Status LowerStep(const LowerContext& ctx, TailState& state) {
  const OpDef* op = ctx.step->op;
  LowerFn fn = FindLowering(op);
  if (fn == nullptr) {
    return MakeError(ErrorCode::kInternal,
                     "op `" + (op ? op->name : std::string("?")) +
                         "` is a fusable pointwise op but has no Halide lowering",
                     "register one in compiler/codegen/lower/ (see lowering.h)");
  }
  auto value = fn(ctx, state);
  if (!value) return std::unexpected(value.error());
  Halide::Func next(ctx.name);
  next(ctx.Args()) = *value;
  state.cur = next;
  return Ok();
}

}  // namespace sluice::codegen_internal
