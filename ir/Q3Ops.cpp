//===- Q3Ops.cpp - verifiers of the q3 operations -------------------------===//
//
// Every verifier names the op, the operand and the dimension that disagree, so
// that a bad hand-edited dump points at the line to fix.
//
//===----------------------------------------------------------------------===//
#include "ir/Q3Ops.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace q3::ir;

namespace {

RankedTensorType rankedType(Value v) { return v.getType().cast<RankedTensorType>(); }

/// Two extents agree unless both are static and differ.
bool extentsAgree(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

std::string extentString(int64_t e) {
  return ShapedType::isDynamic(e) ? std::string("?") : std::to_string(e);
}

LogicalResult expectRank(Operation *op, StringRef what, Value v, int64_t rank) {
  int64_t actual = rankedType(v).getRank();
  if (actual != rank)
    return op->emitOpError() << what << " must have rank " << rank << ", got rank " << actual;
  return success();
}

/// Checks `actual` dimension `dim` of `what` against `expected` (from another operand).
LogicalResult expectExtent(Operation *op, StringRef what, int64_t dim, int64_t actual,
                           int64_t expected, StringRef because) {
  if (extentsAgree(actual, expected))
    return success();
  return op->emitOpError() << what << " dimension " << dim << " is " << extentString(actual)
                           << " but " << because << " is " << extentString(expected);
}

LogicalResult expectSameShape(Operation *op, StringRef what, Value v, StringRef otherWhat,
                              Value other) {
  auto a = rankedType(v), b = rankedType(other);
  if (a.getRank() != b.getRank())
    return op->emitOpError() << what << " has rank " << a.getRank() << " but " << otherWhat
                             << " has rank " << b.getRank();
  for (int64_t d = 0; d < a.getRank(); ++d)
    if (failed(expectExtent(op, what, d, a.getDimSize(d), b.getDimSize(d),
                            (otherWhat + " dimension " + Twine(d)).str())))
      return failure();
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// ParamOp
//===----------------------------------------------------------------------===//

LogicalResult ParamOp::verify() {
  if (getName().empty())
    return emitOpError() << "needs a non-empty tensor name";
  if (!getResult().getType().cast<RankedTensorType>().hasStaticShape())
    return emitOpError() << "'" << getName() << "' must have a static shape";
  return success();
}

void ParamOp::getAsmResultNames(function_ref<void(Value, StringRef)> setNameFn) {
  setNameFn(getResult(), getName());
}

//===----------------------------------------------------------------------===//
// EmbeddingOp
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::verify() {
  if (failed(expectRank(*this, "table", getTable(), 2)) ||
      failed(expectRank(*this, "result", getResult(), 2)))
    return failure();
  auto table = rankedType(getTable()), result = rankedType(getResult());
  if (failed(expectExtent(*this, "result", 0, result.getDimSize(0),
                          rankedType(getTokens()).getDimSize(0), "the number of tokens")) ||
      failed(expectExtent(*this, "result", 1, result.getDimSize(1), table.getDimSize(1),
                          "table dimension 1 (hidden size)")))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// RMSNormOp
//===----------------------------------------------------------------------===//

LogicalResult RMSNormOp::verify() {
  auto input = rankedType(getInput());
  if (input.getRank() < 1)
    return emitOpError() << "input must have rank >= 1";
  if (failed(expectRank(*this, "gamma", getGamma(), 1)))
    return failure();
  int64_t features = input.getDimSize(input.getRank() - 1);
  if (failed(expectExtent(*this, "gamma", 0, rankedType(getGamma()).getDimSize(0), features,
                          "the input's last dimension")))
    return failure();
  if (getEps().convertToDouble() <= 0.0)
    return emitOpError() << "eps must be positive, got " << getEps().convertToDouble();
  return expectSameShape(*this, "result", getResult(), "input", getInput());
}

//===----------------------------------------------------------------------===//
// LinearOp
//===----------------------------------------------------------------------===//

LogicalResult LinearOp::verify() {
  if (failed(expectRank(*this, "input", getInput(), 2)) ||
      failed(expectRank(*this, "weight", getWeight(), 2)) ||
      failed(expectRank(*this, "result", getResult(), 2)))
    return failure();
  auto input = rankedType(getInput()), weight = rankedType(getWeight()),
       result = rankedType(getResult());
  if (failed(expectExtent(*this, "weight", 1, weight.getDimSize(1), input.getDimSize(1),
                          "input dimension 1 (in features)")) ||
      failed(expectExtent(*this, "result", 0, result.getDimSize(0), input.getDimSize(0),
                          "input dimension 0 (rows)")) ||
      failed(expectExtent(*this, "result", 1, result.getDimSize(1), weight.getDimSize(0),
                          "weight dimension 0 (out features)")))
    return failure();
  if (Value bias = getBias()) {
    if (failed(expectRank(*this, "bias", bias, 1)) ||
        failed(expectExtent(*this, "bias", 0, rankedType(bias).getDimSize(0),
                            weight.getDimSize(0), "weight dimension 0 (out features)")))
      return failure();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// ReshapeHeadsOp / MergeHeadsOp
//===----------------------------------------------------------------------===//

/// Checks that `flat` [T, H*D] and `heads` [T, H, D] describe the same data.
static LogicalResult verifyHeadsReshape(Operation *op, Value flat, StringRef flatWhat,
                                        Value heads, StringRef headsWhat) {
  if (failed(expectRank(op, flatWhat, flat, 2)) || failed(expectRank(op, headsWhat, heads, 3)))
    return failure();
  auto flatType = rankedType(flat), headsType = rankedType(heads);
  if (!headsType.hasStaticShape() && (ShapedType::isDynamic(headsType.getDimSize(1)) ||
                                      ShapedType::isDynamic(headsType.getDimSize(2))))
    return op->emitOpError() << headsWhat << " must have static heads and head_dim";
  int64_t features = headsType.getDimSize(1) * headsType.getDimSize(2);
  if (failed(expectExtent(op, flatWhat, 0, flatType.getDimSize(0), headsType.getDimSize(0),
                          (headsWhat + " dimension 0 (rows)").str())) ||
      failed(expectExtent(op, flatWhat, 1, flatType.getDimSize(1), features,
                          (headsWhat + " heads x head_dim").str())))
    return failure();
  return success();
}

LogicalResult ReshapeHeadsOp::verify() {
  return verifyHeadsReshape(*this, getInput(), "input", getResult(), "result");
}

LogicalResult MergeHeadsOp::verify() {
  return verifyHeadsReshape(*this, getResult(), "result", getInput(), "input");
}

//===----------------------------------------------------------------------===//
// RopeOp
//===----------------------------------------------------------------------===//

LogicalResult RopeOp::verify() {
  if (failed(expectRank(*this, "input", getInput(), 3)))
    return failure();
  int64_t headDim = rankedType(getInput()).getDimSize(2);
  if (ShapedType::isDynamic(headDim) || headDim % 2 != 0)
    return emitOpError() << "input dimension 2 (head_dim) must be static and even, got "
                         << extentString(headDim);
  if (getTheta().convertToDouble() <= 0.0)
    return emitOpError() << "theta must be positive, got " << getTheta().convertToDouble();
  return success();
}

//===----------------------------------------------------------------------===//
// KVCacheUpdateOp
//===----------------------------------------------------------------------===//

LogicalResult KVCacheUpdateOp::verify() {
  auto cache = getCache().getType().cast<KVCacheType>();
  if (getLayer() < 0 || getLayer() >= static_cast<uint64_t>(cache.getLayers()))
    return emitOpError() << "layer " << getLayer() << " is outside the cache's "
                         << cache.getLayers() << " layers";
  if (failed(expectRank(*this, "key", getKey(), 3)))
    return failure();
  auto key = rankedType(getKey());
  if (failed(expectExtent(*this, "key", 1, key.getDimSize(1), cache.getKvHeads(),
                          "the cache's kv_heads")) ||
      failed(expectExtent(*this, "key", 2, key.getDimSize(2), cache.getHeadDim(),
                          "the cache's head_dim")))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

LogicalResult AttentionOp::verify() {
  if (failed(expectRank(*this, "query", getQuery(), 3)) ||
      failed(expectRank(*this, "keys", getKeys(), 3)))
    return failure();
  auto query = rankedType(getQuery()), keys = rankedType(getKeys());
  int64_t queryHeads = query.getDimSize(1), kvHeads = keys.getDimSize(1);
  if (ShapedType::isDynamic(queryHeads) || ShapedType::isDynamic(kvHeads))
    return emitOpError() << "query and keys must have static head counts";
  if (failed(expectExtent(*this, "keys", 2, keys.getDimSize(2), query.getDimSize(2),
                          "query dimension 2 (head_dim)")))
    return failure();
  if (queryHeads % kvHeads != 0)
    return emitOpError() << "query heads (" << queryHeads
                         << ") must be a multiple of the KV heads (" << kvHeads << ")";
  if (getScale().convertToDouble() <= 0.0)
    return emitOpError() << "scale must be positive";
  if (auto map = getKvHeadMap()) {
    if (static_cast<int64_t>(map->size()) != queryHeads)
      return emitOpError() << "kv_head_map has " << map->size() << " entries but there are "
                           << queryHeads << " query heads";
    for (auto [h, kv] : llvm::enumerate(*map))
      if (kv < 0 || kv >= kvHeads)
        return emitOpError() << "kv_head_map[" << h << "] = " << kv
                             << " is not a KV head (there are " << kvHeads << ")";
  }
  return success();
}

int64_t AttentionOp::kvHeadFor(int64_t h) {
  if (auto map = getKvHeadMap())
    return (*map)[h];
  int64_t queryHeads = rankedType(getQuery()).getDimSize(1);
  int64_t kvHeads = rankedType(getKeys()).getDimSize(1);
  return h / (queryHeads / kvHeads);
}

#define GET_OP_CLASSES
#include "ir/Q3Ops.cpp.inc"
