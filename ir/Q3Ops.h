//===- Q3Ops.h - operations of the q3 dialect -----------------------------===//
#pragma once

#include "ir/Q3Dialect.h"

#include <string>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace q3::ir {
/// Marks a func.func that form-dispatches outlined as a kernel.
inline constexpr llvm::StringLiteral kKernelAttrName = "q3.kernel";
} // namespace q3::ir

#define GET_OP_CLASSES
#include "ir/Q3Ops.h.inc"

namespace mlir::func {
class FuncOp;
} // namespace mlir::func

namespace q3::ir {

/// The op a kernel computes: its last op that is not a view (merge_heads,
/// reshape_heads, split_columns) or the terminator; null for an empty kernel.
mlir::Operation *kernelComputeOp(mlir::func::FuncOp kernel);

/// A kernel's lowering config, or an empty one when no pass has set it yet.
LoweringConfigAttr loweringOf(mlir::func::FuncOp kernel);
void setLowering(mlir::func::FuncOp kernel, LoweringConfigAttr lowering);

/// A kernel's alternative lowerings (`q3.variants`, set by a target pass for
/// the runtime to choose from), in order; empty when it has none.
inline constexpr const char *kVariantsAttrName = "q3.variants";
llvm::SmallVector<LoweringConfigAttr> variantsOf(mlir::func::FuncOp kernel);
/// Replaces a kernel's lowering and each of its variants by `update` of it:
/// for target passes whose decision follows each build's other choices.
void updateLoweringAndVariants(mlir::func::FuncOp kernel,
                               llvm::function_ref<LoweringConfigAttr(LoweringConfigAttr)> update);
/// How the runtime picks among a kernel's variants (`q3.variant_choice`):
/// absent, it times one dispatch of each at load ("timed"); "like_products"
/// (attention, whose 32-row timing says nothing of long prompts) takes the
/// variant whose matmul the timed products chose, else the default.
inline constexpr const char *kVariantChoiceAttrName = "q3.variant_choice";
inline constexpr const char *kVariantChoiceLikeProducts = "like_products";
bool choosesLikeProducts(mlir::func::FuncOp kernel);
/// A variant's name: "<matmul>_<first tile extent>" ("avx512bf16_8") for a
/// timed product, "<matmul>" for a kernel that follows the products.
std::string variantName(mlir::func::FuncOp kernel, LoweringConfigAttr variant);

} // namespace q3::ir
