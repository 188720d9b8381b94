//===- Statistics.cpp - what the pipeline did, in numbers -----------------===//
#include "passes/Statistics.h"
#include "ir/BuildGraph.h"
#include "ir/Q3Ops.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;
using namespace q3::ir;

namespace q3::passes {
namespace {

int64_t elementBytes(Type type) { return (type.getIntOrFloatBitWidth() + 7) / 8; }

/// Bytes of a tensor with every dynamic extent taken as `rows`.
int64_t tensorBytes(Type type, int64_t rows) {
  auto tensor = type.dyn_cast<RankedTensorType>();
  if (!tensor)
    return 0;
  int64_t bytes = elementBytes(tensor.getElementType());
  for (int64_t extent : tensor.getShape())
    bytes *= ShapedType::isDynamic(extent) ? rows : extent;
  return bytes;
}

bool isWeight(Value value) {
  Operation *def = value.getDefiningOp();
  return def && isa<ParamOp, FoldGainOp, ConcatRowsOp, PackColumnBlocksOp>(def);
}

/// The layer a dispatch belongs to, from the Hugging Face names in its location.
std::optional<int64_t> layerOf(Location loc) {
  std::optional<int64_t> layer;
  loc->walk([&](Location inner) {
    if (auto name = inner.dyn_cast<NameLoc>()) {
      StringRef text = name.getName().strref();
      if (text.consume_front("model.layers.")) {
        int64_t index;
        if (!text.split('.').first.getAsInteger(10, index)) {
          layer = index;
          return WalkResult::interrupt();
        }
      }
    }
    return WalkResult::advance();
  });
  return layer;
}

struct DecodeBytes {
  int64_t weights = 0, activations = 0;
};

/// Bytes one dispatch moves at T = 1, position 0.
DecodeBytes decodeBytesOf(DispatchOp dispatch, func::FuncOp kernel) {
  DecodeBytes bytes;
  Block &body = kernel.getBody().front();
  bool isEmbedding = !body.getOps<EmbeddingOp>().empty();
  llvm::DenseSet<Value> seen;
  for (Value operand : dispatch.getOperands()) {
    if (!seen.insert(operand).second)
      continue;
    if (isWeight(operand)) {
      auto type = operand.getType().cast<RankedTensorType>();
      // An embedding lookup reads one row of its table per token.
      bytes.weights += isEmbedding ? type.getDimSize(1) * elementBytes(type.getElementType())
                                   : tensorBytes(type, 1);
    } else {
      bytes.activations += tensorBytes(operand.getType(), 1);
    }
  }
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (Value result : ret.getOperands()) {
    Operation *producer = result.getDefiningOp();
    bool isCacheView = (isa_and_nonnull<QKNormRopeCacheOp>(producer) &&
                        result != cast<QKNormRopeCacheOp>(producer).getQuery()) ||
                       isa_and_nonnull<KVCacheUpdateOp>(producer);
    if (!isCacheView)
      bytes.activations += tensorBytes(result.getType(), 1);
  }
  // The new K and V rows written into the cache, in its element type.
  for (Operation &op : body)
    if (isa<QKNormRopeCacheOp, KVCacheUpdateOp>(op)) {
      auto cache = op.getOperand(isa<KVCacheUpdateOp>(op) ? 0 : 3).getType().cast<KVCacheType>();
      bytes.activations +=
          2 * cache.getKvHeads() * cache.getHeadDim() * elementBytes(cache.getElement());
    }
  return bytes;
}

} // namespace

std::map<std::string, int64_t> countOpsByKind(ModuleOp module) {
  std::map<std::string, int64_t> counts;
  module.walk([&](Operation *op) {
    if (op != module.getOperation())
      counts[op->getName().getStringRef().str()]++;
  });
  return counts;
}

/// The most thread scratch (q3.lowering's thread_scratch) any kernel or
/// variant of `module` takes for a dispatch of `rows` rows.
int64_t largestThreadScratch(ModuleOp module, int64_t rows) {
  int64_t largest = 0;
  module.walk([&](func::FuncOp kernel) { // loweringOf: an empty config where none is set
    largest = std::max(largest, loweringOf(kernel).threadScratchBytesFor(rows));
    for (LoweringConfigAttr variant : variantsOf(kernel))
      largest = std::max(largest, variant.threadScratchBytesFor(rows));
  });
  return largest;
}

PipelineStatistics collectStatistics(ModuleOp graph, ModuleOp compiled) {
  PipelineStatistics stats;
  stats.opsByKindBefore = countOpsByKind(graph);
  stats.opsByKindAfter = countOpsByKind(compiled);
  auto forward = compiled.lookupSymbol<func::FuncOp>(kEntryPoint);
  if (!forward || forward.getBody().front().getOps<DispatchOp>().empty())
    return stats;

  std::map<int64_t, int64_t> perLayer;
  int64_t outside = 0;
  DecodeBytes total;
  llvm::DenseSet<Attribute> kernels;
  for (DispatchOp dispatch : forward.getBody().front().getOps<DispatchOp>()) {
    if (std::optional<int64_t> layer = layerOf(dispatch.getLoc()))
      perLayer[*layer]++;
    else
      ++outside;
    kernels.insert(dispatch.getKernelAttr());
    auto kernel = compiled.lookupSymbol<func::FuncOp>(dispatch.getKernel());
    DecodeBytes bytes = decodeBytesOf(dispatch, kernel);
    total.weights += bytes.weights;
    total.activations += bytes.activations;
  }
  int64_t most = 0;
  for (auto [layer, count] : perLayer)
    most = std::max(most, count);
  stats.dispatchesPerLayer = most;
  stats.dispatchesOutsideLayers = outside;
  stats.distinctKernels = int64_t(kernels.size());
  stats.decodeWeightBytes = total.weights;
  stats.decodeActivationBytes = total.activations;
  stats.decodeBytesPerToken = total.weights + total.activations;
  if (auto plan = compiled->getAttrOfType<DictionaryAttr>("q3.buffer_plan")) {
    stats.peakActivationBytes = plan.getAs<IntegerAttr>("peak_activation_bytes").getInt();
    stats.maxSeqLen = plan.getAs<IntegerAttr>("max_seq_len").getInt();
    stats.threadScratchBytes = largestThreadScratch(compiled, *stats.maxSeqLen);
  }
  return stats;
}

} // namespace q3::passes
