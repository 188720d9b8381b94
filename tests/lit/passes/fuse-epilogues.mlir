// RUN: %q3-opt %s -split-input-file -fuse-epilogues | FileCheck %s

// SwiGLU over a merged gate/up product, then the residual add of down_proj.
// CHECK-LABEL: func.func @mlp
// CHECK: %[[H:.*]] = q3.fused_linear %arg0, %{{.*}} {rms_norm_eps = 9.9999999999999995E-7 : f64, swiglu} : tensor<?x8xf32>, tensor<24x8xf32> -> tensor<?x12xf32>
// CHECK: %[[Y:.*]] = q3.fused_linear %[[H]], %down residual %arg0 : tensor<?x12xf32>, tensor<8x12xbf16>, tensor<?x8xf32> -> tensor<?x8xf32>
// CHECK-NOT: q3.silu
// CHECK-NOT: q3.mul
// CHECK-NOT: q3.add
// CHECK: return %[[Y]]
func.func @mlp(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %w = q3.param "gate_up" : tensor<24x8xf32>
  %gu = q3.fused_linear %x, %w {rms_norm_eps = 1.0e-06 : f64} : tensor<?x8xf32>, tensor<24x8xf32> -> tensor<?x24xf32>
  %g, %u = q3.split_columns %gu : tensor<?x24xf32> -> tensor<?x12xf32>, tensor<?x12xf32>
  %s = q3.silu %g : tensor<?x12xf32>
  %h = q3.mul %s, %u : tensor<?x12xf32>
  %down = q3.param "down" : tensor<8x12xbf16>
  %d = q3.linear %h, %down : tensor<?x12xf32>, tensor<8x12xbf16> -> tensor<?x8xf32>
  %y = q3.add %x, %d : tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

// Must NOT fire: silu of the UP half (wrong order), a product read twice, a linear with a bias.
// CHECK-LABEL: func.func @not_epilogues
// CHECK: q3.silu
// CHECK: q3.mul
// CHECK: q3.add
// CHECK: q3.add
// CHECK-NOT: residual
// CHECK-NOT: swiglu
func.func @not_epilogues(%x: tensor<?x8xf32>) -> (tensor<?x12xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>) {
  %w = q3.param "gate_up" : tensor<24x8xf32>
  %gu = q3.linear %x, %w : tensor<?x8xf32>, tensor<24x8xf32> -> tensor<?x24xf32>
  %g, %u = q3.split_columns %gu : tensor<?x24xf32> -> tensor<?x12xf32>, tensor<?x12xf32>
  %s = q3.silu %u : tensor<?x12xf32>
  %h = q3.mul %s, %g : tensor<?x12xf32>
  %w2 = q3.param "w2" : tensor<8x8xf32>
  %p = q3.linear %x, %w2 : tensor<?x8xf32>, tensor<8x8xf32> -> tensor<?x8xf32>
  %y1 = q3.add %x, %p : tensor<?x8xf32>
  %w3 = q3.param "w3" : tensor<8x8xf32>
  %b3 = q3.param "b3" : tensor<8xf32>
  %p3 = q3.linear %x, %w3 bias %b3 : tensor<?x8xf32>, tensor<8x8xf32>, tensor<8xf32> -> tensor<?x8xf32>
  %y2 = q3.add %x, %p3 : tensor<?x8xf32>
  return %h, %y1, %p, %y2 : tensor<?x12xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>
}

// -----

// Must NOT fire: gate and up halves of different widths (not a SwiGLU pair).
// CHECK-LABEL: func.func @unequal_halves
// CHECK: q3.split_columns
// CHECK-NOT: swiglu
func.func @unequal_halves(%x: tensor<?x8xf32>, %r: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %w = q3.param "gate_up" : tensor<12x8xf32>
  %gu = q3.linear %x, %w : tensor<?x8xf32>, tensor<12x8xf32> -> tensor<?x12xf32>
  %g, %u = q3.split_columns %gu : tensor<?x12xf32> -> tensor<?x4xf32>, tensor<?x8xf32>
  %s = q3.silu %g : tensor<?x4xf32>
  %h = q3.mul %s, %r : tensor<?x4xf32>
  return %h : tensor<?x4xf32>
}
