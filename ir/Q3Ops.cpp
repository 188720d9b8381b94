//===- Q3Ops.cpp - verifiers of the q3 operations -------------------------===//
//
// Every verifier names the op, the operand and the dimension that disagree, so
// that a bad hand-edited dump points at the line to fix.
//
//===----------------------------------------------------------------------===//
#include "ir/Q3Ops.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
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

/// Weights that only products read in column blocks; everything else reads
/// them row-major.
LogicalResult expectRowMajor(Operation *op, StringRef what, Value v) {
  if (hasColumnBlocks(v.getType()))
    return op->emitOpError() << what << " must be row-major, got " << v.getType();
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
  if (failed(expectRowMajor(*this, "table", getTable())) ||
      failed(expectRank(*this, "table", getTable(), 2)) ||
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

/// What linear and fused_linear share: input [rows, in], weight [out, in],
/// result [rows, ...] (the caller checks the result's columns).
static LogicalResult verifyProductOperands(Operation *op, Value input, Value weight, Value result) {
  if (failed(expectRank(op, "input", input, 2)) || failed(expectRank(op, "weight", weight, 2)) ||
      failed(expectRank(op, "result", result, 2)))
    return failure();
  auto inputType = rankedType(input);
  if (failed(expectExtent(op, "weight", 1, rankedType(weight).getDimSize(1),
                          inputType.getDimSize(1), "input dimension 1 (in features)")) ||
      failed(expectExtent(op, "result", 0, rankedType(result).getDimSize(0),
                          inputType.getDimSize(0), "input dimension 0 (rows)")))
    return failure();
  return success();
}

LogicalResult LinearOp::verify() {
  if (failed(verifyProductOperands(*this, getInput(), getWeight(), getResult())))
    return failure();
  auto weight = rankedType(getWeight()), result = rankedType(getResult());
  if (failed(expectExtent(*this, "result", 1, result.getDimSize(1), weight.getDimSize(0),
                          "weight dimension 0 (out features)")))
    return failure();
  if (Value bias = getBias()) {
    if (failed(expectRank(*this, "bias", bias, 1)) ||
        failed(expectExtent(*this, "bias", 0, rankedType(bias).getDimSize(0), weight.getDimSize(0),
                            "weight dimension 0 (out features)")))
      return failure();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// ReshapeHeadsOp / MergeHeadsOp
//===----------------------------------------------------------------------===//

/// Checks that `flat` [T, H*D] and `heads` [T, H, D] describe the same data.
static LogicalResult verifyHeadsReshape(Operation *op, Value flat, StringRef flatWhat, Value heads,
                                        StringRef headsWhat) {
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

/// The layer operand of a cache op, when it is a constant: it must name a
/// layer of the cache.
static LogicalResult verifyCacheLayer(Operation *op, Value layer, KVCacheType cache) {
  APInt value;
  if (!matchPattern(layer, m_ConstantInt(&value)))
    return success();
  if (value.isNegative() || value.getSExtValue() >= cache.getLayers())
    return op->emitOpError() << "layer " << value.getSExtValue() << " is outside the cache's "
                             << cache.getLayers() << " layers";
  return success();
}

LogicalResult KVCacheUpdateOp::verify() {
  auto cache = getCache().getType().cast<KVCacheType>();
  if (failed(verifyCacheLayer(*this, getLayer(), cache)) ||
      failed(expectRank(*this, "key", getKey(), 3)))
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

//===----------------------------------------------------------------------===//
// Weight transforms
//===----------------------------------------------------------------------===//

LogicalResult FoldGainOp::verify() {
  if (failed(expectRowMajor(*this, "weight", getWeight())) ||
      failed(expectRowMajor(*this, "result", getResult())) ||
      failed(expectRank(*this, "weight", getWeight(), 2)) ||
      failed(expectRank(*this, "gamma", getGamma(), 1)))
    return failure();
  auto weight = rankedType(getWeight());
  if (failed(expectExtent(*this, "gamma", 0, rankedType(getGamma()).getDimSize(0),
                          weight.getDimSize(1), "weight dimension 1 (in features)")))
    return failure();
  Type resultElement = rankedType(getResult()).getElementType();
  if (!resultElement.isF32() && resultElement != weight.getElementType())
    return emitOpError() << "result element type must be f32 or the weight's, got "
                         << resultElement;
  return expectSameShape(*this, "result", getResult(), "weight", getWeight());
}

LogicalResult ConcatRowsOp::verify() {
  if (getInputs().empty())
    return emitOpError() << "needs at least one input";
  if (failed(expectRowMajor(*this, "result", getResult())) ||
      failed(expectRank(*this, "result", getResult(), 2)))
    return failure();
  auto result = rankedType(getResult());
  int64_t rows = 0;
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    std::string what = "input #" + std::to_string(i);
    if (failed(expectRowMajor(*this, what, input)) || failed(expectRank(*this, what, input, 2)) ||
        failed(expectExtent(*this, what, 1, rankedType(input).getDimSize(1), result.getDimSize(1),
                            "result dimension 1")))
      return failure();
    if (rankedType(input).getElementType() != result.getElementType())
      return emitOpError() << what << " has element type " << rankedType(input).getElementType()
                           << " but the result has " << result.getElementType();
    rows += rankedType(input).getDimSize(0);
  }
  return expectExtent(*this, "result", 0, result.getDimSize(0), rows, "the sum of the input rows");
}

LogicalResult PackColumnBlocksOp::verify() {
  if (failed(expectRowMajor(*this, "weight", getWeight())) ||
      failed(expectRank(*this, "weight", getWeight(), 2)))
    return failure();
  if (!hasColumnBlocks(getResult().getType()))
    return emitOpError() << "result must be encoded #q3.column_blocks, got "
                         << getResult().getType();
  auto weight = rankedType(getWeight()), result = rankedType(getResult());
  if (weight.getShape() != result.getShape() ||
      weight.getElementType() != result.getElementType())
    return emitOpError() << "result must have the weight's shape and element type, got "
                         << result << " for " << weight;
  if (weight.getElementTypeBitWidth() != 16)
    return emitOpError() << "column blocks hold 16-bit elements, got " << weight.getElementType();
  if (weight.getDimSize(0) % 16 != 0)
    return emitOpError() << "weight dimension 0 is " << weight.getDimSize(0)
                         << " but column blocks need a multiple of 16";
  if (weight.getDimSize(1) % 2 != 0)
    return emitOpError() << "weight dimension 1 is " << weight.getDimSize(1)
                         << " but column blocks need an even number";
  return success();
}

//===----------------------------------------------------------------------===//
// SplitColumnsOp
//===----------------------------------------------------------------------===//

LogicalResult SplitColumnsOp::verify() {
  if (failed(expectRank(*this, "input", getInput(), 2)))
    return failure();
  auto input = rankedType(getInput());
  int64_t columns = 0;
  for (auto [i, result] : llvm::enumerate(getResults())) {
    std::string what = "result #" + std::to_string(i);
    if (failed(expectRank(*this, what, result, 2)) ||
        failed(expectExtent(*this, what, 0, rankedType(result).getDimSize(0), input.getDimSize(0),
                            "input dimension 0 (rows)")))
      return failure();
    columns += rankedType(result).getDimSize(1);
  }
  return expectExtent(*this, "input", 1, input.getDimSize(1), columns,
                      "the sum of the result columns");
}

//===----------------------------------------------------------------------===//
// FusedLinearOp
//===----------------------------------------------------------------------===//

LogicalResult FusedLinearOp::verify() {
  if (failed(verifyProductOperands(*this, getInput(), getWeight(), getResult())))
    return failure();
  auto weight = rankedType(getWeight()), result = rankedType(getResult());
  int64_t outFeatures = weight.getDimSize(0);
  if (getSwiglu()) {
    if (outFeatures % 2 != 0)
      return emitOpError() << "swiglu needs an even number of weight rows (gate over up), got "
                           << outFeatures;
    outFeatures /= 2;
  }
  if (failed(expectExtent(*this, "result", 1, result.getDimSize(1), outFeatures,
                          getSwiglu() ? "half the weight rows (swiglu)"
                                      : "weight dimension 0 (out features)")))
    return failure();
  if (auto eps = getRmsNormEps(); eps && eps->convertToDouble() <= 0.0)
    return emitOpError() << "rms_norm_eps must be positive";
  if (Value gain = getGain()) {
    if (failed(expectRowMajor(*this, "gain", gain)) || failed(expectRank(*this, "gain", gain, 1)) ||
        failed(expectExtent(*this, "gain", 0, rankedType(gain).getDimSize(0),
                            weight.getDimSize(1), "weight dimension 1 (in features)")))
      return failure();
  }
  if (Value residual = getResidual())
    return expectSameShape(*this, "residual", residual, "result", getResult());
  return success();
}

//===----------------------------------------------------------------------===//
// QKNormRopeCacheOp
//===----------------------------------------------------------------------===//

LogicalResult QKNormRopeCacheOp::verify() {
  auto cache = getCache().getType().cast<KVCacheType>();
  if (failed(verifyCacheLayer(*this, getLayer(), cache)) ||
      failed(expectRank(*this, "qkv", getQkv(), 2)) ||
      failed(expectRank(*this, "query", getQuery(), 3)) ||
      failed(expectRank(*this, "keys", getKeys(), 3)) ||
      failed(expectRank(*this, "q_gain", getQGain(), 1)))
    return failure();
  auto query = rankedType(getQuery()), keys = rankedType(getKeys());
  const int64_t headDim = cache.getHeadDim(), kvHeads = cache.getKvHeads();
  if (headDim % 2 != 0)
    return emitOpError() << "head_dim must be even for RoPE, got " << headDim;
  if (failed(
          expectExtent(*this, "query", 2, query.getDimSize(2), headDim, "the cache's head_dim")) ||
      failed(expectExtent(*this, "keys", 1, keys.getDimSize(1), kvHeads, "the cache's kv_heads")) ||
      failed(expectExtent(*this, "keys", 2, keys.getDimSize(2), headDim, "the cache's head_dim")) ||
      failed(expectExtent(*this, "q_gain", 0, rankedType(getQGain()).getDimSize(0), headDim,
                          "the cache's head_dim")))
    return failure();
  const int64_t queryHeads = query.getDimSize(1);
  if (ShapedType::isDynamic(queryHeads) || queryHeads % kvHeads != 0)
    return emitOpError() << "query heads (" << extentString(queryHeads)
                         << ") must be a static multiple of the KV heads (" << kvHeads << ")";
  return expectExtent(*this, "qkv", 1, rankedType(getQkv()).getDimSize(1),
                      (queryHeads + 2 * kvHeads) * headDim,
                      "(query heads + 2 x kv heads) x head_dim");
}

//===----------------------------------------------------------------------===//
// DispatchOp
//===----------------------------------------------------------------------===//

LogicalResult DispatchOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto kernel = symbolTable.lookupNearestSymbolFrom<func::FuncOp>(*this, getKernelAttr());
  if (!kernel)
    return emitOpError() << "kernel @" << getKernel() << " is not a func.func in this module";
  if (!kernel->hasAttr(kKernelAttrName))
    return emitOpError() << "@" << getKernel() << " is not marked " << kKernelAttrName;
  FunctionType type = kernel.getFunctionType();
  if (type.getInputs() != ArrayRef<Type>(llvm::to_vector(getOperandTypes())) ||
      type.getResults() != ArrayRef<Type>(llvm::to_vector(getResultTypes())))
    return emitOpError() << "operand and result types do not match kernel @" << getKernel()
                         << " of type " << type;
  return success();
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

Operation *q3::ir::kernelComputeOp(func::FuncOp kernel) {
  Operation *compute = nullptr;
  for (Operation &op : kernel.getBody().front().without_terminator())
    if (!isa<MergeHeadsOp, ReshapeHeadsOp, SplitColumnsOp, ConcatRowsOp>(op))
      compute = &op;
  return compute;
}

LoweringConfigAttr q3::ir::loweringOf(func::FuncOp kernel) {
  if (auto lowering = kernel->getAttrOfType<LoweringConfigAttr>(kLoweringAttrName))
    return lowering;
  return LoweringConfigAttr::empty(kernel.getContext());
}

void q3::ir::setLowering(func::FuncOp kernel, LoweringConfigAttr lowering) {
  kernel->setAttr(kLoweringAttrName, lowering);
}

#define GET_OP_CLASSES
#include "ir/Q3Ops.cpp.inc"

llvm::SmallVector<LoweringConfigAttr> q3::ir::variantsOf(func::FuncOp kernel) {
  llvm::SmallVector<LoweringConfigAttr> variants;
  if (auto list = kernel->getAttrOfType<ArrayAttr>(kVariantsAttrName))
    for (Attribute variant : list)
      if (auto lowering = variant.dyn_cast<LoweringConfigAttr>())
        variants.push_back(lowering);
  return variants;
}

void q3::ir::updateLoweringAndVariants(
    func::FuncOp kernel, llvm::function_ref<LoweringConfigAttr(LoweringConfigAttr)> update) {
  setLowering(kernel, update(loweringOf(kernel)));
  llvm::SmallVector<LoweringConfigAttr> variants = variantsOf(kernel);
  if (variants.empty())
    return;
  llvm::SmallVector<Attribute> updated;
  for (LoweringConfigAttr variant : variants)
    updated.push_back(update(variant));
  kernel->setAttr(kVariantsAttrName, ArrayAttr::get(kernel.getContext(), updated));
}

bool q3::ir::choosesLikeProducts(func::FuncOp kernel) {
  auto choice = kernel->getAttrOfType<StringAttr>(kVariantChoiceAttrName);
  return choice && choice.getValue() == kVariantChoiceLikeProducts;
}

std::string q3::ir::variantName(func::FuncOp kernel, LoweringConfigAttr variant) {
  std::string name = variant.getMatmul().str();
  if (!choosesLikeProducts(kernel) && !variant.getTile().empty())
    name += "_" + std::to_string(variant.getTile()[0]);
  return name;
}
