//===- KernelSelection.cpp - a dispatch-stage kernel -> its Vulkan kernel -===//
#include "backends/vulkan/KernelSelection.h"
#include "backends/vulkan/KernelFacts.h"
#include "backends/vulkan/LoweringConfig.h"

#include "ir/BuildGraph.h"
#include "ir/Q3Ops.h"

#include "mlir/IR/BuiltinTypes.h"

#include <stdexcept>

using namespace mlir;

namespace q3::vulkan {
namespace {

llvm::ArrayRef<int64_t> shapeOf(Value v) { return v.getType().cast<RankedTensorType>().getShape(); }

[[noreturn]] void missing(func::FuncOp kernel, const char *entry) {
  throw std::runtime_error("kernel @" + kernel.getSymName().str() + " has no lowering config '" +
                           entry + "': run the Vulkan target passes");
}

/// The KV cache's element type: @forward's cache argument's (attention
/// reads the cache through tensors that do not carry it).
Type cacheElementOf(func::FuncOp kernel) {
  auto module = kernel->getParentOfType<ModuleOp>();
  if (auto forward = module.lookupSymbol<func::FuncOp>(ir::kEntryPoint))
    for (Type type : forward.getArgumentTypes())
      if (auto cache = type.dyn_cast<ir::KVCacheType>())
        return cache.getElement();
  throw std::runtime_error("kernel @" + kernel.getSymName().str() +
                           ": the module's @forward has no KV cache argument");
}

MatMulTiling tilingOf(func::FuncOp kernel) {
  auto tile = loweringConfig(kernel, "prefill_tile").dyn_cast_or_null<DenseI64ArrayAttr>();
  if (!tile || tile.size() != 5 || !loweringConfig(kernel, "decode"))
    missing(kernel, "prefill_tile");
  return {tile[0], tile[1], tile[2], tile[3], tile[4]};
}

} // namespace

CompiledKernel compileKernel(KernelCompiler &compiler, func::FuncOp kernel) {
  const std::string name = kernel.getSymName().str();
  const int64_t perPart = loweringConfigInt(kernel, "weight_rows_per_part").value_or(0);
  if (ir::loweringOf(kernel).getWorkspaceBytes() != 0 && !attentionFacts(kernel))
    throw std::runtime_error("kernel @" + name +
                             " has workspace_bytes in its q3.lowering, which only a split "
                             "decode attention uses on Vulkan");
  if (std::optional<LinearKernel> linear = linearFacts(kernel)) {
    std::optional<int64_t> rows = loweringConfigInt(kernel, "decode_rows");
    std::optional<int64_t> workgroup = loweringConfigInt(kernel, "decode_workgroup");
    if (!rows || !workgroup)
      missing(kernel, "decode_rows");
    MatVecShape matVec{*rows, *workgroup,
                       loweringConfigInt(kernel, "decode_column_subgroups").value_or(1)};
    if (!validColumnSubgroups(matVec.columnSubgroups))
      throw std::runtime_error("kernel @" + name +
                               ": decode_column_subgroups must be a power of "
                               "two from 1 to " +
                               std::to_string(kMaxColumnSubgroups) + ", not " +
                               std::to_string(matVec.columnSubgroups));
    return compiler.linear(*linear, tilingOf(kernel), perPart, matVec);
  }
  if (std::optional<EmbeddingKernel> table = embeddingFacts(kernel)) {
    llvm::ArrayRef<int64_t> workgroup = ir::loweringOf(kernel).getWorkgroupSize();
    if (workgroup.size() != 1)
      missing(kernel, "workgroup_size");
    table->workgroup = workgroup[0];
    return compiler.embedding(*table, perPart);
  }
  Operation *anchor = kernelAnchor(kernel);
  if (auto fused = dyn_cast_or_null<ir::QKNormRopeCacheOp>(anchor)) {
    auto cache = fused.getCache().getType().cast<ir::KVCacheType>();
    if (loweringConfig(kernel, "cache_binding") != StringAttr::get(kernel.getContext(), "layer"))
      missing(kernel, "cache_binding");
    QKNormRopeKernel qk{name,
                        shapeOf(fused.getQuery())[1],
                        cache.getKvHeads(),
                        cache.getHeadDim(),
                        dtypeOf(fused.getQGain().getType()),
                        fused.getEps().convertToDouble(),
                        fused.getTheta().convertToDouble()};
    std::optional<int64_t> subgroups = loweringConfigInt(kernel, "subgroups");
    if (!subgroups)
      missing(kernel, "subgroups");
    qk.subgroups = *subgroups;
    qk.cache = dtypeOf(cache.getElement());
    return compiler.qkNormRope(qk);
  }
  if (std::optional<AttentionKernel> facts = attentionFacts(kernel)) {
    AttentionKernel &a = *facts;
    std::optional<int64_t> subgroups = loweringConfigInt(kernel, "subgroups");
    std::optional<int64_t> minSubgroup = loweringConfigInt(kernel, "min_subgroup_size");
    if (!subgroups || !minSubgroup)
      missing(kernel, "subgroups");
    a.subgroups = *subgroups;
    a.decodeSubgroups = loweringConfigInt(kernel, "decode_subgroups").value_or(*subgroups);
    a.rowsPerWorkgroup = loweringConfigInt(kernel, "prefill_rows_per_workgroup").value_or(1);
    if (a.rowsPerWorkgroup < 1 || a.rowsPerWorkgroup > 64)
      throw std::runtime_error("kernel @" + name +
                               ": prefill_rows_per_workgroup must be 1 to 64, not " +
                               std::to_string(a.rowsPerWorkgroup));
    a.minSubgroupSize = *minSubgroup;
    a.cache = dtypeOf(cacheElementOf(kernel));
    a.decodeSplits = loweringConfigInt(kernel, "decode_splits").value_or(1);
    a.splitPositions = loweringConfigInt(kernel, "decode_split_positions").value_or(1);
    if (a.decodeSplits < 1 || a.splitPositions < 1)
      throw std::runtime_error("kernel @" + name +
                               ": decode_splits and decode_split_positions must be positive");
    // The workspace the runtime allocates is what #q3.lowering says.
    if (ir::loweringOf(kernel).getWorkspaceBytes() != attentionWorkspaceBytes(a))
      throw std::runtime_error(
          "kernel @" + name + " with " + std::to_string(a.decodeSplits) +
          " decode splits needs workspace_bytes = " + std::to_string(attentionWorkspaceBytes(a)) +
          " in its q3.lowering, not " + std::to_string(ir::loweringOf(kernel).getWorkspaceBytes()));
    return compiler.attention(a);
  }
  throw std::runtime_error("no Vulkan kernel for '" +
                           (anchor ? anchor->getName().getStringRef().str() : std::string("?")) +
                           "' (kernel @" + name +
                           "); the Vulkan backend needs the default fusion pipeline");
}

} // namespace q3::vulkan
