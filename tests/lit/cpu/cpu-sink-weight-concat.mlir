// RUN: %q3-opt %s -split-input-file -cpu-sink-weight-concat | FileCheck %s

// A per-call product whose weight is a concatenation at every dispatch takes
// the parts instead (two layers, one kernel): the concatenations leave the
// weight plan and the kernel joins its own arguments.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: q3.concat_rows
// CHECK: q3.dispatch @fused_linear_0(%arg0, %a0, %b0) : (tensor<?x64xf32>, tensor<32x64xbf16>, tensor<16x64xbf16>) -> tensor<?x48xf32>
// CHECK: q3.dispatch @fused_linear_0(%arg0, %a1, %b1) : (tensor<?x64xf32>, tensor<32x64xbf16>, tensor<16x64xbf16>) -> tensor<?x48xf32>
// CHECK: func.func private @fused_linear_0(%arg0: tensor<?x64xf32>, %arg1: tensor<32x64xbf16>, %arg2: tensor<16x64xbf16>) -> tensor<?x48xf32>
// CHECK-NEXT: %[[W:.*]] = q3.concat_rows %arg1, %arg2 : tensor<32x64xbf16>, tensor<16x64xbf16> -> tensor<48x64xbf16>
// CHECK-NEXT: q3.fused_linear %arg0, %[[W]] : tensor<?x64xf32>, tensor<48x64xbf16> -> tensor<?x48xf32>
module {
  func.func @forward(%x: tensor<?x64xf32>) -> tensor<?x48xf32> {
    %a0 = q3.param "a0" : tensor<32x64xbf16>
    %b0 = q3.param "b0" : tensor<16x64xbf16>
    %w0 = q3.concat_rows %a0, %b0 : tensor<32x64xbf16>, tensor<16x64xbf16> -> tensor<48x64xbf16>
    %y0 = q3.dispatch @fused_linear_0(%x, %w0) : (tensor<?x64xf32>, tensor<48x64xbf16>) -> tensor<?x48xf32>
    %a1 = q3.param "a1" : tensor<32x64xbf16>
    %b1 = q3.param "b1" : tensor<16x64xbf16>
    %w1 = q3.concat_rows %a1, %b1 : tensor<32x64xbf16>, tensor<16x64xbf16> -> tensor<48x64xbf16>
    %y1 = q3.dispatch @fused_linear_0(%x, %w1) : (tensor<?x64xf32>, tensor<48x64xbf16>) -> tensor<?x48xf32>
    return %y1 : tensor<?x48xf32>
  }
  func.func private @fused_linear_0(%x: tensor<?x64xf32>, %w: tensor<48x64xbf16>) -> tensor<?x48xf32> attributes {q3.kernel, q3.lowering = #q3.lowering<weight_packing = per_call>} {
    %0 = q3.fused_linear %x, %w : tensor<?x64xf32>, tensor<48x64xbf16> -> tensor<?x48xf32>
    return %0 : tensor<?x48xf32>
  }
}

// -----

// An f32 product (no weight_packing: the row-major kernels read its rows
// where they are bound) takes the parts as well.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: q3.concat_rows
// CHECK: q3.dispatch @f32_0(%arg0, %a, %b) : (tensor<?x64xf32>, tensor<32x64xf32>, tensor<16x64xf32>) -> tensor<?x48xf32>
// CHECK: func.func private @f32_0(%arg0: tensor<?x64xf32>, %arg1: tensor<32x64xf32>, %arg2: tensor<16x64xf32>) -> tensor<?x48xf32>
// CHECK-NEXT: %[[W:.*]] = q3.concat_rows %arg1, %arg2 : tensor<32x64xf32>, tensor<16x64xf32> -> tensor<48x64xf32>
module {
  func.func @forward(%x: tensor<?x64xf32>) -> tensor<?x48xf32> {
    %a = q3.param "a" : tensor<32x64xf32>
    %b = q3.param "b" : tensor<16x64xf32>
    %w = q3.concat_rows %a, %b : tensor<32x64xf32>, tensor<16x64xf32> -> tensor<48x64xf32>
    %y = q3.dispatch @f32_0(%x, %w) : (tensor<?x64xf32>, tensor<48x64xf32>) -> tensor<?x48xf32>
    return %y : tensor<?x48xf32>
  }
  func.func private @f32_0(%x: tensor<?x64xf32>, %w: tensor<48x64xf32>) -> tensor<?x48xf32> attributes {q3.kernel, q3.lowering = #q3.lowering<grid = fixed 1>} {
    %0 = q3.fused_linear %x, %w : tensor<?x64xf32>, tensor<48x64xf32> -> tensor<?x48xf32>
    return %0 : tensor<?x48xf32>
  }
}

// -----

// Must NOT fire: packed at load (the packing copies anyway), a part that is
// not a multiple of 16 rows, and a kernel one of whose dispatches passes a
// plain weight.
// CHECK-LABEL: func.func @forward
// CHECK: %[[L:.*]] = q3.concat_rows %l0, %l1
// CHECK: q3.dispatch @at_load_0(%arg0, %[[L]])
// CHECK: %[[O:.*]] = q3.concat_rows %o0, %o1
// CHECK: q3.dispatch @odd_0(%arg0, %[[O]])
// CHECK: %[[M:.*]] = q3.concat_rows %m0, %m1
// CHECK: q3.dispatch @mixed_0(%arg0, %[[M]])
// CHECK: q3.dispatch @mixed_0(%arg0, %plain)
// CHECK-NOT: q3.concat_rows
module {
  func.func @forward(%x: tensor<?x64xf32>) -> (tensor<?x48xf32>, tensor<?x40xf32>, tensor<?x48xf32>, tensor<?x48xf32>) {
    %l0 = q3.param "l0" : tensor<32x64xbf16>
    %l1 = q3.param "l1" : tensor<16x64xbf16>
    %l = q3.concat_rows %l0, %l1 : tensor<32x64xbf16>, tensor<16x64xbf16> -> tensor<48x64xbf16>
    %yl = q3.dispatch @at_load_0(%x, %l) : (tensor<?x64xf32>, tensor<48x64xbf16>) -> tensor<?x48xf32>
    %o0 = q3.param "o0" : tensor<32x64xbf16>
    %o1 = q3.param "o1" : tensor<8x64xbf16>
    %o = q3.concat_rows %o0, %o1 : tensor<32x64xbf16>, tensor<8x64xbf16> -> tensor<40x64xbf16>
    %yo = q3.dispatch @odd_0(%x, %o) : (tensor<?x64xf32>, tensor<40x64xbf16>) -> tensor<?x40xf32>
    %m0 = q3.param "m0" : tensor<32x64xbf16>
    %m1 = q3.param "m1" : tensor<16x64xbf16>
    %m = q3.concat_rows %m0, %m1 : tensor<32x64xbf16>, tensor<16x64xbf16> -> tensor<48x64xbf16>
    %ym = q3.dispatch @mixed_0(%x, %m) : (tensor<?x64xf32>, tensor<48x64xbf16>) -> tensor<?x48xf32>
    %plain = q3.param "plain" : tensor<48x64xbf16>
    %yp = q3.dispatch @mixed_0(%x, %plain) : (tensor<?x64xf32>, tensor<48x64xbf16>) -> tensor<?x48xf32>
    return %yl, %yo, %ym, %yp : tensor<?x48xf32>, tensor<?x40xf32>, tensor<?x48xf32>, tensor<?x48xf32>
  }
  func.func private @at_load_0(%x: tensor<?x64xf32>, %w: tensor<48x64xbf16>) -> tensor<?x48xf32> attributes {q3.kernel, q3.lowering = #q3.lowering<weight_packing = at_load>} {
    %0 = q3.fused_linear %x, %w : tensor<?x64xf32>, tensor<48x64xbf16> -> tensor<?x48xf32>
    return %0 : tensor<?x48xf32>
  }
  func.func private @odd_0(%x: tensor<?x64xf32>, %w: tensor<40x64xbf16>) -> tensor<?x40xf32> attributes {q3.kernel, q3.lowering = #q3.lowering<weight_packing = per_call>} {
    %0 = q3.fused_linear %x, %w : tensor<?x64xf32>, tensor<40x64xbf16> -> tensor<?x40xf32>
    return %0 : tensor<?x40xf32>
  }
  func.func private @mixed_0(%x: tensor<?x64xf32>, %w: tensor<48x64xbf16>) -> tensor<?x48xf32> attributes {q3.kernel, q3.lowering = #q3.lowering<weight_packing = per_call>} {
    %0 = q3.fused_linear %x, %w : tensor<?x64xf32>, tensor<48x64xbf16> -> tensor<?x48xf32>
    return %0 : tensor<?x48xf32>
  }
}
