//===- Passes.td - q3c's graph optimization passes ------------*- tablegen -*-===//
//
// The default pipeline runs them in this order (passes/Pipeline.cpp):
//   fuse-rmsnorm-matmul, merge-sibling-matmuls, fuse-qknorm-rope, expand-gqa,
//   fuse-epilogues, canonicalize, cse            -> the "fused" stage
//   form-dispatches, plan-buffers                 -> the "dispatch" stage
//
//===----------------------------------------------------------------------===//

#ifndef Q3_PASSES_TD
#define Q3_PASSES_TD

include "mlir/Pass/PassBase.td"

def FuseRMSNormMatmul : Pass<"fuse-rmsnorm-matmul", "mlir::func::FuncOp"> {
  let summary = "Fold an RMSNorm into the bias-free linears that consume it";
  let description = [{
    `rms_norm(x, g) W^T = ((x * g) W^T) * rsqrt(mean(x^2) + eps)`: the matrix
    product computes sum(x^2) in its prologue and scales by 1/rms in its
    epilogue. The gain either stays an operand of the product (`gain`,
    applied to x in the prologue: the weight keeps the checkpoint's bytes) or
    is folded into an f32 copy of the weight by a recorded weight transform
    (`q3.fold_gain`, exact to f32 rounding). `fold-gain` chooses:
    `never` (the default) keeps every gain an operand, so a product reads
    the checkpoint's bytes where they are mapped and loading copies nothing;
    `f32-weights` folds only into weights that are f32 already (no bytes per
    token, but a copy of each at load); `always` folds every weight (bf16 and
    f16 weights then double their bytes).
    Fires only when every user of the norm is a bias-free `q3.linear` on a
    rank-2 input.
  }];
  let constructor = "q3::passes::createFuseRMSNormMatmulPass()";
  let options = [
    Option<"foldGain", "fold-gain", "std::string", /*default=*/"\"never\"",
           "Where the gain goes: never (always a prologue operand), f32-weights (fold "
           "into f32 weights, else an operand), always (fold into f32 copies)">
  ];
  let dependentDialects = ["q3::ir::Q3Dialect"];
}

def MergeSiblingMatmuls : Pass<"merge-sibling-matmuls", "mlir::func::FuncOp"> {
  let summary = "Merge matrix products that read the same input into one wider one";
  let description = [{
    q/k/v projections become one product over `q3.concat_rows(Wq, Wk, Wv)`,
    gate/up one over `concat_rows(Wgate, Wup)`, followed by a
    `q3.split_columns` view. Siblings must have the same prologue, no epilogue,
    and weights of one element type.
  }];
  let constructor = "q3::passes::createMergeSiblingMatmulsPass()";
  let dependentDialects = ["q3::ir::Q3Dialect"];
}

def FuseQKNormRope : Pass<"fuse-qknorm-rope", "mlir::func::FuncOp"> {
  let summary = "q/k per-head RMSNorm + RoPE + the K/V cache write as one op";
  let description = [{
    Matches split(qkv) -> {heads -> rms_norm -> rope for q and k, heads for v}
    -> kv_cache_update and replaces it with `q3.qk_norm_rope_cache`.
  }];
  let constructor = "q3::passes::createFuseQKNormRopePass()";
  let dependentDialects = ["q3::ir::Q3Dialect", "mlir::arith::ArithDialect"];
}

def ExpandGQA : Pass<"expand-gqa", "mlir::func::FuncOp"> {
  let summary = "Make the query-head -> KV-head map of attention explicit";
  let description = [{
    Sets `kv_head_map[h] = h / (Hq / Hkv)` on every `q3.attention`, so kernels
    index the shared KV head in place; K and V are never repeated.
  }];
  let constructor = "q3::passes::createExpandGQAPass()";
  let dependentDialects = ["q3::ir::Q3Dialect"];
}

def FuseEpilogues : Pass<"fuse-epilogues", "mlir::func::FuncOp"> {
  let summary = "Fuse SwiGLU and residual adds into the producing matrix products";
  let description = [{
    `silu(gate) * up` over a split of a merged gate/up product becomes the
    product's `swiglu` epilogue; `x + linear(...)` becomes its `residual`
    epilogue.
  }];
  let constructor = "q3::passes::createFuseEpiloguesPass()";
  let dependentDialects = ["q3::ir::Q3Dialect"];
}

def FormDispatches : Pass<"form-dispatches", "mlir::ModuleOp"> {
  let summary = "Outline compute ops into kernels; share identical kernels across layers";
  let description = [{
    Every compute op of `@forward` (with the views that only it reads) becomes a
    `func.func` kernel marked `q3.kernel` and a `q3.dispatch` of it. Weights,
    the cache and scalars (start position, layer) are kernel arguments, so the
    kernels of different layers are identical and deduplicated: the number of
    distinct kernels does not grow with the layer count.
  }];
  let constructor = "q3::passes::createFormDispatchesPass()";
  let dependentDialects = ["q3::ir::Q3Dialect", "mlir::func::FuncDialect"];
}

def PlanBuffers : Pass<"plan-buffers", "mlir::ModuleOp"> {
  let summary = "Assign activation buffers by liveness and report peak memory";
  let description = [{
    Walks the dispatches of `@forward` in order and gives each activation a
    buffer that is free by then (views share their source's buffer), sized for
    `max-seq-len` rows. Annotates each dispatch with `q3.buffers` and the module
    with `q3.buffer_plan` (buffer sizes and peak activation bytes).
  }];
  let constructor = "q3::passes::createPlanBuffersPass()";
  let options = [
    Option<"maxSeqLen", "max-seq-len", "int64_t", /*default=*/"4096",
           "Rows of the largest prefill the buffers must hold">
  ];
  let dependentDialects = ["q3::ir::Q3Dialect"];
}

def SetKVCacheType : Pass<"set-kv-cache-type", "mlir::ModuleOp"> {
  let summary = "Choose the element type the KV cache stores";
  let description = [{
    Rewrites every `!q3.kv_cache` in the module (the argument of `@forward`
    and of the kernels that read or write the cache) to store `element`:
    `f32` keeps keys and values exact; `bf16` or `f16` halves the cache's
    memory and the bytes attention reads, rounding keys (after q/k-norm and
    RoPE) and values to nearest even as they are written.
  }];
  let constructor = "q3::passes::createSetKVCacheTypePass()";
  let options = [
    Option<"element", "element", "std::string", /*default=*/"\"f32\"",
           "The cache's element type: f32, bf16 or f16">
  ];
  let dependentDialects = ["q3::ir::Q3Dialect"];
}

#endif // Q3_PASSES_TD
