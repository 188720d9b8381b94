//===- ManifestWriter.h - the target-stage IR as the artifact's manifest --===//
#pragma once

#include "runtime/Manifest.h"

#include "mlir/IR/BuiltinOps.h"

namespace q3::backends {

/// Serializes a module at the target stage (its q3.target, q3.config,
/// q3.buffer_plan, q3.tuning, every kernel's signature and q3.lowering, the
/// weights and transforms of @forward, its dispatches in order) into the
/// typed manifest. It decides nothing: every field is read off the IR.
/// Throws std::runtime_error naming what the IR lacks (a pass that did not
/// run, a value the runtime cannot bind).
manifest::Manifest manifestOf(mlir::ModuleOp module);

/// The module's q3.config as the manifest's config. Throws when it lacks one.
manifest::ModelConfig configOf(mlir::ModuleOp module);
/// The manifest's name of an element type (f32, f16, bf16). Throws otherwise.
manifest::ElementType elementTypeOf(mlir::Type element);

} // namespace q3::backends
