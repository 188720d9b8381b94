//===- CpuPasses.td - the CPU backend's target passes ---------*- tablegen -*-===//
//
// Each pass makes one decision about how the CPU runs the dispatch stage and
// records it in the IR: on the module (q3.target), on weights (layout
// transforms) or on each kernel's `q3.lowering`. Code generation and the
// artifact's manifest only read what they recorded. The order
// (backends/cpu/CpuPipeline.cpp):
//   cpu-set-target, cpu-pack-column-blocks, cpu-sink-weight-concat,
//   cpu-select-matmul, cpu-select-attention-matmul, cpu-select-tiles,
//   cpu-assign-grids, cpu-split-decode-attention, cpu-set-chunking,
//   cpu-set-prefetch, cpu-add-variants
//
//===----------------------------------------------------------------------===//

#ifndef Q3_CPU_PASSES_TD
#define Q3_CPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def CpuSetTarget : Pass<"cpu-set-target", "mlir::ModuleOp"> {
  let summary = "Record the CPU the module is compiled for";
  let description = [{
    Sets the module's `q3.target` to `cpu` (this machine as LLVM sees it, for
    `host`, or an x86-64 level) with the LLVM CPU name and the features the
    runtime must find on the machine that loads the artifact. The other CPU
    passes decide from these features, never from the CPU's name.
  }];
  let constructor = "q3::cpu::createCpuSetTargetPass()";
  let options = [
    Option<"cpu", "cpu", "std::string", /*default=*/"\"host\"",
           "host, x86-64-v2, x86-64-v3 or x86-64-v4">
  ];
}

def CpuPackColumnBlocks : Pass<"cpu-pack-column-blocks", "mlir::ModuleOp"> {
  let summary = "Decide where the bf16 weights of products are put in column blocks";
  let description = [{
    For every product kernel (`q3.fused_linear`, bias-free `q3.linear`) whose
    weight is bf16 with a multiple of 16 rows and an even number of columns,
    decides where its weight is put in column blocks (16 output features x 2
    inputs per 64-byte load, which the CPU kernels widen exactly and multiply
    without horizontal sums) and records it as the kernel's
    `weight_packing`:

    - `at_load`: re-types the kernel's weight argument to
      `#q3.column_blocks` and feeds every dispatch of it through
      `q3.pack_column_blocks` (one per weight, a weight transform evaluated
      once at load, or at compile time with `--embed-weights`);
    - `per_call`: the weight stays row-major, so the runtime binds the
      checkpoint's mapped bytes and loading copies nothing; each prefill packs
      the panels it multiplies, decode reads the rows in place.

    `auto` packs at load where the target may run AMX (its tile unit reads
    the packed weights), per call elsewhere.
  }];
  let constructor = "q3::cpu::createCpuPackColumnBlocksPass()";
  let options = [
    Option<"packing", "packing", "std::string", /*default=*/"\"auto\"",
           "auto, at-load or per-call">
  ];
}

def CpuSinkWeightConcat : Pass<"cpu-sink-weight-concat", "mlir::ModuleOp"> {
  let summary = "Let products that read rows in place take concatenated weights part by part";
  let description = [{
    For every product kernel that reads its weight's rows where they are
    bound (not packed at load: `weight_packing = per_call`, or a weight the
    row-major kernels read, f32) whose weight is, at every dispatch, a
    `q3.concat_rows` of the same part shapes (each a multiple of 16 rows),
    passes the parts to the kernel instead and concatenates them inside it:
    the weight plan no longer copies them at load, and the kernel reads each
    part where it was bound. Concatenations left without users are erased.
  }];
  let constructor = "q3::cpu::createCpuSinkWeightConcatPass()";
}

def CpuSelectMatmul : Pass<"cpu-select-matmul", "mlir::ModuleOp"> {
  let summary = "Choose the instructions of each product's prefill";
  let description = [{
    Sets `matmul` in the `q3.lowering` of every product kernel whose weight
    is in column blocks: `f32` (exact f32 FMAs), `avx512bf16` (vdpbf16ps) or
    `amx` (AMX-BF16 tiles; needs K % 32 == 0, else f32). The bf16 choices
    round the prefill's activations to bf16. `auto` takes the module's
    measured choice (`q3.tuning`, recorded by q3c compile's tuner) when there
    is one, else `amx` where the target has AMX-BF16 (`avx512bf16` for a
    product packed per call, which the tile unit cannot read) and `f32`
    elsewhere. A choice the target lacks is an error.
  }];
  let constructor = "q3::cpu::createCpuSelectMatmulPass()";
  let options = [
    Option<"matmul", "matmul", "std::string", /*default=*/"\"auto\"",
           "auto, f32, avx512bf16 or amx">
  ];
}

def CpuSelectAttentionMatmul : Pass<"cpu-select-attention-matmul", "mlir::ModuleOp"> {
  let summary = "Choose the instructions of attention's prefill";
  let description = [{
    Sets `matmul` in the `q3.lowering` of every attention kernel: `f32`
    (f32 FMAs) or `avx512bf16` (vdpbf16ps on the scaled queries, keys,
    probabilities and values rounded to bf16; sums and softmax in f32; only
    for head_dim % 32 == 0, else f32). Decode's attention is f32 either way.
    `auto` takes `avx512bf16` where the products' prefill runs it (the
    tuner's measurement of vdpbf16ps against f32 FMAs on this CPU, run
    before this pass by cpu-select-matmul) unless the module's `q3.tuning`
    says `attention_matmul = "f32"` (q3c compile measured this attention
    faster with f32 FMAs), else `f32`. A choice the target lacks is an
    error.
  }];
  let constructor = "q3::cpu::createCpuSelectAttentionMatmulPass()";
  let options = [
    Option<"matmul", "matmul", "std::string", /*default=*/"\"auto\"",
           "auto, f32 or avx512bf16">
  ];
}

def CpuSelectTiles : Pass<"cpu-select-tiles", "mlir::ModuleOp"> {
  let summary = "Choose the register tile of each product's prefill";
  let description = [{
    Sets `tile = [rows, 2]` in the `q3.lowering` of every column-block
    product whose prefill runs on FMA or vdpbf16ps tiles: each weight load
    serves `rows` prompt rows times two blocks of 16 outputs, in 2 x rows
    16-lane accumulators. `prefill-rows=0` takes the module's measured choice
    (`q3.tuning`) when there is one, else 6 on targets with AVX-512 (32
    vector registers) and 2 elsewhere.
  }];
  let constructor = "q3::cpu::createCpuSelectTilesPass()";
  let options = [
    Option<"prefillRows", "prefill-rows", "int64_t", /*default=*/"0",
           "Rows of the prefill register tile, 1 to 8; 0: measured or default">
  ];
}

def CpuAssignGrids : Pass<"cpu-assign-grids", "mlir::ModuleOp"> {
  let summary = "Give every kernel its workgroup grid";
  let description = [{
    Sets `grid` in each kernel's `q3.lowering`: a product computes 64 output
    features per workgroup (`fixed ceil(N / 64)`, all rows); the embedding
    one row (`per_row 1`); q/k-norm + RoPE one row and query head
    (`per_row Hq`); attention one row and the query heads that share a KV
    head (`per_row Hq / P` with `tile = [P, 16 / P, sets]`: P heads per
    workgroup, the rows of a prefill block, the blocks a workgroup runs).
    A kernel without a CPU implementation is an error.
  }];
  let constructor = "q3::cpu::createCpuAssignGridsPass()";
}

def CpuSplitDecodeAttention : Pass<"cpu-split-decode-attention", "mlir::ModuleOp"> {
  let summary = "Split decode attention's positions so every thread streams the cache";
  let description = [{
    Decode attention runs one workgroup per head group (the query heads on
    one KV head: 8 for every Qwen3 size), so a machine with more threads
    leaves the rest idle while the cache streams. This pass gives each
    attention kernel (vector template: head_dim a multiple of 16) `splits`
    workgroups per head group: the fourth entry of its `tile`, its grid
    multiplied by it, and `workspace_bytes` for the splits' partial results
    and arrival counters. A split takes at least 512 positions, so shorter
    contexts still run in one workgroup. `splits` 0 takes what `q3c compile
    --tune` measured (q3.tuning's `attention_decode_splits`), else
    ceil(threads / head groups), at most 16, with `threads` the CPUs this
    process may use for `cpu = host` and 16 for portable targets; `threads`
    overrides that count. Runs after cpu-assign-grids.
  }];
  let constructor = "q3::cpu::createCpuSplitDecodeAttentionPass()";
  let options = [
    Option<"splits", "splits", "int64_t", /*default=*/"0",
           "Workgroups per head group in decode, 1 to 16 (0: from the threads)">,
    Option<"threads", "threads", "int64_t", /*default=*/"0",
           "Threads to cover (0: this machine's CPUs for cpu = host, else 16)">
  ];
}

def CpuAddVariants : Pass<"cpu-add-variants", "mlir::ModuleOp"> {
  let summary = "Give the products of a portable target the variants the runtime picks from";
  let description = [{
    For a portable target, whose artifacts run on CPUs the compiler cannot
    measure, sets `q3.variants` on every column-block product whose prefill
    is f32: complete alternative `#q3.lowering`s. `cpu = x86-64-v4` (CPUs
    with and without AVX512-BF16 and AMX): vdpbf16ps with 6- and 8-row
    tiles, and AMX when K % 32 == 0; `cpu = x86-64-v3`: the f32 tiles of 1
    to 4 rows other than its own. Each is compiled as its own kernel; at load
    the runtime drops those whose instructions the CPU lacks and times one
    prefill dispatch of each remaining one, the default included, and runs
    the fastest. On x86-64-v4, attention whose prefill is f32 and whose
    head_dim the bf16 flash kernel takes gets a vdpbf16ps variant (its own
    default row sets) and `q3.variant_choice = "like_products"`: a 32-row
    timing says nothing of long prompts, so the runtime runs it where a
    product's chosen build runs vdpbf16ps, as cpu-select-attention-matmul's
    `auto` does at compile time. `--cpu=host` measures at compile time
    instead (q3.tuning); x86-64-v2 (SSE only) gets none.
  }];
  let constructor = "q3::cpu::createCpuAddVariantsPass()";
  let options = [
    Option<"enabled", "enabled", "bool", /*default=*/"true",
           "Add variants (false when the user chose the prefill instructions)">,
    Option<"attention", "attention", "bool", /*default=*/"true",
           "Give attention its variant too (false when the user chose "
           "attention's instructions)">
  ];
}

def CpuSetChunking : Pass<"cpu-set-chunking", "mlir::ModuleOp"> {
  let summary = "Choose how finely the runtime splits each dispatch";
  let description = [{
    Sets `prefill_chunks` and `decode_chunks` in each kernel's `q3.lowering`:
    how many pieces per thread the runtime cuts a dispatch of several rows /
    of one row into, so a thread that falls behind hands its last pieces to
    the others. Products split decodes `decode-chunks` ways (by default what
    `q3c compile --tune` measured, recorded as q3.tuning's `decode_chunks`,
    else 4), and a product 2^k times the SwiGLU product's weight bytes k
    more (a thread's pieces halve in size, so its last ones are then as
    small as the SwiGLU product's); attention splits prefills
    `attention-chunks` ways (causal rows are unequal work); the rest run one
    piece per thread.
  }];
  let constructor = "q3::cpu::createCpuSetChunkingPass()";
  let options = [
    Option<"decodeChunks", "decode-chunks", "int64_t", /*default=*/"0",
           "Pieces per thread of a product's one-row dispatch (0: q3.tuning's "
           "decode_chunks, else 4)">,
    Option<"attentionChunks", "attention-chunks", "int64_t", /*default=*/"8",
           "Pieces per thread of attention's prefill dispatch">
  ];
}

def CpuSetPrefetch : Pass<"cpu-set-prefetch", "mlir::ModuleOp"> {
  let summary = "Choose how far ahead decode loops prefetch what they stream";
  let description = [{
    Sets `prefetch_bytes` in the `q3.lowering` of each product and attention
    kernel (vector template: head_dim a multiple of 16): how many bytes ahead of its loads a one-row loop prefetches the
    weights (products) or the keys and values (attention) it streams, or
    `none` (no software prefetch). By default what `q3c compile --tune`
    measured: on products, q3.tuning's `decode_prefetch_bytes` (a byte
    count or "none"); on attention, `attention_decode_prefetch_bytes`
    (8192 or "none"; without it, the products' distance, 8192 when that is
    none); else 8192.
  }];
  let constructor = "q3::cpu::createCpuSetPrefetchPass()";
  let options = [
    Option<"prefetchBytes", "prefetch-bytes", "int64_t", /*default=*/"0",
           "Bytes ahead, -1: no software prefetch (0: q3.tuning's "
           "decode_prefetch_bytes, else 8192)">
  ];
}

def CpuSetDecodeStreams : Pass<"cpu-set-decode-streams", "mlir::ModuleOp"> {
  let summary = "Choose how many runs of memory decode loops read side by side";
  let description = [{
    Sets `decode_streams` in the `q3.lowering` of each product and attention
    kernel (vector template: head_dim a multiple of 16): a product's one-row
    loop reads that many weight rows side by side (SwiGLU: at least its gate
    and up rows), attention's decode that many runs of each block's key and
    value positions. Each run is a memory stream; one per core left a third
    of the bandwidth unused on one AMD EPYC family 26 host (on another one
    read fastest). By default what `q3c compile --tune` measured, recorded
    as q3.tuning's `decode_streams` (products) and `attention_decode_streams`
    (attention), else 4.
  }];
  let constructor = "q3::cpu::createCpuSetDecodeStreamsPass()";
  let options = [
    Option<"streams", "streams", "int64_t", /*default=*/"0",
           "Runs side by side: 1, 2 or 4 (0: q3.tuning's decode_streams, else 4)">
  ];
}

def CpuSetDecodeAccumulators : Pass<"cpu-set-decode-accumulators", "mlir::ModuleOp"> {
  let summary = "Choose how many vector accumulators a decode loop sums each weight row or head into";
  let description = [{
    Sets `decode_accumulators` in the `q3.lowering` of each product kernel
    whose one-row loop reads weight rows (not one packed at load): the most
    of 4, 2 and 1 for which the rows read side by side (`decode_streams`;
    SwiGLU at least 2) times the accumulators take at most half of the
    target's vector registers (each accumulator 16 f32 lanes: one zmm with
    AVX-512, two ymm with AVX2, four xmm before). Four on AVX2's 16 ymm with
    two rows spilled on every step. Runs after cpu-set-decode-streams.

    For each attention kernel with the vector template (head_dim a multiple
    of 16) it sets how many 16-lane value columns per head one pass of
    decode over a block's values sums: the most, up to all of them, for
    which the workgroup's heads times the columns take at most half of the
    registers (two heads: 8 with AVX-512, 2 with AVX2).
  }];
  let constructor = "q3::cpu::createCpuSetDecodeAccumulatorsPass()";
  let options = [
    Option<"accumulators", "accumulators", "int64_t", /*default=*/"0",
           "Accumulators per row: 1, 2 or 4 (0: the most the target's registers fit)">,
    Option<"attentionAccumulators", "attention-accumulators", "int64_t", /*default=*/"0",
           "Value columns per head of a decode attention pass: 1 to head_dim / 16 "
           "(0: the most the target's registers fit)">
  ];
}

def CpuSelectInPlaceRows : Pass<"cpu-select-in-place-rows", "mlir::ModuleOp"> {
  let summary = "Let short prefills multiply a per-call product's weight rows in place";
  let description = [{
    Appends a third entry to the `tile = [rows, 2]` of each product that
    packs its panels per call with `matmul = avx512bf16` (bf16 weight, K/2 a
    multiple of 16), and of each such `q3.variants` lowering: `tile =
    [rows, 2, N]`, a prefill of at most N rows multiplies the weight rows in
    place, once for all its rows (vdpbf16ps on the rounded activations'
    (k, k+1) pairs, read as decode reads them), instead of packing panels
    for so few rows. `rows=0` takes 7 (7 rows x 4 weight rows read side by
    side are 28 of the 32 vector registers); 1 leaves every prefill to the
    panels.
  }];
  let constructor = "q3::cpu::createCpuSelectInPlaceRowsPass()";
  let options = [
    Option<"rows", "rows", "int64_t", /*default=*/"0",
           "Most prefill rows read in place, 1 to 7 (0: 7; 1: none)">
  ];
}

def CpuPlanThreadScratch : Pass<"cpu-plan-thread-scratch", "mlir::ModuleOp"> {
  let summary = "Plan the memory each call of a kernel takes on the thread that runs it";
  let description = [{
    Sets `thread_scratch` (`F + R * rows` bytes) in the `q3.lowering` of each
    product kernel and of each of its `q3.variants`: the panel a per-call
    prefill packs its weight blocks into, the gain-scaled activations, the
    bf16-rounded activations of a vdpbf16ps or AMX prefill. Runs after every
    pass that decides those. The runtime gives each of its threads one
    region of the largest any kernel takes at the planned prefill chunk and
    passes it to every call; the kernels allocate nothing.
  }];
  let constructor = "q3::cpu::createCpuPlanThreadScratchPass()";
}

#endif // Q3_CPU_PASSES_TD
