//===- PlanBuffers.cpp - liveness-based reuse of activation buffers -------===//
//
// Walks @forward's dispatches in order. Each activation result gets a buffer
// that is free at that point (views share their source's buffer); a buffer is
// free again after the last use of every value in it. Among free buffers the
// smallest one that is large enough is taken, else the largest is grown, else
// a new one is made. Sizes assume `max-seq-len` rows.
//
// Keys and values returned by the cache ops are views of the KV cache, not
// activations, and get buffer -1.
//
// After:
//   %x1 = q3.dispatch @fused_linear_residual_0(...) {q3.buffers = array<i64: 2>} : ...
//   module attributes {q3.buffer_plan = {buffer_bytes = array<i64: ...>,
//                                        max_seq_len = 4096 : i64, peak_activation_bytes = ... :
//                                        i64}}
//
//===----------------------------------------------------------------------===//
#include "ir/BuildGraph.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

namespace q3::passes {
#define GEN_PASS_DEF_PLANBUFFERS
#include "passes/Passes.h.inc"
} // namespace q3::passes

using namespace mlir;
using namespace q3::ir;

namespace q3::passes {
namespace {

/// Whether `result` of a dispatch is a view of the KV cache.
bool isCacheView(ModuleOp module, DispatchOp dispatch, unsigned resultIndex) {
  auto kernel = module.lookupSymbol<func::FuncOp>(dispatch.getKernel());
  auto ret = cast<func::ReturnOp>(kernel.getBody().front().getTerminator());
  Operation *producer = ret.getOperand(resultIndex).getDefiningOp();
  if (auto fused = dyn_cast_or_null<QKNormRopeCacheOp>(producer))
    return ret.getOperand(resultIndex) != fused.getQuery();
  return isa_and_nonnull<KVCacheUpdateOp>(producer);
}

int64_t activationBytes(Value value, int64_t maxSeqLen) {
  auto type = value.getType().dyn_cast<RankedTensorType>();
  if (!type || !type.getElementType().isF32())
    return 0;
  int64_t bytes = 4;
  for (int64_t extent : type.getShape())
    bytes *= ShapedType::isDynamic(extent) ? maxSeqLen : extent;
  return bytes;
}

class BufferPlanner {
public:
  BufferPlanner(ModuleOp module, int64_t maxSeqLen) : module(module), maxSeqLen(maxSeqLen) {}

  void plan(func::FuncOp forward) {
    Block &body = forward.getBody().front();
    computeLastUses(body);
    for (Operation &op : body) {
      if (auto dispatch = dyn_cast<DispatchOp>(op))
        assign(dispatch);
      else if (isa<ReshapeHeadsOp, MergeHeadsOp, SplitColumnsOp>(op))
        for (Value result : op.getResults())
          shareBuffer(op.getOperand(0), result);
      releaseBuffersDeadAfter(&op);
    }
  }

  void annotate() {
    OpBuilder builder(module.getContext());
    int64_t peak = 0;
    for (int64_t bytes : bufferBytes)
      peak += bytes;
    NamedAttrList plan;
    plan.append("max_seq_len", builder.getI64IntegerAttr(maxSeqLen));
    plan.append("buffer_bytes", builder.getDenseI64ArrayAttr(bufferBytes));
    plan.append("peak_activation_bytes", builder.getI64IntegerAttr(peak));
    module->setAttr("q3.buffer_plan", plan.getDictionary(module.getContext()));
  }

private:
  void computeLastUses(Block &body) {
    int64_t index = 0;
    for (Operation &op : body) {
      position[&op] = index;
      for (Value result : op.getResults())
        lastUse[result] = index; // an unused result dies where it is made
      for (Value operand : op.getOperands())
        lastUse[operand] = index;
      ++index;
    }
  }

  void assign(DispatchOp dispatch) {
    SmallVector<int64_t> ids;
    for (auto [i, result] : llvm::enumerate(dispatch.getResults())) {
      int64_t bytes = activationBytes(result, maxSeqLen);
      if (bytes == 0 || isCacheView(module, dispatch, i)) {
        ids.push_back(-1);
        continue;
      }
      int64_t id = takeFreeBuffer(bytes);
      bufferOf[result] = id;
      liveUntil[id] = lastUse.lookup(result);
      ids.push_back(id);
    }
    dispatch->setAttr("q3.buffers", DenseI64ArrayAttr::get(module.getContext(), ids));
  }

  /// A view lives in its source's buffer and keeps it alive.
  void shareBuffer(Value source, Value view) {
    auto it = bufferOf.find(source);
    if (it == bufferOf.end())
      return;
    const int64_t id = it->second; // inserting `view` below may move the entry
    bufferOf[view] = id;
    liveUntil[id] = std::max(liveUntil[id], lastUse.lookup(view));
  }

  int64_t takeFreeBuffer(int64_t bytes) {
    std::optional<size_t> best, largest;
    for (size_t i = 0; i < freeBuffers.size(); ++i) {
      int64_t size = bufferBytes[freeBuffers[i]];
      if (size >= bytes && (!best || size < bufferBytes[freeBuffers[*best]]))
        best = i;
      if (!largest || size > bufferBytes[freeBuffers[*largest]])
        largest = i;
    }
    std::optional<size_t> chosen = best ? best : largest;
    if (!chosen) {
      bufferBytes.push_back(bytes);
      busy.insert(int64_t(bufferBytes.size()) - 1);
      return int64_t(bufferBytes.size()) - 1;
    }
    int64_t id = freeBuffers[*chosen];
    freeBuffers.erase(freeBuffers.begin() + *chosen);
    bufferBytes[id] = std::max(bufferBytes[id], bytes);
    busy.insert(id);
    return id;
  }

  void releaseBuffersDeadAfter(Operation *op) {
    const int64_t index = position.lookup(op);
    for (int64_t id : llvm::to_vector(busy))
      if (liveUntil.lookup(id) <= index) {
        busy.remove(id);
        freeBuffers.push_back(id);
      }
  }

  ModuleOp module;
  int64_t maxSeqLen;
  llvm::DenseMap<Operation *, int64_t> position;
  llvm::DenseMap<Value, int64_t> lastUse; // index of the last op reading the value
  llvm::DenseMap<Value, int64_t> bufferOf;
  llvm::DenseMap<int64_t, int64_t> liveUntil; // buffer -> last use of its current tenants
  llvm::SetVector<int64_t> busy;
  SmallVector<int64_t> bufferBytes;
  SmallVector<int64_t> freeBuffers;
};

struct PlanBuffersPass : impl::PlanBuffersBase<PlanBuffersPass> {
  using PlanBuffersBase::PlanBuffersBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>(ir::kEntryPoint);
    if (!forward) {
      module.emitError() << "plan-buffers: no func.func @" << ir::kEntryPoint;
      return signalPassFailure();
    }
    if (maxSeqLen <= 0) {
      module.emitError() << "plan-buffers: max-seq-len must be positive";
      return signalPassFailure();
    }
    BufferPlanner planner(module, maxSeqLen);
    planner.plan(forward);
    planner.annotate();
  }
};

} // namespace

std::unique_ptr<Pass> createPlanBuffersPass() { return std::make_unique<PlanBuffersPass>(); }

std::unique_ptr<Pass> createPlanBuffersPass(int64_t maxSeqLen) {
  PlanBuffersOptions options;
  options.maxSeqLen = maxSeqLen;
  return std::make_unique<PlanBuffersPass>(options);
}

} // namespace q3::passes
