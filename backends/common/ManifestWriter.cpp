//===- ManifestWriter.cpp - the target-stage IR as the artifact's manifest -===//
//
// Weights get ids in the order @forward defines them (q3.param and the
// weight transforms), so every transform's inputs have smaller ids. Each
// dispatch operand becomes a binding: @forward's arguments (tokens, start
// position, cache), a weight, an index constant, or the result of an
// earlier dispatch (an activation buffer of the plan, or one layer of the
// KV cache returned by a cache op). A kernel's signature is the kinds of its
// first dispatch's bindings with the shapes of its arguments; every other
// dispatch must bind the same kinds.
//
//===----------------------------------------------------------------------===//
#include "backends/common/ManifestWriter.h"
#include "backends/common/DTypes.h"
#include "ir/BuildGraph.h"
#include "ir/Q3Ops.h"
#include "passes/Statistics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <stdexcept>

using namespace mlir;
using namespace q3::ir;

namespace q3::backends {
namespace {

static_assert(manifest::kNoPrefetch == LoweringConfigAttr::kNoPrefetch,
              "the manifest's and the IR's prefetch_bytes = none");

using manifest::Binding;
using manifest::BindingKind;
using manifest::Slot;

bool isWeightDefinition(Operation *op) {
  return isa<ParamOp, FoldGainOp, ConcatRowsOp, PackColumnBlocksOp>(op);
}

manifest::Target targetOfModule(ModuleOp module) {
  auto dict = module->getAttrOfType<DictionaryAttr>("q3.target");
  if (!dict)
    throw std::runtime_error("module has no q3.target: run a target's passes (--target)");
  manifest::Target target;
  auto text = [&](StringRef key) {
    auto attr = dict.getAs<StringAttr>(key);
    return attr ? attr.str() : std::string();
  };
  target.backend = text("backend");
  target.cpu = text("cpu");
  target.llvmCpu = text("llvm_cpu");
  if (auto features = dict.getAs<ArrayAttr>("features"))
    for (Attribute feature : features)
      if (auto name = feature.dyn_cast<StringAttr>())
        target.requiredFeatures.push_back(name.str());
  return target;
}

/// JSON of a dictionary of the tuning record (strings, numbers, nested
/// dictionaries).
nlohmann::json jsonOf(Attribute attr) {
  if (auto dict = attr.dyn_cast_or_null<DictionaryAttr>()) {
    nlohmann::json object = nlohmann::json::object();
    for (NamedAttribute entry : dict)
      object[entry.getName().str()] = jsonOf(entry.getValue());
    return object;
  }
  if (auto b = attr.dyn_cast_or_null<BoolAttr>())
    return b.getValue();
  if (auto i = attr.dyn_cast_or_null<IntegerAttr>())
    return i.getInt();
  if (auto f = attr.dyn_cast_or_null<FloatAttr>())
    return f.getValueAsDouble();
  if (auto s = attr.dyn_cast_or_null<StringAttr>())
    return s.str();
  if (auto a = attr.dyn_cast_or_null<ArrayAttr>()) {
    nlohmann::json array = nlohmann::json::array();
    for (Attribute element : a)
      array.push_back(jsonOf(element));
    return array;
  }
  return nullptr;
}

class Writer {
public:
  explicit Writer(ModuleOp module) : module(module) {}

  manifest::Manifest write() {
    auto forward = module.lookupSymbol<func::FuncOp>(kEntryPoint);
    if (!forward || forward.getBody().front().getOps<DispatchOp>().empty())
      throw std::runtime_error("the manifest needs the dispatch stage (form-dispatches)");
    m.target = targetOfModule(module);
    m.format = "q3c-" + m.target.backend;
    m.config = configOf(module);
    auto cacheType = forward.getArgument(2).getType().cast<KVCacheType>();
    m.kvCache = dtypeOf(cacheType.getElement());
    readBufferPlan(module, m);
    collectWeights(forward, m, weightIds);
    for (DispatchOp dispatch : forward.getBody().front().getOps<DispatchOp>())
      addStep(dispatch);
    m.output = binding(forward.getBody().front().getTerminator()->getOperand(0));
    passes::PipelineStatistics stats = passes::collectStatistics(module, module);
    m.decodeBytesPerToken = stats.decodeBytesPerToken.value_or(0);
    if (auto tuning = module->getAttrOfType<DictionaryAttr>("q3.tuning"))
      m.tuning = jsonOf(tuning);
    return std::move(m);
  }

private:
  Binding binding(Value value) { return bindingOf(value, weightIds, results); }


  /// The binding of result `index` of `dispatch`: a buffer of the plan, or a
  /// layer of the cache when the kernel returns a cache op's keys/values.
  Binding resultBinding(DispatchOp dispatch, func::FuncOp kernel, unsigned index) {
    Value returned = kernel.getBody().front().getTerminator()->getOperand(index);
    Operation *producer = returned.getDefiningOp();
    Value layer, keys;
    if (auto fused = dyn_cast_or_null<QKNormRopeCacheOp>(producer);
        fused && returned != fused.getQuery()) {
      layer = fused.getLayer();
      keys = fused.getKeys();
    } else if (auto update = dyn_cast_or_null<KVCacheUpdateOp>(producer)) {
      layer = update.getLayer();
      keys = update.getKeys();
    }
    Binding b;
    if (layer) {
      auto argument = layer.dyn_cast<BlockArgument>();
      Binding layerBinding =
          argument ? binding(dispatch.getOperand(argument.getArgNumber())) : Binding{};
      if (!argument || layerBinding.kind != BindingKind::Constant)
        throw std::runtime_error("kernel @" + kernel.getSymName().str() +
                                 ": the cache layer must be an index constant of the dispatch");
      b.kind = returned == keys ? BindingKind::CacheKeys : BindingKind::CacheValues;
      b.layer = layerBinding.value;
      return b;
    }
    auto buffers = dispatch->getAttrOfType<DenseI64ArrayAttr>("q3.buffers");
    if (!buffers || buffers[index] < 0)
      throw std::runtime_error("dispatch of @" + kernel.getSymName().str() +
                               " has no buffer for result " + std::to_string(index) +
                               ": run plan-buffers");
    b.kind = BindingKind::Buffer;
    b.id = buffers[index];
    b.rowBytes = rowBytesOf(dispatch.getResult(index).getType());
    return b;
  }

  static manifest::ThreadScratch threadScratchOf(LoweringConfigAttr lowering) {
    return {lowering.getThreadScratchBytes(), lowering.getThreadScratchRowBytes()};
  }

  manifest::Kernel kernelOf(func::FuncOp kernel, const manifest::Step &step) {
    LoweringConfigAttr lowering = loweringOf(kernel);
    if (!lowering.hasGrid())
      throw std::runtime_error("kernel @" + kernel.getSymName().str() +
                               " has no grid in its q3.lowering: run the target passes");
    manifest::Kernel k;
    k.name = kernel.getSymName().str();
    k.gridKind = lowering.getGridKind() == "fixed" ? manifest::GridKind::Fixed
                                                   : manifest::GridKind::PerRow;
    k.gridCount = lowering.getGridCount();
    k.matmul = lowering.getMatmul().str();
    k.tile.assign(lowering.getTile().begin(), lowering.getTile().end());
    if (!lowering.getWeightPacking().empty())
      k.weightPacking = lowering.packsPerCall() ? manifest::WeightPacking::PerCall
                                                : manifest::WeightPacking::AtLoad;
    k.prefillChunks = lowering.getPrefillChunks() ? lowering.getPrefillChunks() : 1;
    k.decodeChunks = lowering.getDecodeChunks() ? lowering.getDecodeChunks() : 1;
    k.prefetchBytes = lowering.getPrefetchBytes();
    k.decodeStreams = lowering.getDecodeStreams();
    k.decodeAccumulators = lowering.getDecodeAccumulators();
    k.workspaceBytes = lowering.getWorkspaceBytes();
    k.threadScratch = threadScratchOf(lowering);
    for (LoweringConfigAttr variant : variantsOf(kernel))
      k.variants.push_back(
          {variantName(kernel, variant), variant.getMatmul().str(),
           std::vector<int64_t>(variant.getTile().begin(), variant.getTile().end()),
           manifest::matmulRequiredFeatures(variant.getMatmul().str()), threadScratchOf(variant)});
    if (choosesLikeProducts(kernel))
      k.variantChoice = manifest::VariantChoice::LikeProducts;
    FunctionType type = kernel.getFunctionType();
    for (auto [b, t] : llvm::zip(step.operands, type.getInputs()))
      k.operands.push_back(slotOf(b, t, m.kvCache));
    for (auto [b, t] : llvm::zip(step.results, type.getResults()))
      k.results.push_back(slotOf(b, t, m.kvCache));
    return k;
  }

  static bool sameKinds(const std::vector<Slot> &slots, const std::vector<Slot> &expected) {
    if (slots.size() != expected.size())
      return false;
    for (size_t i = 0; i < slots.size(); ++i)
      if (slots[i].kind != expected[i].kind)
        return false;
    return true;
  }

  void addStep(DispatchOp dispatch) {
    auto kernel = module.lookupSymbol<func::FuncOp>(dispatch.getKernel());
    manifest::Step step;
    step.kernel = dispatch.getKernel().str();
    for (Value operand : dispatch.getOperands())
      step.operands.push_back(binding(operand));
    for (unsigned i = 0; i < dispatch.getNumResults(); ++i) {
      Binding b = resultBinding(dispatch, kernel, i);
      results[dispatch.getResult(i)] = b;
      step.results.push_back(b);
    }
    manifest::Kernel k = kernelOf(kernel, step);
    auto [it, inserted] = kernelIndex.try_emplace(k.name, m.kernels.size());
    if (inserted) {
      m.kernels.push_back(std::move(k));
    } else {
      const manifest::Kernel &first = m.kernels[it->second];
      if (!sameKinds(k.operands, first.operands) || !sameKinds(k.results, first.results))
        throw std::runtime_error("kernel @" + k.name +
                                 " is dispatched with operands of different kinds");
    }
    m.steps.push_back(std::move(step));
  }

  ModuleOp module;
  manifest::Manifest m;
  llvm::DenseMap<Value, int64_t> weightIds;
  llvm::DenseMap<Value, Binding> results;
  llvm::StringMap<size_t> kernelIndex;
};

} // namespace

std::vector<int64_t> shapeOf(Type type) {
  auto shape = type.cast<RankedTensorType>().getShape();
  return std::vector<int64_t>(shape.begin(), shape.end());
}

int64_t rowBytesOf(Type type) {
  int64_t bytes = 4;
  for (int64_t extent : type.cast<RankedTensorType>().getShape().drop_front())
    bytes *= extent;
  return bytes;
}

Binding bindingOf(Value value, const llvm::DenseMap<Value, int64_t> &weightIds,
                  const llvm::DenseMap<Value, Binding> &produced) {
  Binding b;
  if (auto argument = value.dyn_cast<BlockArgument>()) {
    static const BindingKind kinds[] = {BindingKind::Tokens, BindingKind::StartPos,
                                        BindingKind::Cache};
    b.kind = kinds[argument.getArgNumber()];
    return b;
  }
  if (auto it = weightIds.find(value); it != weightIds.end()) {
    b.kind = BindingKind::Weight;
    b.id = it->second;
    return b;
  }
  if (auto constant = value.getDefiningOp<arith::ConstantIndexOp>()) {
    b.kind = BindingKind::Constant;
    b.value = constant.value();
    return b;
  }
  if (auto it = produced.find(value); it != produced.end())
    return it->second;
  throw std::runtime_error("the runtime cannot bind a value defined by '" +
                           value.getDefiningOp()->getName().getStringRef().str() +
                           "' outside a kernel (a view that no kernel absorbed?)");
}

manifest::Slot slotOf(const manifest::Binding &b, Type type, runtime::DType kvCache) {
  using manifest::BindingKind;
  using manifest::SlotKind;
  manifest::Slot slot;
  switch (b.kind) {
  case BindingKind::Buffer:
    slot.kind = SlotKind::Buffer;
    slot.rowBytes = rowBytesOf(type);
    break;
  case BindingKind::Tokens:
    slot.kind = SlotKind::Tokens;
    break;
  case BindingKind::Weight:
    slot.kind = SlotKind::Weight;
    slot.shape = shapeOf(type);
    slot.dtype = dtypeOf(type);
    slot.layout =
        hasColumnBlocks(type) ? manifest::Layout::ColumnBlocks : manifest::Layout::RowMajor;
    break;
  case BindingKind::Cache: {
    auto cache = type.cast<KVCacheType>();
    slot.kind = SlotKind::Cache;
    slot.shape = {cache.getLayers(), cache.getKvHeads(), cache.getHeadDim()};
    slot.dtype = dtypeOf(cache.getElement());
    break;
  }
  case BindingKind::CacheKeys:
  case BindingKind::CacheValues:
    slot.kind = SlotKind::CacheLayer;
    if (auto cache = type.dyn_cast<KVCacheType>()) {
      slot.shape = {cache.getKvHeads(), cache.getHeadDim()};
    } else {
      auto shape = type.cast<RankedTensorType>().getShape();
      slot.shape = {shape[1], shape[2]};
    }
    slot.dtype = kvCache;
    break;
  case BindingKind::StartPos:
  case BindingKind::Constant:
    slot.kind = SlotKind::Index;
    break;
  }
  return slot;
}

void readBufferPlan(ModuleOp module, manifest::Manifest &m) {
  auto plan = module->getAttrOfType<DictionaryAttr>("q3.buffer_plan");
  if (!plan)
    throw std::runtime_error("module has no q3.buffer_plan: run plan-buffers");
  m.prefillRows = plan.getAs<IntegerAttr>("max_seq_len").getInt();
  for (int64_t bytes : plan.getAs<DenseI64ArrayAttr>("buffer_bytes").asArrayRef())
    m.bufferRowBytes.push_back(bytes / m.prefillRows);
}

void collectWeights(func::FuncOp forward, manifest::Manifest &m,
                    llvm::DenseMap<Value, int64_t> &weightIds) {
  for (Operation &op : forward.getBody().front()) {
    if (!isWeightDefinition(&op))
      continue;
    Value result = op.getResult(0);
    manifest::Weight w;
    w.id = int64_t(m.weights.size());
    w.shape = shapeOf(result.getType());
    w.dtype = dtypeOf(result.getType());
    w.layout = hasColumnBlocks(result.getType()) ? manifest::Layout::ColumnBlocks
                                                 : manifest::Layout::RowMajor;
    if (auto param = dyn_cast<ParamOp>(op)) {
      w.kind = manifest::WeightKind::Param;
      w.name = param.getName().str();
    } else {
      w.kind = isa<FoldGainOp>(op)     ? manifest::WeightKind::FoldGain
               : isa<ConcatRowsOp>(op) ? manifest::WeightKind::ConcatRows
                                       : manifest::WeightKind::PackColumnBlocks;
      for (Value input : op.getOperands())
        w.inputs.push_back(weightIds.lookup(input));
    }
    weightIds[result] = w.id;
    m.weights.push_back(std::move(w));
  }
}

manifest::ModelConfig configOf(ModuleOp module) {
  auto dict = module->getAttrOfType<DictionaryAttr>("q3.config");
  if (!dict)
    throw std::runtime_error("module has no q3.config: build it with q3c from a config");
  auto integer = [&](StringRef key) -> int64_t {
    auto attr = dict.getAs<IntegerAttr>(key);
    if (!attr)
      throw std::runtime_error("q3.config has no integer '" + key.str() + "'");
    return attr.getInt();
  };
  auto number = [&](StringRef key) -> double {
    auto attr = dict.getAs<FloatAttr>(key);
    if (!attr)
      throw std::runtime_error("q3.config has no number '" + key.str() + "'");
    return attr.getValueAsDouble();
  };
  manifest::ModelConfig c;
  c.hiddenSize = integer("hidden_size");
  c.intermediateSize = integer("intermediate_size");
  c.numHiddenLayers = integer("num_hidden_layers");
  c.numAttentionHeads = integer("num_attention_heads");
  c.numKeyValueHeads = integer("num_key_value_heads");
  c.headDim = integer("head_dim");
  c.vocabSize = integer("vocab_size");
  c.maxPositionEmbeddings = integer("max_position_embeddings");
  c.rmsNormEps = number("rms_norm_eps");
  c.ropeTheta = number("rope_theta");
  auto tied = dict.getAs<BoolAttr>("tie_word_embeddings");
  c.tieWordEmbeddings = tied && tied.getValue();
  if (auto dtype = dict.getAs<StringAttr>("torch_dtype"))
    c.torchDtype = dtype.str();
  return c;
}

manifest::Manifest manifestOf(ModuleOp module) { return Writer(module).write(); }

} // namespace q3::backends
