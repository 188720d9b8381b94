// RUN: %q3-opt %s -expand-gqa | FileCheck %s

// Query head h reads KV head h / (Hq / Hkv): GQA 4 -> 2, MQA, MHA.
// CHECK-LABEL: func.func @maps
// CHECK: q3.attention {{.*}}kv_head_map = array<i64: 0, 0, 1, 1>
// CHECK: q3.attention {{.*}}kv_head_map = array<i64: 0, 0, 0>
// CHECK: q3.attention {{.*}}kv_head_map = array<i64: 0, 1>
// An existing map is kept.
// CHECK: q3.attention {{.*}}kv_head_map = array<i64: 1, 0>
func.func @maps(%q4: tensor<?x4x8xf32>, %k2: tensor<?x2x8xf32>, %q3: tensor<?x3x8xf32>, %k1: tensor<?x1x8xf32>, %q2: tensor<?x2x8xf32>) {
  %a = q3.attention %q4, %k2, %k2 {scale = 0.5 : f64} : tensor<?x4x8xf32>, tensor<?x2x8xf32>
  %b = q3.attention %q3, %k1, %k1 {scale = 0.5 : f64} : tensor<?x3x8xf32>, tensor<?x1x8xf32>
  %c = q3.attention %q2, %k2, %k2 {scale = 0.5 : f64} : tensor<?x2x8xf32>, tensor<?x2x8xf32>
  %d = q3.attention %q2, %k2, %k2 {scale = 0.5 : f64, kv_head_map = array<i64: 1, 0>} : tensor<?x2x8xf32>, tensor<?x2x8xf32>
  return
}
