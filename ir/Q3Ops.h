//===- Q3Ops.h - operations of the q3 dialect -----------------------------===//
#pragma once

#include "ir/Q3Dialect.h"

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
