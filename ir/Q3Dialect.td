//===- Q3Dialect.td - the q3 dialect: the Qwen3 graph ---------*- tablegen -*-===//
//
// The q3 dialect describes a Qwen3 decoder at the level of its graph: embedding,
// RMSNorm, bias-free linears, heads, RoPE, the KV cache, attention and the MLP.
// Tensors are builtin ranked tensors: model dimensions are static, the sequence
// dimension is dynamic. Activations are f32; parameters keep the checkpoint's
// element type (bf16, f16 or f32).
//
//===----------------------------------------------------------------------===//

#ifndef Q3_DIALECT_TD
#define Q3_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Q3_Dialect : Dialect {
  let name = "q3";
  let cppNamespace = "::q3::ir";
  let summary = "The Qwen3 graph: a typed tensor IR of one decoder model";
  let description = [{
    One `func.func @forward` per module runs T tokens starting at position
    `%start_pos`, reads and extends the KV cache, and returns the logits of
    every position. Prefill is `T = prompt length, start_pos = 0`; a decode
    step is `T = 1, start_pos = p`. Weights are `q3.param` values that carry
    their Hugging Face tensor names.
  }];
  let useDefaultTypePrinterParser = 1;
  let useFoldAPI = kEmitFoldAdaptorFolder;
}

class Q3_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<Q3_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

//===----------------------------------------------------------------------===//
// KVCacheType
//===----------------------------------------------------------------------===//

def Q3_KVCacheType : Q3_Type<"KVCache", "kv_cache"> {
  let summary = "the key/value cache of every layer";
  let description = [{
    Per layer, room for `capacity` (chosen at run time) rotated keys and
    values of `kv_heads` heads of `head_dim` features, stored in f32. Only
    `q3.kv_cache_update` reads or writes it.

    ```mlir
    !q3.kv_cache<layers = 28, kv_heads = 8, head_dim = 128>
    ```
  }];
  let parameters = (ins "int64_t":$layers, "int64_t":$kv_heads, "int64_t":$head_dim);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // Q3_DIALECT_TD
