//===- Q3Ops.td - operations of the q3 dialect -----------------*- tablegen -*-===//

#ifndef Q3_OPS_TD
#define Q3_OPS_TD

include "ir/Q3Dialect.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class Q3_Op<string mnemonic, list<Trait> traits = []>
    : Op<Q3_Dialect, mnemonic, traits>;

// Activations: f32 tensors. Parameters: static tensors of bf16, f16 or f32.
def Q3_Activation : RankedTensorOf<[F32]>;
def Q3_ParamTensor : RankedTensorOf<[BF16, F16, F32]>;
def Q3_TokenIds : 1DTensorOf<[I32]>;

//===----------------------------------------------------------------------===//
// ParamOp
//===----------------------------------------------------------------------===//

def Q3_ParamOp : Q3_Op<"param",
    [Pure, DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let summary = "a named model weight";
  let description = [{
    A weight of the checkpoint, named as in Hugging Face's `model.safetensors`.
    The result type is the exact shape and element type the weight binder
    expects. The printed SSA name is the tensor name, so dumps read like the
    checkpoint.

    ```mlir
    %model.norm.weight = q3.param "model.norm.weight" : tensor<1024xbf16>
    ```
  }];
  let arguments = (ins StrAttr:$name);
  let results = (outs Q3_ParamTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// EmbeddingOp
//===----------------------------------------------------------------------===//

def Q3_EmbeddingOp : Q3_Op<"embedding", [Pure]> {
  let summary = "rows of the embedding table, one per token id";
  let description = [{
    `result[t, :] = table[tokens[t], :]`, converted to f32.

    ```mlir
    %x = q3.embedding %table[%tokens] : tensor<151936x1024xbf16>, tensor<?xi32> -> tensor<?x1024xf32>
    ```
  }];
  let arguments = (ins Q3_ParamTensor:$table, Q3_TokenIds:$tokens);
  let results = (outs Q3_Activation:$result);
  let assemblyFormat = [{
    $table `[` $tokens `]` attr-dict `:` type($table) `,` type($tokens) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// RMSNormOp
//===----------------------------------------------------------------------===//

def Q3_RMSNormOp : Q3_Op<"rms_norm", [Pure]> {
  let summary = "RMSNorm over the last dimension";
  let description = [{
    `y = x * rsqrt(mean(x^2, last dim) + eps) * gamma`: no mean subtraction,
    no bias, the gain is `gamma` itself (not `1 + gamma`). On a rank-3
    `[T, heads, head_dim]` input it normalizes each head vector with the one
    shared gain (Qwen3's q_norm and k_norm).

    ```mlir
    %h = q3.rms_norm %x, %gamma {eps = 1.0e-06 : f64} : tensor<?x1024xf32>, tensor<1024xbf16> -> tensor<?x1024xf32>
    ```
  }];
  let arguments = (ins Q3_Activation:$input, Q3_ParamTensor:$gamma, F64Attr:$eps);
  let results = (outs Q3_Activation:$result);
  let assemblyFormat = [{
    $input `,` $gamma attr-dict `:` type($input) `,` type($gamma) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// LinearOp
//===----------------------------------------------------------------------===//

def Q3_LinearOp : Q3_Op<"linear", [Pure]> {
  let summary = "y = x W^T (+ bias), the PyTorch nn.Linear convention";
  let description = [{
    `input` is `[T, in]`, `weight` is `[out, in]` as stored by Hugging Face,
    the result is `[T, out]`. Qwen3 has no biases; the optional bias exists so
    that IR from other sources can be represented and passes can refuse to
    fuse it.

    ```mlir
    %q = q3.linear %h, %w : tensor<?x1024xf32>, tensor<2048x1024xbf16> -> tensor<?x2048xf32>
    ```
  }];
  let arguments = (ins Q3_Activation:$input, Q3_ParamTensor:$weight,
                       Optional<Q3_ParamTensor>:$bias);
  let results = (outs Q3_Activation:$result);
  let assemblyFormat = [{
    $input `,` $weight (`bias` $bias^)? attr-dict `:` type($input) `,` type($weight)
    (`,` type($bias)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// ReshapeHeadsOp / MergeHeadsOp
//===----------------------------------------------------------------------===//

def Q3_ReshapeHeadsOp : Q3_Op<"reshape_heads", [Pure]> {
  let summary = "split features into heads: [T, H*D] -> [T, H, D]";
  let description = [{
    ```mlir
    %q3d = q3.reshape_heads %q : tensor<?x2048xf32> -> tensor<?x16x128xf32>
    ```
  }];
  let arguments = (ins Q3_Activation:$input);
  let results = (outs Q3_Activation:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Q3_MergeHeadsOp : Q3_Op<"merge_heads", [Pure]> {
  let summary = "concatenate heads: [T, H, D] -> [T, H*D]";
  let description = [{
    ```mlir
    %o = q3.merge_heads %attn : tensor<?x16x128xf32> -> tensor<?x2048xf32>
    ```
  }];
  let arguments = (ins Q3_Activation:$input);
  let results = (outs Q3_Activation:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// RopeOp
//===----------------------------------------------------------------------===//

def Q3_RopeOp : Q3_Op<"rope", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "rotary position embedding, rotate-half pairing";
  let description = [{
    Row `t` sits at position `p = start_pos + t`. Feature `i` is paired with
    feature `i + D/2` and the pair is rotated by `p * theta^(-2i/D)`:
    `out[i] = x[i] cos - x[i+D/2] sin`, `out[i+D/2] = x[i+D/2] cos + x[i] sin`.

    ```mlir
    %qr = q3.rope %qn at %start_pos {theta = 1.000000e+06 : f64} : tensor<?x16x128xf32>
    ```
  }];
  let arguments = (ins Q3_Activation:$input, Index:$start_pos, F64Attr:$theta);
  let results = (outs Q3_Activation:$result);
  let assemblyFormat = "$input `at` $start_pos attr-dict `:` type($input)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// KVCacheUpdateOp
//===----------------------------------------------------------------------===//

def Q3_KVCacheUpdateOp : Q3_Op<"kv_cache_update",
    [AllTypesMatch<["key", "value", "keys", "values"]>]> {
  let summary = "append this step's keys and values to one layer's cache";
  let description = [{
    Writes rows `[start_pos, start_pos + T)` of layer `layer`'s cache with the
    (already rotated) `key` and the `value`, then returns all cached rows
    `[0, start_pos + T)`. Cached keys are never rotated again. The layer is an
    index operand (as on `q3.qk_norm_rope_cache`), so the kernels of all
    layers are one kernel.

    ```mlir
    %keys, %values = q3.kv_cache_update %cache[%c0], %kr, %v at %start_pos
        : !q3.kv_cache<layers = 28, kv_heads = 8, head_dim = 128>, tensor<?x8x128xf32>
    ```
  }];
  let arguments = (ins Arg<Q3_KVCacheType, "the cache", [MemRead, MemWrite]>:$cache,
                       Index:$layer, Q3_Activation:$key, Q3_Activation:$value,
                       Index:$start_pos);
  let results = (outs Q3_Activation:$keys, Q3_Activation:$values);
  let assemblyFormat = [{
    $cache `[` $layer `]` `,` $key `,` $value `at` $start_pos attr-dict `:` type($cache) `,` type($key)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

def Q3_AttentionOp : Q3_Op<"attention", [Pure, AllTypesMatch<["query", "result"]>,
                                         AllTypesMatch<["keys", "values"]>]> {
  let summary = "causal scaled dot-product attention with grouped KV heads";
  let description = [{
    `query` is `[T, Hq, D]`, `keys` and `values` are `[S, Hkv, D]` with the T
    query rows being the last T of the S positions (S - T earlier tokens are
    cached). Query row t attends to key rows `s <= S - T + t`; scores are
    scaled by `scale` and the softmax is taken in f32. Query head h reads KV
    head `kv_head_map[h]` when the map is present, else `h / (Hq / Hkv)`.

    ```mlir
    %o = q3.attention %qr, %keys, %values {scale = 0.088388347648318447 : f64}
        : tensor<?x16x128xf32>, tensor<?x8x128xf32>
    ```
  }];
  let arguments = (ins Q3_Activation:$query, Q3_Activation:$keys, Q3_Activation:$values,
                       F64Attr:$scale, OptionalAttr<DenseI64ArrayAttr>:$kv_head_map);
  let results = (outs Q3_Activation:$result);
  let assemblyFormat = [{
    $query `,` $keys `,` $values attr-dict `:` type($query) `,` type($keys)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The KV head that query head `h` reads.
    int64_t kvHeadFor(int64_t h);
  }];
}

//===----------------------------------------------------------------------===//
// Weight transforms
//
// Ops that compute a weight from other weights. They read only q3.param values
// (or other weight transforms), so they run once, when the weights are bound,
// never per token: the compiler records them and the binder applies them.
//===----------------------------------------------------------------------===//

def Q3_FoldGainOp : Q3_Op<"fold_gain", [Pure]> {
  let summary = "weight transform: W * diag(gamma), an RMSNorm gain folded into a linear";
  let description = [{
    `result[n, k] = weight[n, k] * gamma[k]`, computed in f32 and stored in
    the result's element type. With an f32 result,
    `rms_norm(x, gamma) W^T = (x W'^T) * rsqrt(mean(x^2) + eps)` holds to f32
    rounding; a result in the weight's own (narrower) type rounds W'.
    Created by `fuse-rmsnorm-matmul`.

    ```mlir
    %wq = q3.fold_gain %w, %gamma : tensor<2048x1024xbf16>, tensor<1024xbf16> -> tensor<2048x1024xf32>
    ```
  }];
  let arguments = (ins Q3_ParamTensor:$weight, Q3_ParamTensor:$gamma);
  let results = (outs Q3_ParamTensor:$result);
  let assemblyFormat = [{
    $weight `,` $gamma attr-dict `:` type($weight) `,` type($gamma) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Q3_ConcatRowsOp : Q3_Op<"concat_rows", [Pure]> {
  let summary = "weight transform: stack weights [N_i, K] into [sum N_i, K]";
  let description = [{
    Concatenates the output features of linears that read the same input, so
    they run as one wider matrix product. Created by `merge-sibling-matmuls`.

    ```mlir
    %wqkv = q3.concat_rows %wq, %wk, %wv : tensor<2048x1024xf32>, tensor<1024x1024xf32>, tensor<1024x1024xf32> -> tensor<4096x1024xf32>
    ```
  }];
  let arguments = (ins Variadic<Q3_ParamTensor>:$inputs);
  let results = (outs Q3_ParamTensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs) `->` type($result)";
  let hasVerifier = 1;
}

def Q3_PackColumnBlocksOp : Q3_Op<"pack_column_blocks", [Pure]> {
  let summary = "weight transform: re-lay a 16-bit weight out in column blocks";
  let description = [{
    The same `[N, K]` values stored as `[N/16][K/2][16][2]` (see
    `#q3.column_blocks`): what a CPU product reads to load 16 output features
    times 2 inputs at once. Needs 16-bit elements, `N % 16 == 0` and
    `K % 2 == 0`. Created by `cpu-pack-column-blocks`.

    ```mlir
    %packed = q3.pack_column_blocks %w : tensor<4096x1024xbf16> -> tensor<4096x1024xbf16, #q3.column_blocks>
    ```
  }];
  let arguments = (ins Q3_ParamTensor:$weight);
  let results = (outs Q3_ParamTensor:$result);
  let assemblyFormat = "$weight attr-dict `:` type($weight) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// SplitColumnsOp
//===----------------------------------------------------------------------===//

def Q3_SplitColumnsOp : Q3_Op<"split_columns", [Pure]> {
  let summary = "split [T, sum N_i] into [T, N_i] pieces (a view, no copy)";
  let description = [{
    The inverse of a merged linear's concatenation: each result is a column
    range of the input.

    ```mlir
    %q, %k, %v = q3.split_columns %qkv : tensor<?x4096xf32> -> tensor<?x2048xf32>, tensor<?x1024xf32>, tensor<?x1024xf32>
    ```
  }];
  let arguments = (ins Q3_Activation:$input);
  let results = (outs Variadic<Q3_Activation>:$results);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// FusedLinearOp
//===----------------------------------------------------------------------===//

def Q3_FusedLinearOp : Q3_Op<"fused_linear", [Pure, AttrSizedOperandSegments]> {
  let summary = "a matrix product with a fused RMSNorm prologue and epilogues";
  let description = [{
    `y = x W^T`, extended by what the fusion passes folded into it:

    - `rms_norm_eps`: the input's RMSNorm. The prologue computes
      `r = rsqrt(mean(x^2) + eps)` per row (from `x` as it comes in) and the
      epilogue multiplies by it.
    - `gain`: the RMSNorm's gain `g` (`[K]`), applied to the input in the
      prologue: the product is `(x * g) W^T`. Weights then keep the
      checkpoint's element type; `fuse-rmsnorm-matmul` uses it for bf16 and
      f16 weights and folds the gain into f32 weights instead (`q3.fold_gain`,
      which costs nothing there).
    - `swiglu`: `W` stacks gate over up (`[2I, K]`); the epilogue returns
      `silu(gate) * up` (`[T, I]`).
    - `residual`: the epilogue adds it (`[T, N]`), the residual connection.

    The order is prologue (sum of squares, gain), product, norm scale,
    swiglu, residual.

    ```mlir
    %qkv = q3.fused_linear %x, %w gain %g : tensor<1024xbf16> {rms_norm_eps = 1.0e-06 : f64} : tensor<?x1024xf32>, tensor<4096x1024xbf16> -> tensor<?x4096xf32>
    %h = q3.fused_linear %x, %wf {rms_norm_eps = 1.0e-06 : f64, swiglu} : tensor<?x1024xf32>, tensor<6144x1024xf32> -> tensor<?x3072xf32>
    %x2 = q3.fused_linear %o, %wo residual %x : tensor<?x2048xf32>, tensor<1024x2048xbf16>, tensor<?x1024xf32> -> tensor<?x1024xf32>
    ```
  }];
  let arguments = (ins Q3_Activation:$input, Q3_ParamTensor:$weight,
                       Optional<Q3_ParamTensor>:$gain,
                       Optional<Q3_Activation>:$residual,
                       OptionalAttr<F64Attr>:$rms_norm_eps, UnitAttr:$swiglu);
  let results = (outs Q3_Activation:$result);
  let assemblyFormat = [{
    $input `,` $weight (`gain` $gain^ `:` type($gain))? (`residual` $residual^)? attr-dict
    `:` type($input) `,` type($weight) (`,` type($residual)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// QKNormRopeCacheOp
//===----------------------------------------------------------------------===//

def Q3_QKNormRopeCacheOp : Q3_Op<"qk_norm_rope_cache",
    [AllTypesMatch<["q_gain", "k_gain"]>, AllTypesMatch<["keys", "values"]>]> {
  let summary = "q/k RMSNorm per head, RoPE, and the K/V cache write, in one op";
  let description = [{
    Takes the merged q/k/v projection `[T, (Hq + 2 Hkv) D]`, and for every head
    vector: normalizes q and k with their own gains (which cannot be folded into
    the weights, since RoPE mixes features of different gains), rotates them
    (rotate-half RoPE at position `start_pos + t`), writes the rotated k and the
    v into layer `layer` of the cache, and returns the rotated queries with all
    cached keys and values `[0, start_pos + T)`.

    ```mlir
    %q, %keys, %values = q3.qk_norm_rope_cache %qkv, %q_gain, %k_gain, %cache[%layer] at %start_pos
        {eps = 1.0e-06 : f64, theta = 1.0e+06 : f64}
        : tensor<?x4096xf32>, tensor<128xbf16>, !q3.kv_cache<layers = 28, kv_heads = 8, head_dim = 128>
        -> tensor<?x16x128xf32>, tensor<?x8x128xf32>
    ```
  }];
  let arguments = (ins Q3_Activation:$qkv, Q3_ParamTensor:$q_gain, Q3_ParamTensor:$k_gain,
                       Arg<Q3_KVCacheType, "the cache", [MemRead, MemWrite]>:$cache,
                       Index:$layer, Index:$start_pos, F64Attr:$eps, F64Attr:$theta);
  let results = (outs Q3_Activation:$query, Q3_Activation:$keys, Q3_Activation:$values);
  let assemblyFormat = [{
    $qkv `,` $q_gain `,` $k_gain `,` $cache `[` $layer `]` `at` $start_pos attr-dict
    `:` type($qkv) `,` type($q_gain) `,` type($cache) `->` type($query) `,` type($keys)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// DispatchOp
//===----------------------------------------------------------------------===//

def Q3_DispatchOp : Q3_Op<"dispatch", [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "run a kernel over its workgroup grid";
  let description = [{
    Calls `kernel`, a `func.func` marked `q3.kernel`, with buffers (tensors,
    weights, the cache) and scalars (index values such as the start position
    or the layer). `form-dispatches` outlines every compute op into a kernel and
    shares one kernel among the identical dispatches of all layers, so the
    number of kernels does not grow with the depth of the model.

    ```mlir
    %x1 = q3.dispatch @fused_linear_residual_0(%o, %wo, %x0) : (tensor<?x2048xf32>, tensor<1024x2048xbf16>, tensor<?x1024xf32>) -> tensor<?x1024xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$kernel, Variadic<AnyType>:$operands);
  let results = (outs Variadic<AnyType>:$results);
  let assemblyFormat = "$kernel `(` $operands `)` attr-dict `:` functional-type($operands, $results)";
}

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

class Q3_ElementwiseBinaryOp<string mnemonic, string what>
    : Q3_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = what;
  let arguments = (ins Q3_Activation:$lhs, Q3_Activation:$rhs);
  let results = (outs Q3_Activation:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def Q3_AddOp : Q3_ElementwiseBinaryOp<"add", "elementwise sum (the residual connections)"> {
  let description = [{
    ```mlir
    %x1 = q3.add %x0, %attn_out : tensor<?x1024xf32>
    ```
  }];
}

def Q3_MulOp : Q3_ElementwiseBinaryOp<"mul", "elementwise product (SwiGLU's gate times up)"> {
  let description = [{
    ```mlir
    %gu = q3.mul %g, %u : tensor<?x3072xf32>
    ```
  }];
}

def Q3_SiluOp : Q3_Op<"silu", [Pure, SameOperandsAndResultType]> {
  let summary = "x * sigmoid(x)";
  let description = [{
    ```mlir
    %g = q3.silu %gate : tensor<?x3072xf32>
    ```
  }];
  let arguments = (ins Q3_Activation:$input);
  let results = (outs Q3_Activation:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

#endif // Q3_OPS_TD
