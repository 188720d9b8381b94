// RUN: %q3-opt %s -split-input-file -merge-sibling-matmuls | FileCheck %s

// Three products of one input with the same prologue: one product over the
// stacked weights (in order), then a column split.
// CHECK-LABEL: func.func @qkv
// CHECK: %[[W:.*]] = q3.concat_rows %wq, %wk, %wv : tensor<16x8xf32>, tensor<8x8xf32>, tensor<8x8xf32> -> tensor<32x8xf32>
// CHECK: %[[Y:.*]] = q3.fused_linear %arg0, %[[W]] {rms_norm_eps = 9.9999999999999995E-7 : f64} : tensor<?x8xf32>, tensor<32x8xf32> -> tensor<?x32xf32>
// CHECK: %[[S:.*]]:3 = q3.split_columns %[[Y]] : tensor<?x32xf32> -> tensor<?x16xf32>, tensor<?x8xf32>, tensor<?x8xf32>
// CHECK: return %[[S]]#0, %[[S]]#1, %[[S]]#2
func.func @qkv(%x: tensor<?x8xf32>) -> (tensor<?x16xf32>, tensor<?x8xf32>, tensor<?x8xf32>) {
  %wq = q3.param "wq" : tensor<16x8xf32>
  %q = q3.fused_linear %x, %wq {rms_norm_eps = 1.0e-06 : f64} : tensor<?x8xf32>, tensor<16x8xf32> -> tensor<?x16xf32>
  %wk = q3.param "wk" : tensor<8x8xf32>
  %k = q3.fused_linear %x, %wk {rms_norm_eps = 1.0e-06 : f64} : tensor<?x8xf32>, tensor<8x8xf32> -> tensor<?x8xf32>
  %wv = q3.param "wv" : tensor<8x8xf32>
  %v = q3.fused_linear %x, %wv {rms_norm_eps = 1.0e-06 : f64} : tensor<?x8xf32>, tensor<8x8xf32> -> tensor<?x8xf32>
  return %q, %k, %v : tensor<?x16xf32>, tensor<?x8xf32>, tensor<?x8xf32>
}

// -----

// Plain linears merge too (gate before up).
// CHECK-LABEL: func.func @gate_up
// CHECK: q3.concat_rows %gate, %up : tensor<12x8xbf16>, tensor<12x8xbf16> -> tensor<24x8xbf16>
// CHECK: q3.linear %arg0, %{{.*}} : tensor<?x8xf32>, tensor<24x8xbf16> -> tensor<?x24xf32>
// CHECK: q3.split_columns
func.func @gate_up(%x: tensor<?x8xf32>) -> (tensor<?x12xf32>, tensor<?x12xf32>) {
  %gate = q3.param "gate" : tensor<12x8xbf16>
  %g = q3.linear %x, %gate : tensor<?x8xf32>, tensor<12x8xbf16> -> tensor<?x12xf32>
  %up = q3.param "up" : tensor<12x8xbf16>
  %u = q3.linear %x, %up : tensor<?x8xf32>, tensor<12x8xbf16> -> tensor<?x12xf32>
  return %g, %u : tensor<?x12xf32>, tensor<?x12xf32>
}

// -----

// Must NOT merge: different prologues, different weight types, an epilogue.
// Every product is still there, on its own weight.
// CHECK-LABEL: func.func @not_siblings
// CHECK-NOT: q3.concat_rows
// CHECK-NOT: q3.split_columns
// CHECK: q3.fused_linear %arg0, %w1 {rms_norm_eps = 9.9999999999999995E-7 : f64}
// CHECK: q3.fused_linear %arg0, %w2 {rms_norm_eps = 1.000000e-05 : f64}
// CHECK: q3.linear %arg0, %w3 : tensor<?x8xf32>, tensor<8x8xbf16>
// CHECK: q3.linear %arg0, %w4 : tensor<?x8xf32>, tensor<8x8xf32>
// CHECK: q3.fused_linear %arg0, %w5 residual %arg1
// CHECK-NOT: q3.concat_rows
// CHECK-NOT: q3.split_columns
func.func @not_siblings(%x: tensor<?x8xf32>, %r: tensor<?x8xf32>) -> (tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>) {
  %w1 = q3.param "w1" : tensor<8x8xf32>
  %a = q3.fused_linear %x, %w1 {rms_norm_eps = 1.0e-06 : f64} : tensor<?x8xf32>, tensor<8x8xf32> -> tensor<?x8xf32>
  %w2 = q3.param "w2" : tensor<8x8xf32>
  %b = q3.fused_linear %x, %w2 {rms_norm_eps = 1.0e-05 : f64} : tensor<?x8xf32>, tensor<8x8xf32> -> tensor<?x8xf32>
  %w3 = q3.param "w3" : tensor<8x8xbf16>
  %c = q3.linear %x, %w3 : tensor<?x8xf32>, tensor<8x8xbf16> -> tensor<?x8xf32>
  %w4 = q3.param "w4" : tensor<8x8xf32>
  %d = q3.linear %x, %w4 : tensor<?x8xf32>, tensor<8x8xf32> -> tensor<?x8xf32>
  %w5 = q3.param "w5" : tensor<8x8xf32>
  %e = q3.fused_linear %x, %w5 residual %r : tensor<?x8xf32>, tensor<8x8xf32>, tensor<?x8xf32> -> tensor<?x8xf32>
  return %a, %b, %c, %e : tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>
}
