//===- Q3Dialect.cpp - dialect registration and type verification ---------===//
#include "ir/Q3Dialect.h"
#include "ir/Q3Ops.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace q3::ir;

#include "ir/Q3Dialect.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "ir/Q3Types.cpp.inc"

void Q3Dialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ir/Q3Ops.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "ir/Q3Types.cpp.inc"
      >();
}

LogicalResult KVCacheType::verify(function_ref<InFlightDiagnostic()> emitError, int64_t layers,
                                  int64_t kvHeads, int64_t headDim) {
  if (layers <= 0)
    return emitError() << "!q3.kv_cache: layers must be positive, got " << layers;
  if (kvHeads <= 0)
    return emitError() << "!q3.kv_cache: kv_heads must be positive, got " << kvHeads;
  if (headDim <= 0)
    return emitError() << "!q3.kv_cache: head_dim must be positive, got " << headDim;
  return success();
}
