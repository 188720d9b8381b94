//===- ManifestWriter.h - the target-stage IR as the artifact's manifest --===//
#pragma once

#include "runtime/Manifest.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"

#include <cstdint>
#include <vector>

namespace q3::backends {

/// Serializes a module at the target stage (its q3.target, q3.config,
/// q3.buffer_plan, q3.tuning, every kernel's signature and q3.lowering, the
/// weights and transforms of @forward, its dispatches in order) into the
/// typed manifest. It decides nothing: every field is read off the IR.
/// Throws std::runtime_error naming what the IR lacks (a pass that did not
/// run, a value the runtime cannot bind).
manifest::Manifest manifestOf(mlir::ModuleOp module);

/// The static shape of a ranked tensor type.
std::vector<int64_t> shapeOf(mlir::Type type);
/// Bytes of one row (one position) of an f32 activation [T, ...].
int64_t rowBytesOf(mlir::Type type);

/// How the runtime binds `value` of @forward to a dispatch: a block argument
/// (tokens, start position, cache), a weight of `weightIds`, an index
/// constant, or a value `produced` by an earlier dispatch. Throws naming the
/// op that defines anything else (a view no kernel absorbed).
manifest::Binding bindingOf(mlir::Value value,
                            const llvm::DenseMap<mlir::Value, int64_t> &weightIds,
                            const llvm::DenseMap<mlir::Value, manifest::Binding> &produced);

/// The slot of a kernel argument or result that a dispatch binds as `b`,
/// read off its IR type: a buffer's row bytes; a weight's shape, dtype and
/// layout; the cache's layers, heads and head size; a layer of the cache
/// (a keys/values tensor [rows, heads, head_dim], or the !q3.kv_cache a
/// kernel cuts it from) its heads and head size. `kvCache`: the cache's
/// element type.
manifest::Slot slotOf(const manifest::Binding &b, mlir::Type type, runtime::DType kvCache);

/// The module's q3.buffer_plan into `m`: prefill rows and each activation
/// buffer's row bytes. Throws when plan-buffers did not run.
void readBufferPlan(mlir::ModuleOp module, manifest::Manifest &m);
/// The weights @forward defines (q3.param and the weight transforms), in
/// order, appended to `m.weights`; `weightIds` maps each to its id.
void collectWeights(mlir::func::FuncOp forward, manifest::Manifest &m,
                    llvm::DenseMap<mlir::Value, int64_t> &weightIds);

/// The module's q3.config as the manifest's config. Throws when it lacks one.
manifest::ModelConfig configOf(mlir::ModuleOp module);

} // namespace q3::backends
