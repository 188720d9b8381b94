//===- ScheduleWriter.cpp - the typed manifest of a Vulkan artifact -------===//
#include "backends/vulkan/ScheduleWriter.h"
#include "backends/common/ManifestWriter.h"
#include "backends/vulkan/LoweringConfig.h"

#include "backends/common/DTypes.h"
#include "ir/BuildGraph.h"
#include "ir/Q3Ops.h"
#include "passes/Statistics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <stdexcept>

using namespace mlir;

namespace q3::vulkan {
namespace {

using manifest::Binding;
using manifest::BindingKind;

int64_t rowBytesOf(Value activation) { return backends::rowBytesOf(activation.getType()); }

class Writer {
public:
  explicit Writer(ModuleOp module) : module(module) {}

  manifest::Manifest write() {
    auto forward = module.lookupSymbol<func::FuncOp>(ir::kEntryPoint);
    if (!forward || forward.getBody().front().getOps<ir::DispatchOp>().empty())
      throw std::runtime_error("compiling for Vulkan needs the dispatch stage (--emit=dispatch)");
    m.format = manifest::kVulkanFormat;
    m.target.backend = "vulkan";
    m.config = backends::configOf(module);
    auto cacheType = forward.getArgument(2).getType().cast<ir::KVCacheType>();
    m.kvCache = backends::dtypeOf(cacheType.getElement());
    backends::readBufferPlan(module, m);
    backends::collectWeights(forward, m, weightIds);
    for (ir::DispatchOp dispatch : forward.getBody().front().getOps<ir::DispatchOp>())
      addStep(dispatch);
    m.output = describe(forward.getBody().front().getTerminator()->getOperand(0));
    passes::PipelineStatistics stats = passes::collectStatistics(module, module);
    m.decodeBytesPerToken = stats.decodeBytesPerToken.value_or(0);
    return std::move(m);
  }

private:
  void addStep(ir::DispatchOp dispatch) {
    auto kernel = module.lookupSymbol<func::FuncOp>(dispatch.getKernel());
    const bool layerCache =
        loweringConfig(kernel, "cache_binding") == StringAttr::get(module.getContext(), "layer");
    manifest::Step step;
    step.kernel = dispatch.getKernel().str();
    FunctionType signature = kernel.getFunctionType();
    // The IR type of each binding, for the kernel's slots: a cache operand
    // the kernel reads a layer of is bound as two (keys, values).
    std::vector<Type> operandTypes;
    for (auto [i, operand] : llvm::enumerate(dispatch.getOperands())) {
      if (layerCache && operand.getType().isa<ir::KVCacheType>()) {
        Binding layer = describe(dispatch.getOperand(layerOperand(kernel)));
        if (layer.kind != BindingKind::Constant)
          throw std::runtime_error("the cache layer of a dispatch must be a constant");
        Binding keys, values;
        keys.kind = BindingKind::CacheKeys;
        values.kind = BindingKind::CacheValues;
        keys.layer = values.layer = layer.value;
        step.operands.push_back(keys);
        step.operands.push_back(values);
        operandTypes.insert(operandTypes.end(), 2, signature.getInput(unsigned(i)));
        continue;
      }
      step.operands.push_back(describe(operand));
      operandTypes.push_back(signature.getInput(unsigned(i)));
    }
    auto buffers = dispatch->getAttrOfType<DenseI64ArrayAttr>("q3.buffers");
    if (!buffers)
      throw std::runtime_error("dispatch without q3.buffers: run plan-buffers");
    for (auto [i, result] : llvm::enumerate(dispatch.getResults())) {
      Binding bound;
      if (std::optional<Binding> view = cacheView(kernel, dispatch, unsigned(i))) {
        bound = *view;
      } else {
        bound.kind = BindingKind::Buffer;
        bound.id = buffers[i];
        bound.rowBytes = rowBytesOf(result);
      }
      values[result] = bound;
      step.results.push_back(bound);
    }
    if (kernelIndex.try_emplace(step.kernel, m.kernels.size()).second)
      m.kernels.push_back(kernelOf(kernel, step, operandTypes));
    m.steps.push_back(std::move(step));
  }

  /// The kernel's signature: the slots of its first dispatch's bindings, of
  /// `operandTypes` and its results' types; its grid: the one
  /// vulkan-workgroups recorded in its `#q3.lowering`.
  manifest::Kernel kernelOf(func::FuncOp kernel, const manifest::Step &step,
                            const std::vector<Type> &operandTypes) {
    ir::LoweringConfigAttr lowering = ir::loweringOf(kernel);
    if (!lowering.hasGrid())
      throw std::runtime_error("kernel @" + step.kernel +
                               " has no grid in its q3.lowering: run the Vulkan target passes");
    manifest::Kernel k;
    k.name = step.kernel;
    k.gridKind = lowering.getGridKind() == "fixed" ? manifest::GridKind::Fixed
                                                   : manifest::GridKind::PerRow;
    k.gridCount = lowering.getGridCount();
    k.workspaceBytes = lowering.getWorkspaceBytes();
    for (auto [b, type] : llvm::zip(step.operands, operandTypes))
      k.operands.push_back(backends::slotOf(b, type, m.kvCache));
    for (auto [b, type] : llvm::zip(step.results, kernel.getFunctionType().getResults()))
      k.results.push_back(backends::slotOf(b, type, m.kvCache));
    return k;
  }

  Binding describe(Value value) { return backends::bindingOf(value, weightIds, values); }

  /// Which operand of a q/k-norm + RoPE + cache kernel's dispatch is its layer.
  unsigned layerOperand(func::FuncOp kernel) {
    auto fused = dyn_cast_or_null<ir::QKNormRopeCacheOp>(kernelAnchor(kernel));
    if (!fused)
      throw std::runtime_error("cache_binding on a kernel that does not write the cache");
    return fused.getLayer().cast<BlockArgument>().getArgNumber();
  }

  /// The keys and values a cache op returns are views of one layer's cache.
  std::optional<Binding> cacheView(func::FuncOp kernel, ir::DispatchOp dispatch, unsigned index) {
    Value returned = kernel.getBody().front().getTerminator()->getOperand(index);
    auto fused = returned.getDefiningOp<ir::QKNormRopeCacheOp>();
    if (!fused || returned == fused.getQuery())
      return std::nullopt;
    Binding layer = describe(dispatch.getOperand(layerOperand(kernel)));
    Binding b;
    b.kind = returned == fused.getKeys() ? BindingKind::CacheKeys : BindingKind::CacheValues;
    b.layer = layer.value;
    return b;
  }

  ModuleOp module;
  manifest::Manifest m;
  llvm::DenseMap<Value, int64_t> weightIds;
  llvm::DenseMap<Value, Binding> values;
  llvm::StringMap<size_t> kernelIndex;
};

} // namespace

manifest::Manifest writeSchedule(ModuleOp module) { return Writer(module).write(); }

} // namespace q3::vulkan
