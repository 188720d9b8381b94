// RUN: %q3-opt %s -split-input-file -cpu-pack-column-blocks=packing=at-load | FileCheck %s
// RUN: %q3-opt %s -split-input-file -cpu-pack-column-blocks=packing=per-call | FileCheck %s --check-prefix=CALL
// RUN: not %q3-opt %s -split-input-file -cpu-pack-column-blocks=packing=sometimes 2>&1 | FileCheck %s --check-prefix=BAD

// At load: a bf16 product weight is re-laid out in column blocks by a weight
// transform at the dispatch site; the kernel's argument type and its
// lowering say so. The gain and the embedding table keep the checkpoint's
// layout.
// Per call: the IR keeps the row-major weight; only the lowering changes.
// BAD: packing must be auto, at-load or per-call, got 'sometimes'
// CALL-LABEL: func.func @forward
// CALL-NOT: q3.pack_column_blocks
// CALL: q3.dispatch @fused_linear_rms_norm_0(%{{.*}}, %{{.*}}, %model.norm.weight) : (tensor<?x64xf32>, tensor<96x64xbf16>, tensor<64xbf16>)
// CALL: func.func private @embedding_0(%arg0: tensor<96x64xbf16>, %arg1: tensor<?xi32>) -> tensor<?x64xf32> attributes {q3.kernel}
// CALL: func.func private @fused_linear_rms_norm_0(%arg0: tensor<?x64xf32>, %arg1: tensor<96x64xbf16>, %arg2: tensor<64xbf16>) -> tensor<?x96xf32> attributes {q3.kernel, q3.lowering = #q3.lowering<weight_packing = per_call>}
// CHECK-LABEL: func.func @forward
// CHECK: %[[T:.*]] = q3.param "model.embed_tokens.weight" : tensor<96x64xbf16>
// CHECK: q3.dispatch @embedding_0(%[[T]], %arg0)
// CHECK: %[[W:.*]] = q3.param "lm_head.weight" : tensor<96x64xbf16>
// CHECK: %[[P:.*]] = q3.pack_column_blocks %[[W]] : tensor<96x64xbf16> -> tensor<96x64xbf16, #q3.column_blocks>
// CHECK: q3.dispatch @fused_linear_rms_norm_0(%{{.*}}, %[[P]], %model.norm.weight) : (tensor<?x64xf32>, tensor<96x64xbf16, #q3.column_blocks>, tensor<64xbf16>)
// CHECK: func.func private @embedding_0(%arg0: tensor<96x64xbf16>,
// CHECK: func.func private @fused_linear_rms_norm_0(%arg0: tensor<?x64xf32>, %arg1: tensor<96x64xbf16, #q3.column_blocks>, %arg2: tensor<64xbf16>) -> tensor<?x96xf32> attributes {q3.kernel, q3.lowering = #q3.lowering<weight_packing = at_load>}
// CHECK: q3.fused_linear %arg0, %arg1 gain %arg2 {{.*}} tensor<96x64xbf16, #q3.column_blocks> -> tensor<?x96xf32>
module {
  func.func @forward(%tokens: tensor<?xi32>) -> tensor<?x96xf32> {
    %table = q3.param "model.embed_tokens.weight" : tensor<96x64xbf16>
    %x = q3.dispatch @embedding_0(%table, %tokens) : (tensor<96x64xbf16>, tensor<?xi32>) -> tensor<?x64xf32>
    %g = q3.param "model.norm.weight" : tensor<64xbf16>
    %w = q3.param "lm_head.weight" : tensor<96x64xbf16>
    %logits = q3.dispatch @fused_linear_rms_norm_0(%x, %w, %g) : (tensor<?x64xf32>, tensor<96x64xbf16>, tensor<64xbf16>) -> tensor<?x96xf32>
    return %logits : tensor<?x96xf32>
  }
  func.func private @embedding_0(%table: tensor<96x64xbf16>, %tokens: tensor<?xi32>) -> tensor<?x64xf32> attributes {q3.kernel} {
    %0 = q3.embedding %table[%tokens] : tensor<96x64xbf16>, tensor<?xi32> -> tensor<?x64xf32>
    return %0 : tensor<?x64xf32>
  }
  func.func private @fused_linear_rms_norm_0(%x: tensor<?x64xf32>, %w: tensor<96x64xbf16>, %g: tensor<64xbf16>) -> tensor<?x96xf32> attributes {q3.kernel} {
    %0 = q3.fused_linear %x, %w gain %g : tensor<64xbf16> {rms_norm_eps = 1.0e-06 : f64} : tensor<?x64xf32>, tensor<96x64xbf16> -> tensor<?x96xf32>
    return %0 : tensor<?x96xf32>
  }
}

// -----

// An f16 weight is packed the same way (the layout moves 16-bit pairs).
// CHECK-LABEL: func.func @forward
// CHECK: %[[P:.*]] = q3.pack_column_blocks %{{.*}} : tensor<96x64xf16> -> tensor<96x64xf16, #q3.column_blocks>
// CHECK: func.func private @f16_0(%arg0: tensor<?x64xf32>, %arg1: tensor<96x64xf16, #q3.column_blocks>) -> tensor<?x96xf32> attributes {q3.kernel, q3.lowering = #q3.lowering<weight_packing = at_load>}
// CALL-LABEL: func.func @forward
// CALL-NOT: q3.pack_column_blocks
// CALL: func.func private @f16_0(%arg0: tensor<?x64xf32>, %arg1: tensor<96x64xf16>) -> tensor<?x96xf32> attributes {q3.kernel, q3.lowering = #q3.lowering<weight_packing = per_call>}
module {
  func.func @forward(%x: tensor<?x64xf32>) -> tensor<?x96xf32> {
    %w = q3.param "w" : tensor<96x64xf16>
    %y = q3.dispatch @f16_0(%x, %w) : (tensor<?x64xf32>, tensor<96x64xf16>) -> tensor<?x96xf32>
    return %y : tensor<?x96xf32>
  }
  func.func private @f16_0(%x: tensor<?x64xf32>, %w: tensor<96x64xf16>) -> tensor<?x96xf32> attributes {q3.kernel} {
    %0 = q3.fused_linear %x, %w : tensor<?x64xf32>, tensor<96x64xf16> -> tensor<?x96xf32>
    return %0 : tensor<?x96xf32>
  }
}

// -----

// Must NOT fire: f32 weights (the kernels read them row-major) and a bf16
// weight whose row count is not a multiple of 16.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: q3.pack_column_blocks
// CHECK: func.func private @f32_0(%arg0: tensor<?x64xf32>, %arg1: tensor<96x64xf32>) -> tensor<?x96xf32> attributes {q3.kernel} {
// CHECK: func.func private @odd_rows_0(%arg0: tensor<?x64xf32>, %arg1: tensor<40x64xbf16>) -> tensor<?x40xf32> attributes {q3.kernel} {
// CALL-LABEL: func.func @forward
// CALL: func.func private @f32_0({{.*}}) -> tensor<?x96xf32> attributes {q3.kernel} {
// CALL: func.func private @odd_rows_0({{.*}}) -> tensor<?x40xf32> attributes {q3.kernel} {
module {
  func.func @forward(%x: tensor<?x64xf32>) -> (tensor<?x96xf32>, tensor<?x40xf32>) {
    %w = q3.param "w" : tensor<96x64xf32>
    %y = q3.dispatch @f32_0(%x, %w) : (tensor<?x64xf32>, tensor<96x64xf32>) -> tensor<?x96xf32>
    %v = q3.param "v" : tensor<40x64xbf16>
    %z = q3.dispatch @odd_rows_0(%x, %v) : (tensor<?x64xf32>, tensor<40x64xbf16>) -> tensor<?x40xf32>
    return %y, %z : tensor<?x96xf32>, tensor<?x40xf32>
  }
  func.func private @f32_0(%x: tensor<?x64xf32>, %w: tensor<96x64xf32>) -> tensor<?x96xf32> attributes {q3.kernel} {
    %0 = q3.fused_linear %x, %w : tensor<?x64xf32>, tensor<96x64xf32> -> tensor<?x96xf32>
    return %0 : tensor<?x96xf32>
  }
  func.func private @odd_rows_0(%x: tensor<?x64xf32>, %w: tensor<40x64xbf16>) -> tensor<?x40xf32> attributes {q3.kernel} {
    %0 = q3.fused_linear %x, %w : tensor<?x64xf32>, tensor<40x64xbf16> -> tensor<?x40xf32>
    return %0 : tensor<?x40xf32>
  }
}
