// Verifiers reject inconsistent shapes and name the op and the dimension.
// RUN: %q3-opt %s -split-input-file -verify-diagnostics

func.func @linear_in_features(%x: tensor<?x64xf32>) -> tensor<?x128xf32> {
  %w = q3.param "w" : tensor<128x32xbf16>
  // expected-error @+1 {{'q3.linear' op weight dimension 1 is 32 but input dimension 1 (in features) is 64}}
  %y = q3.linear %x, %w : tensor<?x64xf32>, tensor<128x32xbf16> -> tensor<?x128xf32>
  return %y : tensor<?x128xf32>
}

// -----

func.func @linear_out_features(%x: tensor<?x64xf32>) -> tensor<?x100xf32> {
  %w = q3.param "w" : tensor<128x64xf32>
  // expected-error @+1 {{'q3.linear' op result dimension 1 is 100 but weight dimension 0 (out features) is 128}}
  %y = q3.linear %x, %w : tensor<?x64xf32>, tensor<128x64xf32> -> tensor<?x100xf32>
  return %y : tensor<?x100xf32>
}

// -----

func.func @linear_bias(%x: tensor<?x64xf32>) -> tensor<?x128xf32> {
  %w = q3.param "w" : tensor<128x64xf32>
  %b = q3.param "b" : tensor<64xf32>
  // expected-error @+1 {{'q3.linear' op bias dimension 0 is 64 but weight dimension 0 (out features) is 128}}
  %y = q3.linear %x, %w bias %b : tensor<?x64xf32>, tensor<128x64xf32>, tensor<64xf32> -> tensor<?x128xf32>
  return %y : tensor<?x128xf32>
}

// -----

func.func @rms_norm_gamma(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %g = q3.param "g" : tensor<32xbf16>
  // expected-error @+1 {{'q3.rms_norm' op gamma dimension 0 is 32 but the input's last dimension is 64}}
  %y = q3.rms_norm %x, %g {eps = 1.0e-06 : f64} : tensor<?x64xf32>, tensor<32xbf16> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @rms_norm_eps(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %g = q3.param "g" : tensor<64xbf16>
  // expected-error @+1 {{'q3.rms_norm' op eps must be positive}}
  %y = q3.rms_norm %x, %g {eps = 0.0 : f64} : tensor<?x64xf32>, tensor<64xbf16> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @reshape_heads(%x: tensor<?x128xf32>) -> tensor<?x4x16xf32> {
  // expected-error @+1 {{'q3.reshape_heads' op input dimension 1 is 128 but result heads x head_dim is 64}}
  %y = q3.reshape_heads %x : tensor<?x128xf32> -> tensor<?x4x16xf32>
  return %y : tensor<?x4x16xf32>
}

// -----

func.func @rope_odd_head_dim(%x: tensor<?x4x15xf32>, %p: index) -> tensor<?x4x15xf32> {
  // expected-error @+1 {{'q3.rope' op input dimension 2 (head_dim) must be static and even, got 15}}
  %y = q3.rope %x at %p {theta = 1.0e4 : f64} : tensor<?x4x15xf32>
  return %y : tensor<?x4x15xf32>
}

// -----

func.func @attention_heads(%q: tensor<?x6x32xf32>, %k: tensor<?x4x32xf32>) -> tensor<?x6x32xf32> {
  // expected-error @+1 {{'q3.attention' op query heads (6) must be a multiple of the KV heads (4)}}
  %o = q3.attention %q, %k, %k {scale = 0.5 : f64} : tensor<?x6x32xf32>, tensor<?x4x32xf32>
  return %o : tensor<?x6x32xf32>
}

// -----

func.func @attention_head_dim(%q: tensor<?x4x32xf32>, %k: tensor<?x2x16xf32>) -> tensor<?x4x32xf32> {
  // expected-error @+1 {{'q3.attention' op keys dimension 2 is 16 but query dimension 2 (head_dim) is 32}}
  %o = q3.attention %q, %k, %k {scale = 0.5 : f64} : tensor<?x4x32xf32>, tensor<?x2x16xf32>
  return %o : tensor<?x4x32xf32>
}

// -----

func.func @attention_map(%q: tensor<?x4x32xf32>, %k: tensor<?x2x32xf32>) -> tensor<?x4x32xf32> {
  // expected-error @+1 {{'q3.attention' op kv_head_map[3] = 2 is not a KV head (there are 2)}}
  %o = q3.attention %q, %k, %k {scale = 0.5 : f64, kv_head_map = array<i64: 0, 0, 1, 2>} : tensor<?x4x32xf32>, tensor<?x2x32xf32>
  return %o : tensor<?x4x32xf32>
}

// -----

func.func @cache_layer(%c: !q3.kv_cache<layers = 2, kv_heads = 2, head_dim = 32>, %k: tensor<?x2x32xf32>, %p: index) {
  %layer = arith.constant 2 : index
  // expected-error @+1 {{'q3.kv_cache_update' op layer 2 is outside the cache's 2 layers}}
  %keys, %values = q3.kv_cache_update %c[%layer], %k, %k at %p : !q3.kv_cache<layers = 2, kv_heads = 2, head_dim = 32>, tensor<?x2x32xf32>
  return
}

// -----

func.func @cache_heads(%c: !q3.kv_cache<layers = 2, kv_heads = 2, head_dim = 32>, %k: tensor<?x4x32xf32>, %p: index) {
  %layer = arith.constant 0 : index
  // expected-error @+1 {{'q3.kv_cache_update' op key dimension 1 is 4 but the cache's kv_heads is 2}}
  %keys, %values = q3.kv_cache_update %c[%layer], %k, %k at %p : !q3.kv_cache<layers = 2, kv_heads = 2, head_dim = 32>, tensor<?x4x32xf32>
  return
}

// -----

func.func @param_dynamic() {
  // expected-error @+1 {{'q3.param' op 'w' must have a static shape}}
  %w = q3.param "w" : tensor<?x64xbf16>
  return
}

// -----

func.func @param_dtype() {
  // expected-error @+1 {{'q3.param' op result #0 must be ranked tensor of bfloat16 type or 16-bit float or 32-bit float values}}
  %w = q3.param "w" : tensor<64xi8>
  return
}

// -----

func.func @embedding_hidden(%t: tensor<?xi32>) -> tensor<?x32xf32> {
  %e = q3.param "e" : tensor<100x64xbf16>
  // expected-error @+1 {{'q3.embedding' op result dimension 1 is 32 but table dimension 1 (hidden size) is 64}}
  %x = q3.embedding %e[%t] : tensor<100x64xbf16>, tensor<?xi32> -> tensor<?x32xf32>
  return %x : tensor<?x32xf32>
}

// -----

// expected-error @+1 {{!q3.kv_cache: kv_heads must be positive, got 0}}
func.func @cache_type(%c: !q3.kv_cache<layers = 2, kv_heads = 0, head_dim = 32>) {
  return
}

// -----

func.func @swiglu_odd(%x: tensor<?x8xf32>) -> tensor<?x3xf32> {
  %w = q3.param "w" : tensor<7x8xf32>
  // expected-error @+1 {{'q3.fused_linear' op swiglu needs an even number of weight rows (gate over up), got 7}}
  %y = q3.fused_linear %x, %w {swiglu} : tensor<?x8xf32>, tensor<7x8xf32> -> tensor<?x3xf32>
  return %y : tensor<?x3xf32>
}

// -----

func.func @swiglu_width(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %w = q3.param "w" : tensor<8x8xf32>
  // expected-error @+1 {{'q3.fused_linear' op result dimension 1 is 8 but half the weight rows (swiglu) is 4}}
  %y = q3.fused_linear %x, %w {swiglu} : tensor<?x8xf32>, tensor<8x8xf32> -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

func.func @residual_shape(%x: tensor<?x8xf32>, %r: tensor<?x4xf32>) -> tensor<?x8xf32> {
  %w = q3.param "w" : tensor<8x8xf32>
  // expected-error @+1 {{'q3.fused_linear' op residual dimension 1 is 4 but result dimension 1 is 8}}
  %y = q3.fused_linear %x, %w residual %r : tensor<?x8xf32>, tensor<8x8xf32>, tensor<?x4xf32> -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

func.func @fold_gain_type() {
  %w = q3.param "w" : tensor<8x4xbf16>
  %g = q3.param "g" : tensor<4xbf16>
  // expected-error @+1 {{'q3.fold_gain' op result element type must be f32 or the weight's, got 'f16'}}
  %f = q3.fold_gain %w, %g : tensor<8x4xbf16>, tensor<4xbf16> -> tensor<8x4xf16>
  return
}

// -----

func.func @concat_rows_sum() {
  %a = q3.param "a" : tensor<8x4xf32>
  %b = q3.param "b" : tensor<2x4xf32>
  // expected-error @+1 {{'q3.concat_rows' op result dimension 0 is 12 but the sum of the input rows is 10}}
  %c = q3.concat_rows %a, %b : tensor<8x4xf32>, tensor<2x4xf32> -> tensor<12x4xf32>
  return
}

// -----

func.func @split_sum(%x: tensor<?x10xf32>) {
  // expected-error @+1 {{'q3.split_columns' op input dimension 1 is 10 but the sum of the result columns is 12}}
  %a, %b = q3.split_columns %x : tensor<?x10xf32> -> tensor<?x6xf32>, tensor<?x6xf32>
  return
}

// -----

func.func @qkv_width(%qkv: tensor<?x20xf32>, %c: !q3.kv_cache<layers = 1, kv_heads = 1, head_dim = 4>, %l: index, %p: index) {
  %g = q3.param "g" : tensor<4xf32>
  // expected-error @+1 {{'q3.qk_norm_rope_cache' op qkv dimension 1 is 20 but (query heads + 2 x kv heads) x head_dim is 24}}
  %q, %k, %v = q3.qk_norm_rope_cache %qkv, %g, %g, %c[%l] at %p {eps = 1.0e-06 : f64, theta = 1.0e+04 : f64} : tensor<?x20xf32>, tensor<4xf32>, !q3.kv_cache<layers = 1, kv_heads = 1, head_dim = 4> -> tensor<?x4x4xf32>, tensor<?x1x4xf32>
  return
}

// -----

func.func @dispatch_types(%x: tensor<?x8xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'q3.dispatch' op operand and result types do not match kernel @k of type '(tensor<?x8xf32>) -> tensor<?x8xf32>'}}
  %y = q3.dispatch @k(%x) : (tensor<?x8xf32>) -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}
func.func private @k(%x: tensor<?x8xf32>) -> tensor<?x8xf32> attributes {q3.kernel} {
  return %x : tensor<?x8xf32>
}

// -----

func.func @dispatch_not_kernel(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'q3.dispatch' op @f is not marked q3.kernel}}
  %y = q3.dispatch @f(%x) : (tensor<?x8xf32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}
func.func private @f(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  return %x : tensor<?x8xf32>
}

// -----

// A decode loop cannot prefetch less than a cache line ahead.
// expected-error @+1 {{#q3.lowering: prefetch_bytes must be none or 64 to 1048576, got 8}}
func.func private @prefetch_too_near() attributes {q3.lowering = #q3.lowering<prefetch_bytes = 8>}

// -----

// expected-error @+1 {{#q3.lowering: prefetch_bytes must be none or 64 to 1048576, got 2097152}}
func.func private @prefetch_too_far() attributes {q3.lowering = #q3.lowering<prefetch_bytes = 2097152>}

// -----

// A decode loop reads 1, 2 or 4 runs side by side.
// expected-error @+1 {{#q3.lowering: decode_streams must be 1, 2 or 4, got 3}}
func.func private @three_streams() attributes {q3.lowering = #q3.lowering<decode_streams = 3>}

// -----

// expected-error @+1 {{#q3.lowering: workspace_bytes must be 0 to 67108864, got -8}}
func.func private @workspace_negative() attributes {q3.lowering = #q3.lowering<workspace_bytes = -8>}

// -----

// expected-error @+1 {{#q3.lowering: workspace_bytes must be 0 to 67108864, got 134217728}}
func.func private @workspace_too_large() attributes {q3.lowering = #q3.lowering<workspace_bytes = 134217728>}

// -----

// expected-error @+1 {{#q3.lowering: thread_scratch must be F + R * rows with F 0 to 67108864 and R 0 to 1048576, got 64 + -2 * rows}}
func.func private @scratch_negative() attributes {q3.lowering = #q3.lowering<thread_scratch = 64 + -2 * rows>}

// -----

// expected-error @+1 {{#q3.lowering: thread_scratch must be F + R * rows with F 0 to 67108864 and R 0 to 1048576, got 0 + 2097152 * rows}}
func.func private @scratch_row_too_large() attributes {q3.lowering = #q3.lowering<thread_scratch = 0 + 2097152 * rows>}

// -----

// One spelling: F + R * rows.
// expected-error @+1 {{expected '+'}}
func.func private @scratch_without_rows() attributes {q3.lowering = #q3.lowering<thread_scratch = 4096>}

// -----

// A decode loop without software prefetch is spelled `none`, not a negative distance.
// expected-error @+1 {{#q3.lowering: prefetch_bytes must be none or a byte count, got -1}}
func.func private @prefetch_negative() attributes {q3.lowering = #q3.lowering<prefetch_bytes = -1>}
