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
    `rms_norm(x, g) W^T = (x (W diag(g))^T) * rsqrt(mean(x^2) + eps)`: the
    matrix product computes sum(x^2) in its prologue and scales by 1/rms in its
    epilogue, and the gain is folded into the weight by a recorded weight
    transform (`q3.fold_gain`). The folded weight is f32 (exact to f32
    rounding) unless `keep-weight-dtype` asks for the checkpoint's dtype. Fires only when every user of the norm is a
    bias-free `q3.linear` (or an unfused `q3.fused_linear`) on a rank-2 input.
  }];
  let constructor = "q3::passes::createFuseRMSNormMatmulPass()";
  let options = [
    Option<"keepWeightDType", "keep-weight-dtype", "bool", /*default=*/"false",
           "Store folded weights in the checkpoint's dtype: half the bytes of f32 for "
           "bf16/f16 models, but W*g is rounded (not exact)">
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

#endif // Q3_PASSES_TD
