//===- Passes.h - q3c's graph optimization passes -------------------------===//
#pragma once

#include "ir/Q3Ops.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace q3::passes {

std::unique_ptr<mlir::Pass> createFuseRMSNormMatmulPass();
/// `foldGain`: never, f32-weights or always (the pass option fold-gain).
std::unique_ptr<mlir::Pass> createFuseRMSNormMatmulPass(const std::string &foldGain);
std::unique_ptr<mlir::Pass> createMergeSiblingMatmulsPass();
std::unique_ptr<mlir::Pass> createFuseQKNormRopePass();
std::unique_ptr<mlir::Pass> createExpandGQAPass();
std::unique_ptr<mlir::Pass> createFuseEpiloguesPass();
std::unique_ptr<mlir::Pass> createFormDispatchesPass();
std::unique_ptr<mlir::Pass> createPlanBuffersPass();
std::unique_ptr<mlir::Pass> createPlanBuffersPass(int64_t maxSeqLen);
std::unique_ptr<mlir::Pass> createSetKVCacheTypePass();
/// `element`: f32, bf16 or f16.
std::unique_ptr<mlir::Pass> createSetKVCacheTypePass(const std::string &element);

#define GEN_PASS_DECL
#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace q3::passes
