//===- CpuPasses.h - the CPU backend's target passes ----------------------===//
#pragma once

#include "ir/Q3Ops.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>
#include <optional>

namespace q3::cpu {

#define GEN_PASS_DECL
#include "backends/cpu/passes/CpuPasses.h.inc"

std::unique_ptr<mlir::Pass> createCpuSetTargetPass();
std::unique_ptr<mlir::Pass> createCpuSetTargetPass(const CpuSetTargetOptions &options);
std::unique_ptr<mlir::Pass> createCpuPackColumnBlocksPass();
std::unique_ptr<mlir::Pass>
createCpuPackColumnBlocksPass(const CpuPackColumnBlocksOptions &options);
std::unique_ptr<mlir::Pass> createCpuSinkWeightConcatPass();
std::unique_ptr<mlir::Pass> createCpuSelectMatmulPass();
std::unique_ptr<mlir::Pass> createCpuSelectMatmulPass(const CpuSelectMatmulOptions &options);
std::unique_ptr<mlir::Pass> createCpuSelectAttentionMatmulPass();
std::unique_ptr<mlir::Pass>
createCpuSelectAttentionMatmulPass(const CpuSelectAttentionMatmulOptions &options);
std::unique_ptr<mlir::Pass> createCpuSelectTilesPass();
std::unique_ptr<mlir::Pass> createCpuSelectTilesPass(const CpuSelectTilesOptions &options);
std::unique_ptr<mlir::Pass> createCpuAssignGridsPass();
std::unique_ptr<mlir::Pass> createCpuSplitDecodeAttentionPass();
std::unique_ptr<mlir::Pass>
createCpuSplitDecodeAttentionPass(const CpuSplitDecodeAttentionOptions &options);
std::unique_ptr<mlir::Pass> createCpuAddVariantsPass();
std::unique_ptr<mlir::Pass> createCpuAddVariantsPass(const CpuAddVariantsOptions &options);
std::unique_ptr<mlir::Pass> createCpuSetChunkingPass();
std::unique_ptr<mlir::Pass> createCpuSetChunkingPass(const CpuSetChunkingOptions &options);
std::unique_ptr<mlir::Pass> createCpuSetPrefetchPass();
std::unique_ptr<mlir::Pass> createCpuSetPrefetchPass(const CpuSetPrefetchOptions &options);
std::unique_ptr<mlir::Pass> createCpuSetDecodeStreamsPass();
std::unique_ptr<mlir::Pass> createCpuSetDecodeAccumulatorsPass();
std::unique_ptr<mlir::Pass>
createCpuSetDecodeAccumulatorsPass(const CpuSetDecodeAccumulatorsOptions &options);
std::unique_ptr<mlir::Pass> createCpuSelectInPlaceRowsPass();
std::unique_ptr<mlir::Pass>
createCpuSelectInPlaceRowsPass(const CpuSelectInPlaceRowsOptions &options);
std::unique_ptr<mlir::Pass> createCpuPlanThreadScratchPass();
std::unique_ptr<mlir::Pass>
createCpuSetDecodeStreamsPass(const CpuSetDecodeStreamsOptions &options);

/// The kernels of `module` (func.func marked q3.kernel), in module order.
llvm::SmallVector<mlir::func::FuncOp> kernelsOf(mlir::ModuleOp module);

/// The module's measured choices (the q3.tuning dictionary), or null.
mlir::DictionaryAttr tuningOf(mlir::ModuleOp module);

/// The integer q3.tuning records under `key`, if `q3c compile --tune`
/// measured it.
std::optional<int64_t> measuredInteger(mlir::ModuleOp module, llvm::StringRef key);

/// q3.tuning's decode_prefetch_bytes: a byte count, or the string "none"
/// (LoweringConfigAttr::kNoPrefetch) when the products read fastest without
/// software prefetch.
/// attention_decode_prefetch_bytes: the same for decode attention's loops
/// (backends/cpu/DecodeSplitTuner.h).
inline constexpr llvm::StringLiteral kMeasuredPrefetchKey = "decode_prefetch_bytes";
inline constexpr llvm::StringLiteral kMeasuredAttentionPrefetchKey =
    "attention_decode_prefetch_bytes";
inline constexpr llvm::StringLiteral kNoPrefetchSpelling = "none";
std::optional<int64_t> measuredPrefetchBytes(mlir::ModuleOp module,
                                             llvm::StringRef key = kMeasuredPrefetchKey);
/// How the tuners record a distance under those keys: the byte count, or
/// "none" for kNoPrefetch (what measuredPrefetchBytes reads back).
mlir::Attribute measuredPrefetchAttr(mlir::Builder &builder, int64_t prefetchBytes);
inline constexpr const char *kTuningAttrName = "q3.tuning";
/// q3.tuning's weight_packing: "at_load" or "per_call", where
/// --weight-packing=auto puts bf16 and f16 product weights on a target that
/// cannot run AMX (backends/cpu/WeightPackingTuner.h measures it).
inline constexpr llvm::StringLiteral kMeasuredWeightPackingKey = "weight_packing";

/// The K of a product kernel whose prefill runs the column-block register
/// tiles (its weight in column blocks, or packed per call: see
/// cpu-pack-column-blocks), else nothing.
std::optional<int64_t> tiledProductDepth(mlir::func::FuncOp kernel);
/// Whether a tiled product's weight is bf16, which the vdpbf16ps and AMX
/// prefills multiply (an f16 one takes f32 FMAs only).
bool tiledProductIsBf16(mlir::func::FuncOp kernel);

/// Whether `kernel` streams memory in its one-row (decode) loops, which
/// prefetch and read side by side: products always; attention when it takes
/// the vector template (the scalar one, for head sizes that are not a
/// multiple of 16, does neither).
bool streamsInDecode(mlir::func::FuncOp kernel);

/// Pieces per thread of a product's one-row dispatch when nothing was
/// measured (cpu-set-chunking; the decode tuner's default candidate).
inline constexpr int64_t kDefaultDecodeChunks = 4;

#define GEN_PASS_REGISTRATION
#include "backends/cpu/passes/CpuPasses.h.inc"

} // namespace q3::cpu
