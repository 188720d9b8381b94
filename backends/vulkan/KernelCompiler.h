//===- KernelCompiler.h - a kernel's variants as SPIR-V and manifest entry --===//
//
// Turns one kernel description (Kernels.h) into what the artifact carries:
// its SPIR-V modules (the decode and prefill variants of a matrix product,
// one module for the others), the MLIR they came from (for
// `q3c dump --emit=kernels`) and the manifest entry the driver reads
// (runtime/vulkan/VulkanManifest.h: bindings, grid, workgroup policy,
// required capabilities, weight parts). Used by the Vulkan artifact writer
// and by the kernel tests, so both run the same kernels the same way.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "backends/vulkan/Kernels.h"
#include "runtime/vulkan/VulkanManifest.h"

#include "mlir/IR/MLIRContext.h"

#include <cstdint>
#include <string>
#include <vector>

namespace q3::vulkan {

struct CompiledKernel {
  runtime::vulkan::VulkanKernel spec;
  struct Module {
    std::string section; // the artifact section name the spec refers to
    std::vector<uint32_t> words;
    std::string mlir; // the gpu.module before lowering
  };
  std::vector<Module> modules;
};

/// Names the sections it creates "spirv.<n>", n counting from 0.
class KernelCompiler {
public:
  /// Without `lowering`, the kernels are generated and printed only (their
  /// SPIR-V words and capabilities stay empty): `q3c dump --emit=kernels`.
  explicit KernelCompiler(mlir::MLIRContext &context, bool lowering = true)
      : context_(context), lowering_(lowering) {}

  /// `rowsPerPart` > 0: the weight runs in parts of that many rows (see
  /// rowsPerPart() and vulkan-split-weights). Dispatches of up to
  /// `matVec.rows` rows run as matrix-vector products shaped by `matVec`
  /// (see vulkan-matvec), longer ones as the tiled GEMM.
  CompiledKernel linear(const LinearKernel &kernel, const MatMulTiling &tiling, int64_t rowsPerPart,
                        const MatVecShape &matVec = {});
  CompiledKernel embedding(const EmbeddingKernel &kernel, int64_t rowsPerPart);
  CompiledKernel qkNormRope(const QKNormRopeKernel &kernel);
  CompiledKernel attention(const AttentionKernel &kernel);
  /// Binds (data, sink); scalars[3] is the number of 16-byte vectors, and
  /// a dispatch of R rows runs R workgroups.
  CompiledKernel readBandwidth(const std::string &name, int64_t vectorsPerInvocation);

  /// Rows per part for a weight of `rows` rows of `rowBytes` so each part
  /// fits `maxBindingBytes` and starts 256-byte aligned (0: one part).
  static int64_t rowsPerPart(int64_t rows, int64_t rowBytes, int64_t maxBindingBytes,
                             int64_t rowMultiple);

private:
  CompiledKernel::Module lower(mlir::OwningOpRef<mlir::ModuleOp> module,
                               runtime::vulkan::KernelVariant &variant);
  mlir::MLIRContext &context_;
  bool lowering_;
  int nextSection_ = 0;
};

} // namespace q3::vulkan
