//===- CpuSinkWeightConcat.cpp - concatenated weights read in place -------===//
//
// Before (a product that reads its weight's rows where they are bound: a
// bf16 or f16 weight packed per call, q3.lowering weight_packing = per_call,
// or an f32 one, which the row-major kernels read):
//   %w = q3.concat_rows %wq, %wk, %wv : ... -> tensor<4096x1024xbf16>
//   %qkv = q3.dispatch @fused_linear_rms_norm_0(%x, %w, %g) : (...)
//   func.func private @fused_linear_rms_norm_0(%arg0: ..., %arg1: tensor<4096x1024xbf16>, ...) {
//     %0 = q3.fused_linear %arg0, %arg1, %arg2 ...
// After:
//   %qkv = q3.dispatch @fused_linear_rms_norm_0(%x, %wq, %wk, %wv, %g) : (...)
//   func.func private @fused_linear_rms_norm_0(%arg0: ..., %arg1: tensor<2048x1024xbf16>,
//       %arg2: tensor<1024x1024xbf16>, %arg3: tensor<1024x1024xbf16>, ...) {
//     %0 = q3.concat_rows %arg1, %arg2, %arg3 : ... -> tensor<4096x1024xbf16>
//     %1 = q3.fused_linear %arg0, %0, %arg4 ...
//
// The concatenation moves from the weight plan (a copy at load) into the
// kernel, which reads each part where the runtime bound it (the
// checkpoint's mapped bytes): loading then copies no product weight at all.
// Not for products packed at load (the packing copies anyway), only when
// every dispatch of the kernel passes a concatenation of the same part
// shapes, and only with parts of a multiple of 16 rows (a 16-row block of
// the kernels lies in one part).
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/passes/CpuPasses.h"
#include "ir/BuildGraph.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"

namespace q3::cpu {
#define GEN_PASS_DEF_CPUSINKWEIGHTCONCAT
#include "backends/cpu/passes/CpuPasses.h.inc"
} // namespace q3::cpu

using namespace mlir;
using namespace q3::ir;

namespace q3::cpu {
namespace {

constexpr int64_t kBlockRows = 16;

/// The argument a product kernel that reads its weight's rows where they
/// are bound (packed per call, or row-major: f32) reads its weight from.
std::optional<unsigned> inPlaceWeightArgument(func::FuncOp kernel) {
  if (loweringOf(kernel).getWeightPacking() == "at_load")
    return std::nullopt;
  Operation *compute = kernelComputeOp(kernel);
  if (!isa_and_nonnull<FusedLinearOp, LinearOp>(compute))
    return std::nullopt;
  auto argument = compute->getOperand(1).dyn_cast<BlockArgument>();
  if (!argument || argument.getOwner() != &kernel.getBody().front() ||
      argument.getType().cast<RankedTensorType>().getEncoding())
    return std::nullopt;
  return argument.getArgNumber();
}

/// The concatenation every dispatch passes as operand `index`, when they all
/// pass one of the same part types with whole 16-row blocks in each part.
ConcatRowsOp commonConcatenation(ArrayRef<DispatchOp> dispatches, unsigned index) {
  ConcatRowsOp first;
  for (DispatchOp dispatch : dispatches) {
    auto concat = dispatch.getOperand(index).getDefiningOp<ConcatRowsOp>();
    if (!concat)
      return {};
    if (!first) {
      first = concat;
      continue;
    }
    if (concat.getInputs().getTypes() != first.getInputs().getTypes())
      return {};
  }
  if (first)
    for (Type part : first.getInputs().getTypes())
      if (part.cast<RankedTensorType>().getDimSize(0) % kBlockRows != 0)
        return {};
  return first;
}

/// Replaces argument `index` of `kernel` by arguments of `partTypes`, which
/// the body concatenates into what the argument was.
void takeParts(func::FuncOp kernel, unsigned index, TypeRange partTypes, Type concatenated) {
  Block &body = kernel.getBody().front();
  Location loc = body.getArgument(index).getLoc();
  SmallVector<Value> parts;
  for (auto [i, type] : llvm::enumerate(partTypes))
    parts.push_back(body.insertArgument(index + 1 + unsigned(i), type, loc));
  OpBuilder builder = OpBuilder::atBlockBegin(&body);
  Value whole = builder.create<ConcatRowsOp>(loc, concatenated, parts);
  body.getArgument(index).replaceAllUsesWith(whole);
  body.eraseArgument(index);
  kernel.setType(FunctionType::get(kernel.getContext(), body.getArgumentTypes(),
                                   kernel.getFunctionType().getResults()));
}

struct CpuSinkWeightConcatPass : impl::CpuSinkWeightConcatBase<CpuSinkWeightConcatPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>(kEntryPoint);
    if (!forward) {
      module.emitError() << "cpu-sink-weight-concat: no func.func @" << kEntryPoint;
      return signalPassFailure();
    }
    llvm::MapVector<StringRef, SmallVector<DispatchOp>> dispatchesOf;
    forward.walk(
        [&](DispatchOp dispatch) { dispatchesOf[dispatch.getKernel()].push_back(dispatch); });
    SmallVector<ConcatRowsOp> sunk;
    for (func::FuncOp kernel : kernelsOf(module)) {
      std::optional<unsigned> index = inPlaceWeightArgument(kernel);
      auto it = dispatchesOf.find(kernel.getSymName());
      if (!index || it == dispatchesOf.end())
        continue;
      ConcatRowsOp concat = commonConcatenation(it->second, *index);
      if (!concat)
        continue;
      takeParts(kernel, *index, concat.getInputs().getTypes(), concat.getType());
      for (DispatchOp dispatch : it->second) {
        auto from = dispatch.getOperand(*index).getDefiningOp<ConcatRowsOp>();
        SmallVector<Value> operands(dispatch.getOperands().take_front(*index));
        operands.append(from.getInputs().begin(), from.getInputs().end());
        operands.append(dispatch.getOperands().begin() + *index + 1, dispatch.getOperands().end());
        dispatch->setOperands(operands);
        sunk.push_back(from);
      }
    }
    for (ConcatRowsOp concat : sunk)
      if (concat->use_empty())
        concat->erase();
  }
};

} // namespace

std::unique_ptr<mlir::Pass> createCpuSinkWeightConcatPass() {
  return std::make_unique<CpuSinkWeightConcatPass>();
}

} // namespace q3::cpu
