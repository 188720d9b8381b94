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
  let useDefaultAttributePrinterParser = 1;
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
    values of `kv_heads` heads of `head_dim` features, stored as `element`:
    f32 (the default, exact; not printed), or bf16 / f16, to which keys and
    values are rounded (to nearest even) when they are written and from
    which they are widened exactly when attention reads them. Only the cache
    ops (`q3.kv_cache_update`, `q3.qk_norm_rope_cache`) read or write it.

    ```mlir
    !q3.kv_cache<layers = 28, kv_heads = 8, head_dim = 128>
    !q3.kv_cache<layers = 28, kv_heads = 8, head_dim = 128, element = bf16>
    ```
  }];
  let parameters = (ins "int64_t":$layers, "int64_t":$kv_heads, "int64_t":$head_dim,
                        DefaultValuedParameter<"::mlir::Type",
                                               "::mlir::Float32Type::get($_ctxt)">:$element);
  let builders = [
    TypeBuilder<(ins "int64_t":$layers, "int64_t":$kvHeads, "int64_t":$headDim), [{
      return $_get($_ctxt, layers, kvHeads, headDim, ::mlir::Float32Type::get($_ctxt));
    }]>
  ];
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

class Q3_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Q3_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def Q3_ColumnBlocksAttr : Q3_Attr<"ColumnBlocks", "column_blocks"> {
  let summary = "tensor encoding: a 16-bit weight stored in column blocks";
  let description = [{
    The encoding of a `[N, K]` weight (bf16 or f16) whose bytes are laid out
    as `[N/16][K/2][16][2]`: block `b` holds rows `16b .. 16b+15`, and for
    each pair of columns `(k, k+1)` the 16 rows' two values side by side, so
    one 64-byte load gives 16 output features times 2 inputs. The logical
    shape and the values are unchanged: only the storage order differs.
    Created by `q3.pack_column_blocks`.

    ```mlir
    tensor<4096x1024xbf16, #q3.column_blocks>
    ```
  }];
}

def Q3_LoweringConfigAttr : Q3_Attr<"LoweringConfig", "lowering"> {
  let summary = "how a backend runs one kernel: grid, instructions, tiles, chunking, prefetch";
  let description = [{
    Set on each `q3.kernel` function (as `q3.lowering`) by the target passes,
    one decision per pass, and read by code generation and the runtime; the
    artifact's manifest is its serialization. Every field is optional until
    the pass that decides it ran.

    - `grid`: the workgroups of a dispatch: `fixed N` (N workgroups whatever
      the number of rows T) or `per_row N` (T x N).
    - `matmul`: the instructions of a product's prefill (more than one row):
      `f32` (f32 FMAs on exactly widened weights), `avx512bf16` or `amx`
      (activations rounded to bf16, exact bf16 products accumulated in f32;
      bf16 weights only); of attention's prefill, `f32` or `avx512bf16`.
    - `tile`: the register tile of a product's prefill, rows x column blocks,
      and for a product packed per call with vdpbf16ps a third entry: the
      most prefill rows it multiplies against its weight rows in place,
      without panels; for attention, the query heads of a workgroup x the
      rows of a prefill block x the blocks one workgroup runs (they share
      each key block) x the workgroups a head group's decode is split into
      over the positions (1 when left out).
    - `prefill_chunks`, `decode_chunks`: how finely the runtime splits a
      dispatch of several rows / of one row for its threads to claim, per
      thread (1 to 64).
    - `weight_packing`: where a bf16 or f16 product's weight is put in column
      blocks: `at_load` (a `q3.pack_column_blocks` weight transform feeds
      the kernel, whose weight argument is `#q3.column_blocks`) or
      `per_call` (the weight stays row-major, bound straight from the
      checkpoint, and each prefill packs the 32-row panels it multiplies;
      decode reads the rows in place).
    - `prefetch_bytes`: how far ahead of its loads a one-row (decode) loop
      prefetches the memory it streams, in bytes: a product's weights,
      attention's keys and values; `none`: the loop issues no prefetch and
      leaves the streams to the hardware prefetchers.
    - `decode_streams`: how many runs of that memory a one-row loop reads
      side by side (1, 2 or 4): a product's weight rows (SwiGLU: at least its
      gate and up rows), attention's key and value positions. Each run is a
      memory stream the hardware prefetchers follow; one per core leaves
      bandwidth unused on some machines.
    - `decode_accumulators`: how many vector accumulators (of 16 f32 lanes)
      a one-row loop keeps per row or head. A product: each weight row sums
      into 1, 2 or 4 (the loop's 64-element steps add their four 16-element
      products into accumulator i % N); four keep FMA latency off a decode
      step's path. Attention: each pass over a block's values sums this many
      16-lane columns of each head's output (1 to 16, at most head_dim / 16;
      the rest of a value row waits for the next pass). Either way rows or
      heads side by side times accumulators must fit the vector registers:
      with 16 of 256 bits (AVX2), two rows of four spilled on every step.
    - `workspace_bytes`: scratch memory the kernel needs beside its operands
      and results (the runtime allocates it zeroed, once, and passes it after
      the results; the kernel leaves it as it found it): attention's decode
      split over positions keeps its partial results and arrival counters
      there.
    - `thread_scratch`: memory one call of the kernel takes beside its
      operands, on each thread that runs it, as `F + R * rows` bytes (F
      fixed, R per row of the dispatch): a product's per-call panel, its
      gain-scaled activations (every row for an f32 prefill, decode's row
      where the prefill rounds) and its bf16-rounded activations; the bf16
      flash attention prefill's rounded key and value rows. The runtime gives each
      of its threads one region, of the largest any kernel or build takes at
      the planned prefill chunk, and passes the thread's region after the
      workspace; nothing is kept there between calls. A kernel without it
      allocates nothing (its few KiB of registers' spill stay on the stack).
    - `workgroup_size`: the invocations of one workgroup (GPU targets).

    ```mlir
    #q3.lowering<grid = fixed 64, matmul = avx512bf16, tile = [8, 2],
                 weight_packing = per_call, decode_chunks = 16, prefetch_bytes = 8192,
                 decode_streams = 4, decode_accumulators = 4,
                 thread_scratch = 69632 + 2048 * rows>
    ```
  }];
  let parameters = (ins StringRefParameter<"grid kind: fixed or per_row">:$grid_kind,
                        "int64_t":$grid_count,
                        StringRefParameter<"prefill product instructions">:$matmul,
                        ArrayRefParameter<"int64_t", "register tile">:$tile,
                        StringRefParameter<"where a product's weight is packed">:$weight_packing,
                        "int64_t":$prefill_chunks, "int64_t":$decode_chunks,
                        "int64_t":$prefetch_bytes, "int64_t":$decode_streams,
                        "int64_t":$decode_accumulators,
                        "int64_t":$workspace_bytes,
                        "int64_t":$thread_scratch_bytes, "int64_t":$thread_scratch_row_bytes,
                        ArrayRefParameter<"int64_t", "workgroup size">:$workgroup_size);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// An empty config (every field unset).
    static LoweringConfigAttr empty(::mlir::MLIRContext *context);
    /// Copies of this config with one field set.
    LoweringConfigAttr withGrid(::llvm::StringRef kind, int64_t count) const;
    LoweringConfigAttr withMatmul(::llvm::StringRef matmul) const;
    LoweringConfigAttr withTile(::llvm::ArrayRef<int64_t> tile) const;
    LoweringConfigAttr withWeightPacking(::llvm::StringRef packing) const;
    /// weight_packing = per_call.
    bool packsPerCall() const { return getWeightPacking() == "per_call"; }
    LoweringConfigAttr withChunks(int64_t prefill, int64_t decode) const;
    LoweringConfigAttr withPrefetchBytes(int64_t bytes) const;
    LoweringConfigAttr withDecodeStreams(int64_t streams) const;
    LoweringConfigAttr withDecodeAccumulators(int64_t accumulators) const;
    LoweringConfigAttr withWorkgroupSize(::llvm::ArrayRef<int64_t> size) const;
    LoweringConfigAttr withWorkspaceBytes(int64_t bytes) const;
    LoweringConfigAttr withThreadScratch(int64_t bytes, int64_t rowBytes) const;
    /// thread_scratch's bytes for a dispatch of `rows` rows.
    int64_t threadScratchBytesFor(int64_t rows) const {
      return getThreadScratchBytes() + getThreadScratchRowBytes() * rows;
    }
    /// thread_scratch as the IR spells it: "F + R * rows".
    static std::string threadScratchText(int64_t bytes, int64_t rowBytes);
    bool hasGrid() const { return !getGridKind().empty(); }
    /// prefetch_bytes, when set: at least a cache line, at most 1 MiB, or
    /// kNoPrefetch (printed `none`).
    static constexpr int64_t kMinPrefetchBytes = 64;
    static constexpr int64_t kNoPrefetch = -1;
    static constexpr int64_t kMaxPrefetchBytes = int64_t(1) << 20;
    /// decode_streams, when set: one of these.
    static constexpr int64_t kDecodeStreamCounts[] = {1, 2, 4};
    /// decode_accumulators, when set: 1 to this many (attention's value
    /// columns per head); a product's, one of kDecodeAccumulatorCounts.
    static constexpr int64_t kMaxDecodeAccumulators = 16;
    static constexpr int64_t kDecodeAccumulatorCounts[] = {1, 2, 4};
    /// workspace_bytes, when set: at most 64 MiB.
    static constexpr int64_t kMaxWorkspaceBytes = int64_t(64) << 20;
    /// thread_scratch: F at most 64 MiB, R at most 1 MiB.
    static constexpr int64_t kMaxThreadScratchBytes = int64_t(64) << 20;
    static constexpr int64_t kMaxThreadScratchRowBytes = int64_t(1) << 20;
  }];
}

#endif // Q3_DIALECT_TD
