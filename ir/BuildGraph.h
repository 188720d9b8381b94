//===- BuildGraph.h - ModelConfig -> q3 graph IR --------------------------===//
#pragma once

#include "frontend/ModelConfig.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/OwningOpRef.h"

namespace q3::ir {

/// The dialects a q3 module is made of: q3, func, arith (index constants) and builtin.
void registerQ3Dialects(mlir::DialectRegistry &registry);

/// Name of the single entry point. Its arguments are, in order:
///   %tokens    : tensor<?xi32>          the T token ids to run
///   %start_pos : index                  position of the first of them
///   %cache     : !q3.kv_cache<...>      every layer's keys and values
/// and it returns tensor<?xVOCABxf32>, the logits of each of the T positions.
/// Prefill and decode are the same function (T = prompt length or 1).
inline constexpr llvm::StringLiteral kEntryPoint = "forward";

/// Builds the verified Qwen3 graph for `config`: the Hugging Face
/// Qwen3ForCausalLM forward pass, one q3 op per step of the model.
mlir::OwningOpRef<mlir::ModuleOp> buildQwen3Graph(mlir::MLIRContext &context,
                                                  const frontend::ModelConfig &config);

} // namespace q3::ir
