// RUN: %q3-opt %s -split-input-file -fuse-qknorm-rope | FileCheck %s

!cache = !q3.kv_cache<layers = 4, kv_heads = 1, head_dim = 4>

// q/k per-head norm + RoPE + the cache write of layer 3 become one op that
// takes the layer operand of the cache write.
// CHECK-LABEL: func.func @attention_input
// CHECK: %[[L:.*]] = arith.constant 3 : index
// CHECK: %[[Q:.*]], %[[K:.*]], %[[V:.*]] = q3.qk_norm_rope_cache %arg0, %qn, %kn, %arg1[%[[L]]] at %arg2 {eps = 9.9999999999999995E-7 : f64, theta = 1.000000e+06 : f64} : tensor<?x24xf32>, tensor<4xbf16>, <layers = 4, kv_heads = 1, head_dim = 4> -> tensor<?x4x4xf32>, tensor<?x1x4xf32>
// CHECK-NOT: q3.rope
// CHECK-NOT: q3.rms_norm
// CHECK-NOT: q3.kv_cache_update
// CHECK: q3.attention %[[Q]], %[[K]], %[[V]]
func.func @attention_input(%qkv: tensor<?x24xf32>, %cache: !cache, %pos: index) -> tensor<?x4x4xf32> {
  %q, %k, %v = q3.split_columns %qkv : tensor<?x24xf32> -> tensor<?x16xf32>, tensor<?x4xf32>, tensor<?x4xf32>
  %qh = q3.reshape_heads %q : tensor<?x16xf32> -> tensor<?x4x4xf32>
  %kh = q3.reshape_heads %k : tensor<?x4xf32> -> tensor<?x1x4xf32>
  %vh = q3.reshape_heads %v : tensor<?x4xf32> -> tensor<?x1x4xf32>
  %qn = q3.param "qn" : tensor<4xbf16>
  %qnorm = q3.rms_norm %qh, %qn {eps = 1.0e-06 : f64} : tensor<?x4x4xf32>, tensor<4xbf16> -> tensor<?x4x4xf32>
  %qr = q3.rope %qnorm at %pos {theta = 1.0e+06 : f64} : tensor<?x4x4xf32>
  %kn = q3.param "kn" : tensor<4xbf16>
  %knorm = q3.rms_norm %kh, %kn {eps = 1.0e-06 : f64} : tensor<?x1x4xf32>, tensor<4xbf16> -> tensor<?x1x4xf32>
  %kr = q3.rope %knorm at %pos {theta = 1.0e+06 : f64} : tensor<?x1x4xf32>
  %layer = arith.constant 3 : index
  %keys, %values = q3.kv_cache_update %cache[%layer], %kr, %vh at %pos : !cache, tensor<?x1x4xf32>
  %o = q3.attention %qr, %keys, %values {scale = 0.5 : f64} : tensor<?x4x4xf32>, tensor<?x1x4xf32>
  return %o : tensor<?x4x4xf32>
}

// -----

!cache = !q3.kv_cache<layers = 4, kv_heads = 1, head_dim = 4>

// Must NOT fire: the normalized key is also used elsewhere, so fusing would
// compute it twice.
// CHECK-LABEL: func.func @key_used_twice
// CHECK: q3.rope
// CHECK: q3.kv_cache_update
// CHECK-NOT: q3.qk_norm_rope_cache
func.func @key_used_twice(%qkv: tensor<?x24xf32>, %cache: !cache, %pos: index) -> (tensor<?x4x4xf32>, tensor<?x1x4xf32>) {
  %q, %k, %v = q3.split_columns %qkv : tensor<?x24xf32> -> tensor<?x16xf32>, tensor<?x4xf32>, tensor<?x4xf32>
  %qh = q3.reshape_heads %q : tensor<?x16xf32> -> tensor<?x4x4xf32>
  %kh = q3.reshape_heads %k : tensor<?x4xf32> -> tensor<?x1x4xf32>
  %vh = q3.reshape_heads %v : tensor<?x4xf32> -> tensor<?x1x4xf32>
  %qn = q3.param "qn" : tensor<4xbf16>
  %qnorm = q3.rms_norm %qh, %qn {eps = 1.0e-06 : f64} : tensor<?x4x4xf32>, tensor<4xbf16> -> tensor<?x4x4xf32>
  %qr = q3.rope %qnorm at %pos {theta = 1.0e+06 : f64} : tensor<?x4x4xf32>
  %kn = q3.param "kn" : tensor<4xbf16>
  %knorm = q3.rms_norm %kh, %kn {eps = 1.0e-06 : f64} : tensor<?x1x4xf32>, tensor<4xbf16> -> tensor<?x1x4xf32>
  %kr = q3.rope %knorm at %pos {theta = 1.0e+06 : f64} : tensor<?x1x4xf32>
  %layer = arith.constant 3 : index
  %keys, %values = q3.kv_cache_update %cache[%layer], %kr, %vh at %pos : !cache, tensor<?x1x4xf32>
  %o = q3.attention %qr, %keys, %values {scale = 0.5 : f64} : tensor<?x4x4xf32>, tensor<?x1x4xf32>
  return %o, %knorm : tensor<?x4x4xf32>, tensor<?x1x4xf32>
}

// -----

!cache = !q3.kv_cache<layers = 4, kv_heads = 1, head_dim = 4>

// Must NOT fire: q and k rotated with different thetas.
// The norms, both rotations and the cache write stay as they were.
// CHECK-LABEL: func.func @mismatched_theta
// CHECK-NOT: q3.qk_norm_rope_cache
// CHECK: q3.rms_norm %{{.*}}, %qn
// CHECK: q3.rope %{{.*}} at %arg2 {theta = 1.000000e+04 : f64}
// CHECK: q3.rms_norm %{{.*}}, %kn
// CHECK: q3.rope %{{.*}} at %arg2 {theta = 1.000000e+06 : f64}
// CHECK: q3.kv_cache_update
// CHECK-NOT: q3.qk_norm_rope_cache
func.func @mismatched_theta(%qkv: tensor<?x24xf32>, %cache: !cache, %pos: index) -> tensor<?x4x4xf32> {
  %q, %k, %v = q3.split_columns %qkv : tensor<?x24xf32> -> tensor<?x16xf32>, tensor<?x4xf32>, tensor<?x4xf32>
  %qh = q3.reshape_heads %q : tensor<?x16xf32> -> tensor<?x4x4xf32>
  %kh = q3.reshape_heads %k : tensor<?x4xf32> -> tensor<?x1x4xf32>
  %vh = q3.reshape_heads %v : tensor<?x4xf32> -> tensor<?x1x4xf32>
  %qn = q3.param "qn" : tensor<4xbf16>
  %qnorm = q3.rms_norm %qh, %qn {eps = 1.0e-06 : f64} : tensor<?x4x4xf32>, tensor<4xbf16> -> tensor<?x4x4xf32>
  %qr = q3.rope %qnorm at %pos {theta = 1.0e+04 : f64} : tensor<?x4x4xf32>
  %kn = q3.param "kn" : tensor<4xbf16>
  %knorm = q3.rms_norm %kh, %kn {eps = 1.0e-06 : f64} : tensor<?x1x4xf32>, tensor<4xbf16> -> tensor<?x1x4xf32>
  %kr = q3.rope %knorm at %pos {theta = 1.0e+06 : f64} : tensor<?x1x4xf32>
  %layer = arith.constant 3 : index
  %keys, %values = q3.kv_cache_update %cache[%layer], %kr, %vh at %pos : !cache, tensor<?x1x4xf32>
  %o = q3.attention %qr, %keys, %values {scale = 0.5 : f64} : tensor<?x4x4xf32>, tensor<?x1x4xf32>
  return %o : tensor<?x4x4xf32>
}
