//===- AmxLinearSource.cpp - fused_linear prefill on the AMX tile unit ----===//
//
// The prefill of a column-block fused_linear on AMX-BF16. The column-block
// layout ([N/16][K/2][16][2]) is already the tile unit's B operand: 16 k
// pairs of one block are a 16 x 64-byte tile, contiguous. The activations,
// rounded to bf16 row-major ([rows][K], padded to 32 rows), are the A
// operand. One step of 32 k loads two A tiles (rows t..t+15, t+16..t+31)
// and two B tiles (the block pair) and accumulates four 16 x 16 f32 tiles
// with tdpbf16ps; the tiles go to a 32 x 32 scratch and the usual epilogue
// stores them.
//
// The tile instructions are inline assembly: tmm0-3 hold the accumulators,
// tmm4-5 the A tiles and tmm6-7 the B tiles. LLVM never allocates tile
// registers itself here, so the values live across asm statements; every
// statement is marked as having side effects and clobbering memory so that
// LLVM keeps their order and the stores they read. The runtime asks Linux
// for the AMX state (arch_prctl ARCH_REQ_XCOMP_PERM) before it loads such
// a library.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/ColumnBlockLinear.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

namespace q3::cpu::detail {
namespace {

constexpr int64_t kAmxTileRows = FusedLinearKernel::kAmxTileRows; // output rows per tile pair
constexpr int64_t kTileBytes = 64;   // bytes of one tile row

/// `llvm.inline_asm` that has side effects and clobbers memory, on i64
/// `operands` (addresses and strides) passed in registers as $0, $1, ...
std::string tileAsm(const std::string &instructions, const std::vector<std::string> &operands) {
  std::string constraints, types;
  for (size_t i = 0; i < operands.size(); ++i) {
    constraints += "r,";
    types += i ? ", i64" : "i64";
  }
  return fmt::format("llvm.inline_asm has_side_effects asm_dialect = att \"{}\", "
                     "\"{}~{{memory}}\" {} : ({}) -> ()\n",
                     instructions, constraints, fmt::join(operands, ", "), types);
}

/// @<name>_amx_tile(xh, w, out, t0, bA, bB, wflat, nA, nB, pass, passes):
/// rows t0 .. t0+31 of the rounded activations (address xh) times blocks bA
/// and bB of the weight (address w), over all K, into the 32 x 32 f32
/// scratch at `out` (rows of 128 bytes).
///
/// It also prefetches the next block pair (nA, nB) into L2, spread over the
/// `passes` row tiles of this pair: this one (`pass`) takes its share of the
/// 16 lines of each step. Without it the first row tile of every pair waits
/// on DRAM for its weights (measured: the SwiGLU kernel's prefill time
/// relative to the other products rose from 0.56-0.59 to 0.62-0.75 without).
std::string tileFunction(const FusedLinearKernel &kernel, const ColumnBlockLayout &l) {
  const int64_t rowBytes = 2 * l.k;
  // Each load is issued right before the first product that needs it, so
  // the tile unit multiplies while the next operand loads (all loads first
  // measured ~10% slower: the SwiGLU kernel's prefill time relative to the
  // others, 0.62-0.68 -> 0.56-0.59 over four alternating runs).
  const std::string loadAndMultiply = "tileloadd ($0,$4,1), %tmm4\\0A"
                                      "tileloadd ($2,$5,1), %tmm6\\0A"
                                      "tdpbf16ps %tmm6, %tmm4, %tmm0\\0A"
                                      "tileloadd ($3,$5,1), %tmm7\\0A"
                                      "tdpbf16ps %tmm7, %tmm4, %tmm1\\0A"
                                      "tileloadd ($1,$4,1), %tmm5\\0A"
                                      "tdpbf16ps %tmm6, %tmm5, %tmm2\\0A"
                                      "tdpbf16ps %tmm7, %tmm5, %tmm3";
  const std::string storeAll = "tilestored %tmm0, ($0,$4,1)\\0A"
                               "tilestored %tmm1, ($1,$4,1)\\0A"
                               "tilestored %tmm2, ($2,$4,1)\\0A"
                               "tilestored %tmm3, ($3,$4,1)";
  return fmt::format(
      R"mlir(
func.func private @{name}_amx_tile(%xh: i64, %w: i64, %out: i64, %t0: index, %bA: index, %bB: index, %wflat: {flatType}, %nA: index, %nB: index, %pass: index, %passes: index) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cLines = arith.constant 16 : index
  %cLineElems = arith.constant 32 : index
  %cStepElems = arith.constant 512 : index
  %cBlockElems = arith.constant {blockElems} : index
  %passesLess = arith.subi %passes, %c1 : index
  %linesRoundedUp = arith.addi %cLines, %passesLess : index
  %linesPerPass = arith.divui %linesRoundedUp, %passes : index
  %firstLine0 = arith.muli %pass, %linesPerPass : index
  %firstLine = arith.minui %firstLine0, %cLines : index
  %lastLine0 = arith.addi %firstLine, %linesPerPass : index
  %lastLine = arith.minui %lastLine0, %cLines : index
  %nextA = arith.muli %nA, %cBlockElems : index
  %nextB = arith.muli %nB, %cBlockElems : index
  %cSteps = arith.constant {steps} : index
  %rowBytes = arith.constant {rowBytes} : i64
  %halfTileBytes = arith.constant {halfTileBytes} : i64
  %blockBytes = arith.constant {blockBytes} : i64
  %tileBytes = arith.constant {tileBytes} : i64
  %stepBytesB = arith.constant {stepBytesB} : i64
  %outRowBytes = arith.constant {outRowBytes} : i64
  %outHalf = arith.constant {outHalf} : i64
  %t0i = arith.index_cast %t0 : index to i64
  %a0off = arith.muli %t0i, %rowBytes : i64
  %a0 = arith.addi %xh, %a0off : i64
  %a1 = arith.addi %a0, %halfTileBytes : i64
  %bAi = arith.index_cast %bA : index to i64
  %bBi = arith.index_cast %bB : index to i64
  %b0off = arith.muli %bAi, %blockBytes : i64
  %b1off = arith.muli %bBi, %blockBytes : i64
  %b0 = arith.addi %w, %b0off : i64
  %b1 = arith.addi %w, %b1off : i64
  {zero}  scf.for %step = %c0 to %cSteps step %c1 {{
    %si = arith.index_cast %step : index to i64
    %aOff = arith.muli %si, %tileBytes : i64
    %bOff = arith.muli %si, %stepBytesB : i64
    %pa0 = arith.addi %a0, %aOff : i64
    %pa1 = arith.addi %a1, %aOff : i64
    %pb0 = arith.addi %b0, %bOff : i64
    %pb1 = arith.addi %b1, %bOff : i64
    {multiply}    %stepAt = arith.muli %step, %cStepElems : index
    %stepA = arith.addi %nextA, %stepAt : index
    %stepB = arith.addi %nextB, %stepAt : index
    scf.for %line = %firstLine to %lastLine step %c1 {{
      %lineAt = arith.muli %line, %cLineElems : index
      %pfA = arith.addi %stepA, %lineAt : index
      %pfB = arith.addi %stepB, %lineAt : index
      memref.prefetch %wflat[%pfA], read, locality<2>, data : {flatType}
      memref.prefetch %wflat[%pfB], read, locality<2>, data : {flatType}
    }}
  }}
  %o01 = arith.addi %out, %tileBytes : i64
  %o10 = arith.addi %out, %outHalf : i64
  %o11 = arith.addi %o10, %tileBytes : i64
  {store}  return
}}
)mlir",
      fmt::arg("name", kernel.name), fmt::arg("steps", l.k / FusedLinearKernel::kAmxDepth),
      fmt::arg("flatType", l.flatType), fmt::arg("blockElems", l.pairs * 32),
      fmt::arg("rowBytes", rowBytes), fmt::arg("halfTileBytes", 16 * rowBytes),
      fmt::arg("blockBytes", l.pairs * kTileBytes), fmt::arg("tileBytes", kTileBytes),
      fmt::arg("stepBytesB", 16 * kTileBytes), fmt::arg("outRowBytes", 2 * kTileBytes),
      fmt::arg("outHalf", 16 * 2 * kTileBytes),
      fmt::arg("zero", tileAsm("tilezero %tmm0\\0Atilezero %tmm1\\0Atilezero %tmm2\\0Atilezero "
                               "%tmm3",
                               {})),
      fmt::arg("multiply", tileAsm(loadAndMultiply,
                                   {"%pa0", "%pa1", "%pb0", "%pb1", "%rowBytes", "%tileBytes"})),
      fmt::arg("store", tileAsm(storeAll, {"%out", "%o01", "%o10", "%o11", "%outRowBytes"})));
}

/// @<name>_amx_configure(cfg): palette 1, tiles 0-7 of 16 rows x 64 bytes,
/// loaded with ldtilecfg from the 64-byte `cfg`.
std::string configureFunction(const FusedLinearKernel &kernel) {
  return fmt::format(
      R"mlir(
func.func private @{name}_amx_configure(%cfg: memref<64xi8>) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %c48 = arith.constant 48 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant 0 : i8
  %palette = arith.constant 1 : i8
  %rowBytes = arith.constant {tileBytes} : i8
  %rows = arith.constant 16 : i8
  scf.for %i = %c0 to %c64 step %c1 {{
    memref.store %zero, %cfg[%i] : memref<64xi8>
  }}
  memref.store %palette, %cfg[%c0] : memref<64xi8>
  scf.for %tile = %c0 to %c8 step %c1 {{
    %twice = arith.addi %tile, %tile : index
    %colsAt = arith.addi %c16, %twice : index
    memref.store %rowBytes, %cfg[%colsAt] : memref<64xi8>
    %rowsAt = arith.addi %c48, %tile : index
    memref.store %rows, %cfg[%rowsAt] : memref<64xi8>
  }}
  %at = memref.extract_aligned_pointer_as_index %cfg : memref<64xi8> -> index
  %ati = arith.index_cast %at : index to i64
  {load}  return
}}
)mlir",
      fmt::arg("name", kernel.name), fmt::arg("tileBytes", kTileBytes),
      fmt::arg("load", tileAsm("ldtilecfg ($0)", {"%ati"})));
}

} // namespace

std::string amxFunctions(const FusedLinearKernel &kernel, const ColumnBlockLayout &l) {
  return tileFunction(kernel, l) + configureFunction(kernel);
}

std::string amxPrefill(const FusedLinearKernel &kernel, const ColumnBlockLayout &l,
                       const std::string &residual) {
  const RoundedActivations rounded = roundedActivations(kernel, l, "%rows", "%amxRows");
  // One 32 x 32 tile: row r of the scratch holds block bA in columns 0-15
  // and block bB in 16-31.
  std::string epilogue = "            %v0 = vector.load %amxOut[%r, %c0] : memref<32x32xf32>, "
                         "vector<16xf32>\n"
                         "            %v1 = vector.load %amxOut[%r, %c16] : memref<32x32xf32>, "
                         "vector<16xf32>\n";
  if (kernel.swiglu) {
    epilogue +=
        "            " + storeCall(kernel, l, "%v0", "%v1", "%st", "%tr", "%colA", residual) + "\n";
  } else {
    epilogue +=
        "            " + storeCall(kernel, l, "%v0", "%v0", "%st", "%tr", "%colA", residual) + "\n";
    epilogue += fmt::format("            scf.if %pairFull {{\n              {}\n            }}\n",
                            storeCall(kernel, l, "%v1", "%v1", "%st", "%tr", "%colB", residual));
  }
  return fmt::format(
      R"mlir(    %cAmxRows = arith.constant {tileRows} : index
    %cAmxPad = arith.constant {pad} : index
    %amxPadded = arith.addi %rows, %cAmxPad : index
    %amxTiles = arith.divui %amxPadded, %cAmxRows : index
    %amxRows = arith.muli %amxTiles, %cAmxRows : index
    %cLastBlock = arith.constant {lastBlock} : index
{round}    %amxCfg = memref.alloca() {{alignment = 64 : i64}} : memref<64xi8>
    func.call @{name}_amx_configure(%amxCfg) : (memref<64xi8>) -> ()
    %amxOut = memref.alloca() {{alignment = 64 : i64}} : memref<32x32xf32>
    %amxOutAtIndex = memref.extract_aligned_pointer_as_index %amxOut : memref<32x32xf32> -> index
    %amxOutAt = arith.index_cast %amxOutAtIndex : index to i64
    %wAtIndex = memref.extract_aligned_pointer_as_index %wb : memref<?xi8> -> index
    %wAt = arith.index_cast %wAtIndex : index to i64
    scf.for %bA = %bBegin to %bEnd step {step} {{
{pairing}      %colA = arith.muli %bA, %c16 : index
      %colB = arith.muli %bB, %c16 : index
      %nextA0 = arith.addi %bA, {step} : index
      %nextB0 = arith.addi %bB, {step} : index
      %nA = arith.minui %nextA0, %cLastBlock : index
      %nB = arith.minui %nextB0, %cLastBlock : index
      scf.for %t = %c0 to %amxRows step %cAmxRows {{
        %pass = arith.divui %t, %cAmxRows : index
        func.call @{name}_amx_tile(%xhAt, %wAt, %amxOutAt, %t, %bA, %bB, %wflat, %nA, %nB, %pass, %amxTiles) : (i64, i64, i64, index, index, index, {flatType}, index, index, index, index) -> ()
        %left = arith.subi %rows, %t : index
        %live = arith.minui %left, %cAmxRows : index
        scf.for %r = %c0 to %live step %c1 {{
          %tr = arith.addi %t, %r : index
          %st = memref.load %scale[%tr] : memref<?xf32>
{epilogue}        }}
      }}
    }}
    {release})mlir",
      fmt::arg("tileRows", kAmxTileRows), fmt::arg("pad", kAmxTileRows - 1),
      fmt::arg("lastBlock", l.blocks - 1), fmt::arg("flatType", l.flatType),
      fmt::arg("round", rounded.opening), fmt::arg("name", kernel.name),
      fmt::arg("step", kernel.swiglu ? "%c1" : "%cTwo"),
      fmt::arg("pairing", blockPairing(kernel, l)), fmt::arg("epilogue", epilogue),
      fmt::arg("release", tileAsm("tilerelease", {})));
}

} // namespace q3::cpu::detail
