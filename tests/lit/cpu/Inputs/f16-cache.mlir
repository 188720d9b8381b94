// An f16 KV cache, which the CPU backend stores with F16C (cpu-set-target.mlir).
module {
  func.func @forward(%c: !q3.kv_cache<layers = 1, kv_heads = 1, head_dim = 8, element = f16>) {
    return
  }
}
