// RUN: %q3-opt %s -plan-buffers=max-seq-len=10 | FileCheck %s

// A chain a -> b -> c -> d where each value dies at its consumer: buffers 0
// (10 rows x 8 x 4 bytes = 320) and 1 (10 x 16 x 4 = 640) alternate. e needs a
// third: c is still read by e, and d lives until the return.
// CHECK: module attributes {q3.buffer_plan = {buffer_bytes = array<i64: 320, 640, 320>, max_seq_len = 10 : i64, peak_activation_bytes = 1280 : i64}}
// CHECK: %[[A:.*]] = q3.dispatch @k8(%arg0) {q3.buffers = array<i64: 0>}
// CHECK: %[[B:.*]] = q3.dispatch @k16(%[[A]]) {q3.buffers = array<i64: 1>}
// CHECK: %[[C:.*]] = q3.dispatch @k8b(%[[B]]) {q3.buffers = array<i64: 0>}
// CHECK: %[[D:.*]] = q3.dispatch @k16b(%[[C]]) {q3.buffers = array<i64: 1>}
// CHECK: q3.dispatch @add(%[[C]], %[[C]]) {q3.buffers = array<i64: 2>}
module {
  func.func @forward(%x: tensor<?x8xf32>, %pos: index, %cache: !q3.kv_cache<layers = 1, kv_heads = 1, head_dim = 2>) -> (tensor<?x8xf32>, tensor<?x16xf32>) {
    %a = q3.dispatch @k8(%x) : (tensor<?x8xf32>) -> tensor<?x8xf32>
    %b = q3.dispatch @k16(%a) : (tensor<?x8xf32>) -> tensor<?x16xf32>
    %c = q3.dispatch @k8b(%b) : (tensor<?x16xf32>) -> tensor<?x8xf32>
    %d = q3.dispatch @k16b(%c) : (tensor<?x8xf32>) -> tensor<?x16xf32>
    %e = q3.dispatch @add(%c, %c) : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
    return %e, %d : tensor<?x8xf32>, tensor<?x16xf32>
  }
  func.func private @k8(%x: tensor<?x8xf32>) -> tensor<?x8xf32> attributes {q3.kernel} {
    %y = q3.silu %x : tensor<?x8xf32>
    return %y : tensor<?x8xf32>
  }
  func.func private @k16(%x: tensor<?x8xf32>) -> tensor<?x16xf32> attributes {q3.kernel} {
    %w = q3.param "w" : tensor<16x8xf32>
    %y = q3.linear %x, %w : tensor<?x8xf32>, tensor<16x8xf32> -> tensor<?x16xf32>
    return %y : tensor<?x16xf32>
  }
  func.func private @k8b(%x: tensor<?x16xf32>) -> tensor<?x8xf32> attributes {q3.kernel} {
    %w = q3.param "w2" : tensor<8x16xf32>
    %y = q3.linear %x, %w : tensor<?x16xf32>, tensor<8x16xf32> -> tensor<?x8xf32>
    return %y : tensor<?x8xf32>
  }
  func.func private @k16b(%x: tensor<?x8xf32>) -> tensor<?x16xf32> attributes {q3.kernel} {
    %w = q3.param "w3" : tensor<16x8xf32>
    %y = q3.linear %x, %w : tensor<?x8xf32>, tensor<16x8xf32> -> tensor<?x16xf32>
    return %y : tensor<?x16xf32>
  }
  func.func private @add(%x: tensor<?x8xf32>, %y: tensor<?x8xf32>) -> tensor<?x8xf32> attributes {q3.kernel} {
    %z = q3.add %x, %y : tensor<?x8xf32>
    return %z : tensor<?x8xf32>
  }
}
