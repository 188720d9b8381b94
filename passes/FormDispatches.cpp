//===- FormDispatches.cpp - compute ops outlined into shared kernels ------===//
//
// Every compute op of @forward becomes a kernel and a dispatch of it. Views
// (reshape_heads, merge_heads, split_columns) read only by that op go into its
// kernel; weights, weight transforms and constants stay outside and are passed
// in, as are the cache and the scalars (start position, layer).
//
// Before:
//   %m = q3.merge_heads %a : tensor<?x16x128xf32> -> tensor<?x2048xf32>
//   %x1 = q3.fused_linear %m, %wo residual %x0 : ...
// After:
//   %x1 = q3.dispatch @fused_linear_residual_0(%a, %wo, %x0) : (...) -> tensor<?x1024xf32>
//   ...
//   func.func private @fused_linear_residual_0(%arg0: tensor<?x16x128xf32>, %arg1: ..., %arg2: ...)
//       -> tensor<?x1024xf32> attributes {q3.kernel} {
//     %0 = q3.merge_heads %arg0 : ...
//     %1 = q3.fused_linear %0, %arg1 residual %arg2 : ...
//     return %1 : tensor<?x1024xf32>
//   }
//
// Kernels whose text is identical (all layers of one model) are shared, so
// the number of distinct kernels is independent of the number of layers.
// How a kernel runs (its grid, instructions, tiles) is not decided here: the
// target passes record it in each kernel's `q3.lowering`.
//
//===----------------------------------------------------------------------===//
#include "ir/BuildGraph.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"

namespace q3::passes {
#define GEN_PASS_DEF_FORMDISPATCHES
#include "passes/Passes.h.inc"
} // namespace q3::passes

using namespace mlir;
using namespace q3::ir;

namespace q3::passes {
namespace {

bool isView(Operation *op) { return isa<ReshapeHeadsOp, MergeHeadsOp, SplitColumnsOp>(op); }

/// Ops that stay in @forward: weights, weight transforms, constants, views
/// nobody absorbed, and the terminator.
bool staysOutside(Operation *op) {
  return isView(op) || isa<ParamOp, FoldGainOp, ConcatRowsOp, PackColumnBlocksOp, DispatchOp>(op) ||
         op->hasTrait<OpTrait::ConstantLike>() || op->hasTrait<OpTrait::IsTerminator>();
}

/// A readable kernel name: the op, plus what was fused into a product.
std::string kernelBaseName(Operation *anchor) {
  std::string name = anchor->getName().stripDialect().str();
  if (auto fused = dyn_cast<FusedLinearOp>(anchor)) {
    if (fused.getRmsNormEps())
      name += "_rms_norm";
    if (fused.getSwiglu())
      name += "_swiglu";
    if (fused.getResidual())
      name += "_residual";
  }
  return name;
}

/// The anchor plus the views that only the group reads, in block order.
SmallVector<Operation *> collectGroup(Operation *anchor) {
  llvm::SetVector<Operation *> group;
  group.insert(anchor);
  // A view joins once all of its users are members; joining may let the view
  // that feeds it join too, so the worklist revisits new members.
  SmallVector<Operation *> worklist{anchor};
  while (!worklist.empty()) {
    Operation *member = worklist.pop_back_val();
    for (Value operand : member->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (!def || !isView(def) || group.contains(def) || def->getBlock() != anchor->getBlock())
        continue;
      if (llvm::all_of(def->getUsers(), [&](Operation *user) { return group.contains(user); })) {
        group.insert(def);
        worklist.push_back(def);
      }
    }
  }
  SmallVector<Operation *> ordered(group.begin(), group.end());
  llvm::sort(ordered, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return ordered;
}

class DispatchFormer {
public:
  explicit DispatchFormer(ModuleOp module) : module(module) {}

  void outline(Operation *anchor) {
    SmallVector<Operation *> group = collectGroup(anchor);
    llvm::SmallPtrSet<Operation *, 8> members(group.begin(), group.end());
    llvm::SetVector<Value> inputs;
    SmallVector<Value> outputs;
    for (Operation *op : group) {
      for (Value operand : op->getOperands())
        if (!members.contains(operand.getDefiningOp()))
          inputs.insert(operand);
      for (Value result : op->getResults())
        if (llvm::any_of(result.getUsers(), [&](Operation *u) { return !members.contains(u); }))
          outputs.push_back(result);
    }
    FlatSymbolRefAttr kernel = findOrCreateKernel(anchor, group, inputs.getArrayRef(), outputs);
    OpBuilder builder(anchor);
    SmallVector<Type> resultTypes;
    for (Value v : outputs)
      resultTypes.push_back(v.getType());
    auto dispatch =
        builder.create<DispatchOp>(anchor->getLoc(), resultTypes, kernel, inputs.getArrayRef());
    for (auto [old, replacement] : llvm::zip(outputs, dispatch.getResults()))
      old.replaceAllUsesWith(replacement);
    for (Operation *op : llvm::reverse(group))
      op->erase();
  }

private:
  FlatSymbolRefAttr findOrCreateKernel(Operation *anchor, ArrayRef<Operation *> group,
                                       ArrayRef<Value> inputs, ArrayRef<Value> outputs) {
    OpBuilder builder(module.getContext());
    SmallVector<Type> inputTypes, outputTypes;
    for (Value v : inputs)
      inputTypes.push_back(v.getType());
    for (Value v : outputs)
      outputTypes.push_back(v.getType());
    auto kernel = builder.create<func::FuncOp>(anchor->getLoc(), "kernel",
                                               builder.getFunctionType(inputTypes, outputTypes));
    kernel.setPrivate();
    kernel->setAttr(kKernelAttrName, builder.getUnitAttr());
    Block *body = kernel.addEntryBlock();
    builder.setInsertionPointToStart(body);
    IRMapping mapping;
    for (auto [input, arg] : llvm::zip(inputs, body->getArguments()))
      mapping.map(input, arg);
    for (Operation *op : group)
      builder.clone(*op, mapping);
    SmallVector<Value> returned;
    for (Value v : outputs)
      returned.push_back(mapping.lookup(v));
    builder.create<func::ReturnOp>(anchor->getLoc(), returned);

    std::string text;
    llvm::raw_string_ostream os(text);
    kernel.print(os);
    auto [it, inserted] = kernelsByText.try_emplace(os.str(), "");
    if (!inserted) {
      kernel.erase(); // an identical kernel exists (another layer's)
      return FlatSymbolRefAttr::get(module.getContext(), it->second);
    }
    std::string base = kernelBaseName(anchor);
    it->second = base + "_" + std::to_string(countByBase[base]++);
    kernel.setName(it->second);
    module.push_back(kernel);
    return FlatSymbolRefAttr::get(module.getContext(), it->second);
  }

  ModuleOp module;
  llvm::StringMap<std::string> kernelsByText; // printed kernel -> its name
  llvm::StringMap<int> countByBase;
};

struct FormDispatchesPass : impl::FormDispatchesBase<FormDispatchesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>(ir::kEntryPoint);
    if (!forward) {
      module.emitError() << "form-dispatches: no func.func @" << ir::kEntryPoint;
      return signalPassFailure();
    }
    SmallVector<Operation *> anchors;
    for (Operation &op : forward.getBody().front())
      if (!staysOutside(&op))
        anchors.push_back(&op);
    DispatchFormer former(module);
    for (Operation *anchor : anchors)
      former.outline(anchor);
  }
};

} // namespace

std::unique_ptr<Pass> createFormDispatchesPass() { return std::make_unique<FormDispatchesPass>(); }

} // namespace q3::passes
