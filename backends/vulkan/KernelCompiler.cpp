//===- KernelCompiler.cpp - a kernel's variants as SPIR-V and manifest entry ===//
#include "backends/vulkan/KernelCompiler.h"
#include "backends/vulkan/SpirvLowering.h"
#include "backends/vulkan/LinearOperands.h"
#include "runtime/vulkan/VulkanKernelABI.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

using namespace mlir;
namespace rv = q3::runtime::vulkan;

namespace q3::vulkan {
namespace {

/// The scheduler's scalar with the KV cache capacity (runtime/KernelABI.h).
constexpr int64_t kCapacityScalar = 2;
/// Where the scheduler puts a kernel's first own scalar.
constexpr int64_t kFirstOwnScalar = 3;

std::string printed(ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module->walk([&](gpu::GPUModuleOp kernel) { kernel->print(os); });
  os << "\n";
  return text;
}

} // namespace

int64_t KernelCompiler::rowsPerPart(int64_t rows, int64_t rowBytes, int64_t maxBindingBytes,
                                    int64_t rowMultiple) {
  if (rows * rowBytes <= maxBindingBytes)
    return 0;
  const int64_t alignRows = rv::kMaxOffsetAlignment / std::gcd(rowBytes, rv::kMaxOffsetAlignment);
  const int64_t multiple = std::lcm(alignRows, rowMultiple);
  const int64_t perPart = maxBindingBytes / rowBytes / multiple * multiple;
  if (perPart == 0)
    throw std::runtime_error("a weight row of " + std::to_string(rowBytes) +
                             " bytes does not fit one storage-buffer binding");
  return perPart;
}

CompiledKernel::Module KernelCompiler::lower(OwningOpRef<ModuleOp> module,
                                             rv::KernelVariant &variant) {
  if (failed(module->verify()))
    throw std::runtime_error("generated kernel " + variant.entryPoint + " does not verify");
  // The builders emit constants and push-constant loads where they are
  // needed; folded and deduplicated, the kernel reads (and lowers) better.
  PassManager cleanup(module->getContext());
  cleanup.addPass(createCanonicalizerPass());
  cleanup.addPass(createCSEPass());
  if (failed(cleanup.run(*module)))
    throw std::runtime_error("cleaning up kernel " + variant.entryPoint + " failed");
  CompiledKernel::Module result;
  result.section = "spirv." + std::to_string(nextSection_++);
  result.mlir = printed(*module);
  variant.section = result.section;
  if (!lowering_)
    return result;
  gpu::GPUModuleOp kernel;
  module->walk([&](gpu::GPUModuleOp m) { kernel = m; });
  SpirvModule spirv = lowerToSpirv(kernel);
  result.words = std::move(spirv.words);
  variant.capabilities = spirv.capabilities;
  return result;
}

CompiledKernel KernelCompiler::linear(const LinearKernel &kernel, const MatMulTiling &tiling,
                                      int64_t perPart, const MatVecShape &matVec) {
  const int64_t matVecRows = matVec.rows;
  CompiledKernel out;
  rv::VulkanKernel &spec = out.spec;
  spec.name = kernel.name;
  // The element sizes of the bindings, as every variant views them.
  const LinearOperands operands(context_, kernel);
  spec.elementBytes = {operands.vectorX ? 16 : 4, operands.weight.unitBytes()};
  if (kernel.swiglu)
    spec.elementBytes.push_back(operands.weight.unitBytes());
  if (operands.gain)
    spec.elementBytes.push_back(operands.gain->unitBytes());
  if (kernel.residual)
    spec.elementBytes.push_back(4);
  spec.elementBytes.push_back(4);
  const int64_t rowBytes = kernel.inFeatures * dtypeBytes(kernel.weight);
  // SwiGLU's weight is bound as its two halves, in parts or not; others
  // in parts when they must.
  if (kernel.swiglu)
    spec.split = rv::WeightSplit{1, kernel.outFeatures, rowBytes,
                                 perPart > 0 && perPart < kernel.outFeatures ? perPart
                                                                             : kernel.outFeatures,
                                 /*halves=*/true};
  else if (perPart > 0 && perPart < kernel.weightRows())
    spec.split = rv::WeightSplit{1, kernel.weightRows(), rowBytes, perPart};

  // Matrix-vector products for one row (decode) and for up to
  // matVecRows rows (short prompts), a tiled GEMM above.
  for (int64_t rows : {int64_t(1), matVecRows}) {
    rv::KernelVariant variant;
    variant.entryPoint = kernel.name + (rows == 1 ? "_decode" : "_rows" + std::to_string(rows));
    variant.minRows = rows == 1 ? 1 : 2;
    variant.maxRows = rows;
    variant.grid = {rv::GridSpec::Rows::One, 1,
                    kernel.outFeatures,      1,
                    /*perSubgroup=*/true,
                    /*partUnits=*/true,      matVec.columnSubgroups};
    variant.maxInvocations = 1024;
    if (matVec.columnSubgroups > 1) {
      variant.subgroups = matVec.subgroups();
      variant.sharedBytes = matVecSharedBytes(rows, matVec.columnSubgroups, variant.subgroups);
    } else {
      variant.invocations = matVec.workgroup;
    }
    LinearKernel variantKernel = kernel;
    variantKernel.name = variant.entryPoint;
    out.modules.push_back(
        lower(buildMatVec(context_, variantKernel, rows, matVec.columnSubgroups, variant.subgroups),
              variant));
    spec.variants.push_back(variant);
  }

  rv::KernelVariant prefill;
  prefill.entryPoint = kernel.name + "_prefill";
  prefill.minRows = matVecRows + 1;
  prefill.grid = {rv::GridSpec::Rows::Tiles, tiling.tileRows, kernel.outFeatures,
                  tiling.tileColumns, false, /*partUnits=*/true};
  prefill.invocations = prefill.maxInvocations = tiling.threads();
  prefill.sharedBytes = matMulSharedBytes(kernel, tiling);
  LinearKernel prefillKernel = kernel;
  prefillKernel.name = prefill.entryPoint;
  out.modules.push_back(lower(buildMatMul(context_, prefillKernel, tiling), prefill));
  spec.variants.push_back(prefill);
  return out;
}

CompiledKernel KernelCompiler::embedding(const EmbeddingKernel &kernel, int64_t perPart) {
  CompiledKernel out;
  rv::VulkanKernel &spec = out.spec;
  spec.name = kernel.name;
  WeightAccess table(context_, kernel.table, kernel.hidden);
  spec.elementBytes = {table.unitBytes(), 4, 4};
  const int64_t rowBytes = kernel.hidden * dtypeBytes(kernel.table);
  // Always in parts (one when the table fits a binding): the kernel serves
  // the tokens of the part bound, so it needs the part's rows either way.
  spec.split = rv::WeightSplit{0, kernel.vocab, rowBytes,
                               perPart > 0 && perPart < kernel.vocab ? perPart : kernel.vocab};
  rv::KernelVariant variant;
  variant.entryPoint = kernel.name;
  variant.grid = {rv::GridSpec::Rows::Each, 1, 1, 1, false};
  variant.invocations = kernel.workgroup;
  out.modules.push_back(lower(buildEmbedding(context_, kernel), variant));
  spec.variants = {variant};
  return out;
}

CompiledKernel KernelCompiler::qkNormRope(const QKNormRopeKernel &kernel) {
  CompiledKernel out;
  rv::VulkanKernel &spec = out.spec;
  spec.name = kernel.name;
  const int64_t gainBytes = WeightAccess(context_, kernel.gains, kernel.headDim, 2).unitBytes();
  const int64_t cacheBytes = dtypeBytes(kernel.cache);
  spec.elementBytes = {4, gainBytes, gainBytes, cacheBytes, cacheBytes, 4};
  spec.pushScalars = {kCapacityScalar};
  rv::KernelVariant variant;
  variant.entryPoint = kernel.name;
  variant.grid = {rv::GridSpec::Rows::Each, 1, kernel.queryHeads + kernel.kvHeads, 1, true};
  variant.subgroups = kernel.subgroups;
  variant.sharedBytes = qkNormRopeSharedBytes(kernel);
  out.modules.push_back(lower(buildQKNormRope(context_, kernel), variant));
  spec.variants = {variant};
  return out;
}

CompiledKernel KernelCompiler::attention(const AttentionKernel &kernel) {
  CompiledKernel out;
  rv::VulkanKernel &spec = out.spec;
  spec.name = kernel.name;
  spec.elementBytes = {4, dtypeBytes(kernel.cache), dtypeBytes(kernel.cache), 4};
  const bool split = kernel.decodeSplits > 1;
  if (split)
    spec.elementBytes.push_back(4); // the workspace
  spec.pushScalars = {kCapacityScalar};
  // One row (a decode step) has one workgroup per KV head: a variant of its
  // own with more subgroups splitting the positions, when the lowering
  // config asks for more, and with decode splits also more workgroups per
  // KV head, whose runs a second dispatch merges.
  const bool decodeVariant = split || kernel.decodeSubgroups != kernel.subgroups;
  auto add = [&](const std::string &entryPoint, int64_t subgroups, int64_t minRows,
                 int64_t maxRows) {
    AttentionKernel variantKernel = kernel;
    variantKernel.name = entryPoint;
    variantKernel.subgroups = subgroups;
    variantKernel.oneRowVariant = maxRows == 1;
    const int64_t splits = variantKernel.oneRowVariant ? kernel.decodeSplits : 1;
    if (variantKernel.oneRowVariant)
      variantKernel.rowsPerWorkgroup = 1;
    rv::KernelVariant variant;
    variant.entryPoint = entryPoint;
    variant.minRows = minRows;
    variant.maxRows = maxRows;
    variant.grid = {rv::GridSpec::Rows::Tiles, variantKernel.rowsPerWorkgroup,
                    kernel.kvHeads * splits, 1, false};
    variant.subgroups = subgroups;
    variant.maxInvocations = subgroups * 128;
    variant.sharedBytes = attentionSharedBytes(variantKernel);
    out.modules.push_back(lower(buildAttention(context_, variantKernel), variant));
    spec.variants.push_back(variant);
  };
  if (decodeVariant)
    add(kernel.name + "_decode", kernel.decodeSubgroups, 1, 1);
  if (split) {
    AttentionKernel mergeKernel = kernel;
    mergeKernel.name = kernel.name + "_decode_merge";
    rv::KernelVariant merge;
    merge.entryPoint = mergeKernel.name;
    merge.minRows = merge.maxRows = 1;
    merge.afterPrevious = true;
    merge.grid = {rv::GridSpec::Rows::One, 1, kernel.queryHeads, 1, false};
    merge.invocations = std::clamp<int64_t>(kernel.headDim, 32, 256);
    out.modules.push_back(lower(buildAttentionMerge(context_, mergeKernel), merge));
    spec.variants.push_back(merge);
  }
  add(kernel.name, kernel.subgroups, decodeVariant ? 2 : 1, 0);
  return out;
}

CompiledKernel KernelCompiler::readBandwidth(const std::string &name,
                                             int64_t vectorsPerInvocation) {
  CompiledKernel out;
  rv::VulkanKernel &spec = out.spec;
  spec.name = name;
  spec.elementBytes = {16, 4};
  spec.pushScalars = {kFirstOwnScalar};
  rv::KernelVariant variant;
  variant.entryPoint = name;
  variant.grid = {rv::GridSpec::Rows::Each, 1, 1, 1, false};
  variant.invocations = 256;
  out.modules.push_back(lower(buildReadBandwidth(context_, name, vectorsPerInvocation), variant));
  spec.variants = {variant};
  return out;
}

} // namespace q3::vulkan
