//===- Q3Dialect.h - the q3 dialect and its types -------------------------===//
#pragma once

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"

#include "ir/Q3Dialect.h.inc"

#define GET_TYPEDEF_CLASSES
#include "ir/Q3Types.h.inc"

#define GET_ATTRDEF_CLASSES
#include "ir/Q3Attributes.h.inc"

namespace q3::ir {
/// Whether `type` is a tensor stored in column blocks (#q3.column_blocks).
bool hasColumnBlocks(mlir::Type type);
/// The attribute name of a kernel's LoweringConfigAttr.
inline constexpr llvm::StringLiteral kLoweringAttrName = "q3.lowering";
} // namespace q3::ir
