// RUN: %q3-opt %s -split-input-file -fuse-rmsnorm-matmul | FileCheck %s
// RUN: %q3-opt %s -split-input-file -fuse-rmsnorm-matmul=fold-gain=always | FileCheck %s --check-prefix=ALWAYS
// RUN: %q3-opt %s -split-input-file -fuse-rmsnorm-matmul=fold-gain=never | FileCheck %s --check-prefix=NEVER
// RUN: %q3-opt %s -split-input-file -fuse-rmsnorm-matmul=fold-gain=f32-weights | FileCheck %s --check-prefix=F32W

// A norm feeding three bias-free linears over bf16 weights: by default each
// becomes a fused product that applies the gain in its prologue, so the weights
// stay bf16 (folding would widen them to f32 and double the bytes streamed).
// CHECK-LABEL: func.func @norm_into_qkv
// CHECK-SAME: (%[[X:.*]]: tensor<?x8xf32>)
// CHECK-NOT: q3.rms_norm
// CHECK-NOT: q3.fold_gain
// CHECK: q3.fused_linear %[[X]], %wq gain %g : tensor<8xbf16> {rms_norm_eps = 9.9999999999999995E-7 : f64} : tensor<?x8xf32>, tensor<16x8xbf16> -> tensor<?x16xf32>
// CHECK: q3.fused_linear %[[X]], %wk gain %g
// CHECK: q3.fused_linear %[[X]], %wv gain %g
// ALWAYS-LABEL: func.func @norm_into_qkv
// ALWAYS: %[[WQ:.*]] = q3.fold_gain %wq, %g : tensor<16x8xbf16>, tensor<8xbf16> -> tensor<16x8xf32>
// ALWAYS: q3.fused_linear %{{.*}}, %[[WQ]] {rms_norm_eps
// ALWAYS-NOT: gain %g
// NEVER-LABEL: func.func @norm_into_qkv
// NEVER: q3.fused_linear %{{.*}}, %wq gain %g
func.func @norm_into_qkv(%x: tensor<?x8xf32>) -> (tensor<?x16xf32>, tensor<?x8xf32>, tensor<?x8xf32>) {
  %g = q3.param "g" : tensor<8xbf16>
  %h = q3.rms_norm %x, %g {eps = 1.0e-06 : f64} : tensor<?x8xf32>, tensor<8xbf16> -> tensor<?x8xf32>
  %wq = q3.param "wq" : tensor<16x8xbf16>
  %q = q3.linear %h, %wq : tensor<?x8xf32>, tensor<16x8xbf16> -> tensor<?x16xf32>
  %wk = q3.param "wk" : tensor<8x8xbf16>
  %k = q3.linear %h, %wk : tensor<?x8xf32>, tensor<8x8xbf16> -> tensor<?x8xf32>
  %wv = q3.param "wv" : tensor<8x8xbf16>
  %v = q3.linear %h, %wv : tensor<?x8xf32>, tensor<8x8xbf16> -> tensor<?x8xf32>
  return %q, %k, %v : tensor<?x16xf32>, tensor<?x8xf32>, tensor<?x8xf32>
}

// -----

// f32 weights: folding the gain would cost no bytes per token but a copy of
// the weight at load, so the default keeps the gain an operand here too (the
// kernels then read the checkpoint's bytes in place); f32-weights folds it.
// CHECK-LABEL: func.func @f32_weights_fold
// CHECK-NOT: q3.fold_gain
// CHECK: q3.fused_linear %{{.*}}, %w gain %g : tensor<8xf32>
// F32W-LABEL: func.func @f32_weights_fold
// F32W: %[[W:.*]] = q3.fold_gain %w, %g : tensor<16x8xf32>, tensor<8xf32> -> tensor<16x8xf32>
// F32W: q3.fused_linear %{{.*}}, %[[W]] {rms_norm_eps
// NEVER-LABEL: func.func @f32_weights_fold
// NEVER-NOT: q3.fold_gain
// NEVER: q3.fused_linear %{{.*}}, %w gain %g : tensor<8xf32>
func.func @f32_weights_fold(%x: tensor<?x8xf32>) -> tensor<?x16xf32> {
  %g = q3.param "g" : tensor<8xf32>
  %h = q3.rms_norm %x, %g {eps = 1.0e-06 : f64} : tensor<?x8xf32>, tensor<8xf32> -> tensor<?x8xf32>
  %w = q3.param "w" : tensor<16x8xf32>
  %y = q3.linear %h, %w : tensor<?x8xf32>, tensor<16x8xf32> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

// Tied embeddings: the head reads the table itself with the final norm's gain
// as its prologue; the lookup reads the same table.
// CHECK-LABEL: func.func @tied_head
// CHECK: q3.embedding %model.embed_tokens.weight[
// CHECK: q3.fused_linear %{{.*}}, %model.embed_tokens.weight gain %model.norm.weight : tensor<8xbf16> {rms_norm_eps
// ALWAYS-LABEL: func.func @tied_head
// ALWAYS: q3.embedding %model.embed_tokens.weight[
// ALWAYS: %[[HEAD:.*]] = q3.fold_gain %model.embed_tokens.weight, %model.norm.weight : tensor<32x8xbf16>, tensor<8xbf16> -> tensor<32x8xf32>
// ALWAYS: q3.fused_linear %{{.*}}, %[[HEAD]] {rms_norm_eps
func.func @tied_head(%tokens: tensor<?xi32>) -> tensor<?x32xf32> {
  %table = q3.param "model.embed_tokens.weight" : tensor<32x8xbf16>
  %x = q3.embedding %table[%tokens] : tensor<32x8xbf16>, tensor<?xi32> -> tensor<?x8xf32>
  %g = q3.param "model.norm.weight" : tensor<8xbf16>
  %h = q3.rms_norm %x, %g {eps = 1.0e-06 : f64} : tensor<?x8xf32>, tensor<8xbf16> -> tensor<?x8xf32>
  %logits = q3.linear %h, %table : tensor<?x8xf32>, tensor<32x8xbf16> -> tensor<?x32xf32>
  return %logits : tensor<?x32xf32>
}

// -----

// Must NOT fire: the norm also feeds a non-linear consumer.
// CHECK-LABEL: func.func @norm_with_other_user
// CHECK: q3.rms_norm
// CHECK: q3.linear
// CHECK-NOT: q3.fold_gain
// CHECK-NOT: q3.fused_linear
func.func @norm_with_other_user(%x: tensor<?x8xf32>) -> (tensor<?x16xf32>, tensor<?x8xf32>) {
  %g = q3.param "g" : tensor<8xf32>
  %h = q3.rms_norm %x, %g {eps = 1.0e-06 : f64} : tensor<?x8xf32>, tensor<8xf32> -> tensor<?x8xf32>
  %w = q3.param "w" : tensor<16x8xf32>
  %y = q3.linear %h, %w : tensor<?x8xf32>, tensor<16x8xf32> -> tensor<?x16xf32>
  %s = q3.silu %h : tensor<?x8xf32>
  return %y, %s : tensor<?x16xf32>, tensor<?x8xf32>
}

// -----

// Must NOT fire: a linear with a bias (the norm scale does not commute with it).
// CHECK-LABEL: func.func @linear_with_bias
// CHECK: q3.rms_norm
// CHECK: q3.linear %{{.*}}, %w bias %b
// CHECK-NOT: q3.fused_linear
func.func @linear_with_bias(%x: tensor<?x8xf32>) -> tensor<?x16xf32> {
  %g = q3.param "g" : tensor<8xf32>
  %h = q3.rms_norm %x, %g {eps = 1.0e-06 : f64} : tensor<?x8xf32>, tensor<8xf32> -> tensor<?x8xf32>
  %w = q3.param "w" : tensor<16x8xf32>
  %b = q3.param "b" : tensor<16xf32>
  %y = q3.linear %h, %w bias %b : tensor<?x8xf32>, tensor<16x8xf32>, tensor<16xf32> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

// Must NOT fire: a per-head (rank-3) norm feeding RoPE, i.e. Qwen3's q/k norm.
// CHECK-LABEL: func.func @head_norm
// CHECK: q3.rms_norm {{.*}} : tensor<?x2x4xf32>, tensor<4xf32> -> tensor<?x2x4xf32>
// CHECK: q3.rope
func.func @head_norm(%q: tensor<?x2x4xf32>, %p: index) -> tensor<?x2x4xf32> {
  %g = q3.param "g" : tensor<4xf32>
  %n = q3.rms_norm %q, %g {eps = 1.0e-06 : f64} : tensor<?x2x4xf32>, tensor<4xf32> -> tensor<?x2x4xf32>
  %r = q3.rope %n at %p {theta = 1.0e+04 : f64} : tensor<?x2x4xf32>
  return %r : tensor<?x2x4xf32>
}
