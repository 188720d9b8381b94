//===- Q3Dialect.h - the q3 dialect and its types -------------------------===//
#pragma once

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"

#include "ir/Q3Dialect.h.inc"

#define GET_TYPEDEF_CLASSES
#include "ir/Q3Types.h.inc"
