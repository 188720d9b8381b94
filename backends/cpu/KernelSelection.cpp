//===- KernelSelection.cpp - the CPU kernel of each q3.kernel function ----===//
//
// Reads, never decides: every choice (the weight's layout, the prefill
// instructions and tile, the grid) was made by a target pass and is in the
// IR. This only maps the kernel's compute op, its types and its q3.lowering
// onto the template parameters of backends/cpu/KernelSource.h, and checks
// that the grid the pass recorded is the one the template computes.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/KernelSelection.h"
#include "runtime/KernelABI.h"
#include "ir/BuildGraph.h"
#include "ir/Q3Ops.h"

#include "llvm/ADT/TypeSwitch.h"

#include <stdexcept>

using namespace mlir;
using namespace q3::ir;

namespace q3::cpu {

using backends::dtypeOf;

namespace {

[[noreturn]] void refuse(func::FuncOp kernel, const std::string &what) {
  throw std::runtime_error("kernel @" + kernel.getSymName().str() + ": " + what);
}

int64_t dimOf(Value value, unsigned dim) {
  return value.getType().cast<RankedTensorType>().getDimSize(dim);
}

void expectGrid(func::FuncOp kernel, LoweringConfigAttr lowering, StringRef kind, int64_t count) {
  if (lowering.getGridKind() != kind || lowering.getGridCount() != count)
    refuse(kernel, "q3.lowering grid '" + lowering.getGridKind().str() + " " +
                       std::to_string(lowering.getGridCount()) + "' is not the template's '" +
                       kind.str() + " " + std::to_string(count) + "'");
}

/// The thread scratch planned in the lowering (cpu-plan-thread-scratch) is
/// the one the template takes.
void expectThreadScratch(func::FuncOp kernel, LoweringConfigAttr lowering,
                         const ThreadScratch &scratch) {
  if (lowering.getThreadScratchBytes() != scratch.fixedBytes ||
      lowering.getThreadScratchRowBytes() != scratch.rowBytes)
    refuse(kernel, "q3.lowering thread_scratch '" +
                       LoweringConfigAttr::threadScratchText(lowering.getThreadScratchBytes(),
                                                             lowering.getThreadScratchRowBytes()) +
                       "' is not the template's '" +
                       LoweringConfigAttr::threadScratchText(scratch.fixedBytes, scratch.rowBytes) +
                       "': run the CPU target passes");
}

static_assert(kNoPrefetch == LoweringConfigAttr::kNoPrefetch,
              "the kernels' and the IR's spelling of prefetch_bytes = none");

/// The decode loops' prefetch distance (or LoweringConfigAttr::kNoPrefetch):
/// set by cpu-set-prefetch.
int64_t prefetchBytesOf(func::FuncOp kernel, LoweringConfigAttr lowering) {
  if (lowering.getPrefetchBytes() == 0)
    refuse(kernel, "has no prefetch_bytes in its q3.lowering: run the CPU target passes");
  return lowering.getPrefetchBytes();
}

/// The runs the decode loops read side by side: set by cpu-set-decode-streams.
int64_t decodeStreamsOf(func::FuncOp kernel, LoweringConfigAttr lowering) {
  if (lowering.getDecodeStreams() <= 0)
    refuse(kernel, "has no decode_streams in its q3.lowering: run the CPU target passes");
  return lowering.getDecodeStreams();
}

/// The accumulators per weight row (product) or head (attention) of the
/// decode loops: set by cpu-set-decode-accumulators.
int64_t decodeAccumulatorsOf(func::FuncOp kernel, LoweringConfigAttr lowering) {
  if (lowering.getDecodeAccumulators() <= 0)
    refuse(kernel, "has no decode_accumulators in its q3.lowering: run the CPU target passes");
  return lowering.getDecodeAccumulators();
}

/// A product's decode_accumulators: 1, 2 or 4.
int64_t productDecodeAccumulatorsOf(func::FuncOp kernel, LoweringConfigAttr lowering) {
  const int64_t count = decodeAccumulatorsOf(kernel, lowering);
  if (!llvm::is_contained(LoweringConfigAttr::kDecodeAccumulatorCounts, count))
    refuse(kernel,
           "a product's decode_accumulators must be 1, 2 or 4, not " + std::to_string(count));
  return count;
}

/// Attention's decode_accumulators: value columns per head, 1 to head_dim / 16.
int64_t attentionDecodeAccumulatorsOf(func::FuncOp kernel, LoweringConfigAttr lowering,
                                      const AttentionKernel &cpu) {
  const int64_t count = decodeAccumulatorsOf(kernel, lowering);
  const int64_t columns = cpu.valueColumns();
  if (count > columns)
    refuse(kernel, "attention's decode_accumulators count 16-lane value columns per head: "
                   "at most " +
                       std::to_string(columns) + " for head_dim " + std::to_string(cpu.headDim) +
                       ", not " + std::to_string(count));
  return count;
}

std::optional<PrefillMatmul> matmulOf(StringRef name) {
  if (name.empty() || name == "f32")
    return PrefillMatmul::F32;
  if (name == "avx512bf16")
    return PrefillMatmul::Avx512Bf16;
  if (name == "amx")
    return PrefillMatmul::Amx;
  return std::nullopt;
}

/// The tile's third entry: the most prefill rows `cpu` reads in place.
void setInPlacePrefillRows(func::FuncOp kernel, int64_t rows, FusedLinearKernel &cpu) {
  if (rows < 1 || rows > FusedLinearKernel::kMaxInPlacePrefillRows)
    refuse(kernel, "reads " + std::to_string(rows) + " prefill rows in place; at most " +
                       std::to_string(FusedLinearKernel::kMaxInPlacePrefillRows));
  if (rows > 1 && !cpu.inPlacePrefillFits())
    refuse(kernel, "reads prefill rows in place, which only a bf16 weight packed per call with "
                   "matmul avx512bf16 and K/2 a multiple of 16 does");
  cpu.inPlacePrefillRows = rows;
}

FusedLinearKernel productKernel(func::FuncOp kernel, const std::string &name,
                                LoweringConfigAttr lowering, Value weight, Value gain,
                                Value residual, std::optional<double> eps, bool swiglu,
                                Value result) {
  FusedLinearKernel cpu;
  cpu.name = name;
  cpu.inFeatures = dimOf(weight, 1);
  cpu.outFeatures = dimOf(result, 1);
  cpu.weight = dtypeOf(weight.getType());
  if (gain)
    cpu.prologueGain = dtypeOf(gain.getType());
  cpu.normEps = eps;
  cpu.swiglu = swiglu;
  cpu.residual = bool(residual);
  cpu.columnBlocks = hasColumnBlocks(weight.getType());
  cpu.panelsPerCall = lowering.packsPerCall();
  if (auto concat = weight.getDefiningOp<ConcatRowsOp>()) {
    // cpu-sink-weight-concat: the kernel reads the parts where they are bound.
    if (cpu.columnBlocks)
      refuse(kernel, "concatenates its weight inside the kernel, which the CPU kernels do only "
                     "for weights they read row by row (not packed at load)");
    for (Value part : concat.getInputs()) {
      cpu.weightParts.push_back(dimOf(part, 0));
      if (cpu.weightParts.back() % 16 != 0)
        refuse(kernel, "a part of its concatenated weight has " +
                           std::to_string(cpu.weightParts.back()) +
                           " rows; the CPU kernels need a multiple of 16");
    }
  }
  if (cpu.columnBlocks != (lowering.getWeightPacking() == "at_load"))
    refuse(kernel, "its q3.lowering weight_packing '" + lowering.getWeightPacking().str() +
                       "' does not match its weight type (packed at load means a "
                       "#q3.column_blocks weight, and only then)");
  if (cpu.tiledPrefill() && !cpu.columnBlocksFit())
    refuse(kernel, "its weight is packed in column blocks, which the CPU kernels do only for "
                   "bf16 and f16 [16n, 2m] weights");
  std::optional<PrefillMatmul> matmul = matmulOf(lowering.getMatmul());
  if (!matmul)
    refuse(kernel, "unknown matmul '" + lowering.getMatmul().str() + "'");
  if (*matmul != PrefillMatmul::F32 && !cpu.tiledPrefill())
    refuse(kernel, "matmul " + lowering.getMatmul().str() + " needs a weight_packing");
  if (*matmul != PrefillMatmul::F32 && cpu.weight != DType::BF16)
    refuse(kernel, "matmul " + lowering.getMatmul().str() + " multiplies bf16 weights, not " +
                       runtime::mlirName(cpu.weight));
  if (*matmul == PrefillMatmul::Amx && !cpu.amxFits())
    refuse(kernel, "matmul amx needs a weight packed at load with K % 32 == 0");
  cpu.prefillMatmul = *matmul;
  if (cpu.tiledPrefill()) {
    ArrayRef<int64_t> tile = lowering.getTile();
    if ((tile.size() != 2 && tile.size() != 3) || tile[1] != 2)
      refuse(kernel, "a column-block product needs a tile [rows, 2] or [rows, 2, rows read in "
                     "place] in its q3.lowering");
    cpu.prefillTileRows = tile[0];
    if (tile.size() == 3)
      setInPlacePrefillRows(kernel, tile[2], cpu);
  }
  return cpu;
}

/// The product's source: `cpu` with its decode loops' prefetch and streams,
/// once the grid and the thread scratch in its q3.lowering are the ones the
/// template takes (cpu-assign-grids, cpu-plan-thread-scratch).
std::string productSource(func::FuncOp kernel, LoweringConfigAttr lowering, FusedLinearKernel cpu) {
  cpu.prefetchBytes = prefetchBytesOf(kernel, lowering);
  cpu.decodeStreams = decodeStreamsOf(kernel, lowering);
  if (!cpu.columnBlocks)
    cpu.decodeAccumulators = productDecodeAccumulatorsOf(kernel, lowering);
  expectGrid(kernel, lowering, "fixed", cpu.workgroups());
  expectThreadScratch(kernel, lowering, cpu.threadScratch());
  return fusedLinearSource(cpu);
}

/// The product kernel of `compute` (q3.fused_linear or q3.linear): its
/// shapes, weight layout and prefill (what its thread scratch follows from),
/// else nullopt.
std::optional<FusedLinearKernel> productOf(func::FuncOp kernel, Operation *compute,
                                           LoweringConfigAttr lowering, const std::string &name) {
  if (auto op = dyn_cast<FusedLinearOp>(compute)) {
    std::optional<double> eps;
    if (auto attr = op.getRmsNormEps())
      eps = attr->convertToDouble();
    return productKernel(kernel, name, lowering, op.getWeight(), op.getGain(), op.getResidual(),
                         eps, op.getSwiglu(), op.getResult());
  }
  if (auto op = dyn_cast<LinearOp>(compute)) {
    if (op.getBias())
      refuse(kernel, "the CPU kernels have no product with a bias");
    return productKernel(kernel, name, lowering, op.getWeight(), Value(), Value(), std::nullopt,
                         false, op.getResult());
  }
  return std::nullopt;
}

/// Attention's prefill instructions: f32 FMAs, or with `matmul = avx512bf16`
/// the bf16 flash kernel (what its thread scratch follows from).
void setPrefillMatmul(func::FuncOp kernel, LoweringConfigAttr lowering, AttentionKernel &cpu) {
  const StringRef matmul = lowering.getMatmul();
  if (matmul == "avx512bf16") {
    if (!cpu.bf16Flashable())
      refuse(kernel, "attention's matmul avx512bf16 needs a head_dim that is a multiple "
                     "of 32, not " +
                         std::to_string(cpu.headDim));
    cpu.bf16Prefill = true;
  } else if (!matmul.empty() && matmul != "f32") {
    refuse(kernel, "attention's matmul must be f32 or avx512bf16, not '" + matmul.str() + "'");
  }
}

/// Attention's prefill row sets and decode splits: the third and fourth
/// entries of its q3.lowering tile, checked against the template's limits.
void setRowSetsAndSplits(func::FuncOp kernel, LoweringConfigAttr lowering, AttentionKernel &cpu) {
  ArrayRef<int64_t> tile = lowering.getTile();
  if (tile.size() < 3 || tile.size() > 4 || tile[0] != cpu.headsPerWorkgroup() ||
      tile[1] != cpu.prefillBlockRows() || tile[2] < 1 ||
      tile[2] > AttentionKernel::kMaxPrefillRowSets ||
      (tile.size() == 4 && (tile[3] < 1 || tile[3] > AttentionKernel::kMaxDecodeSplits)))
    refuse(kernel,
           "attention's q3.lowering tile must be [" + std::to_string(cpu.headsPerWorkgroup()) +
               ", " + std::to_string(cpu.prefillBlockRows()) +
               ", sets, splits] (query heads per workgroup, rows per prefill "
               "block, blocks per workgroup: 1 to " +
               std::to_string(AttentionKernel::kMaxPrefillRowSets) + ", decode splits: 1 to " +
               std::to_string(AttentionKernel::kMaxDecodeSplits) + ", 1 when left out)");
  if (tile[2] != 1 && !cpu.bf16Prefill)
    refuse(kernel, "attention's f32 prefill runs one block of rows per workgroup, not " +
                       std::to_string(tile[2]) + " (only matmul = avx512bf16 shares " +
                       "its key blocks between sets)");
  cpu.prefillRowSets = tile[2];
  cpu.decodeSplits = tile.size() == 4 ? tile[3] : 1;
  if (cpu.decodeSplits > 1 && !cpu.vectorized())
    refuse(kernel, "attention's decode splits need a head_dim that is a multiple of 16, "
                   "not " +
                       std::to_string(cpu.headDim));
}

/// The attention kernel of `op` as `lowering` builds it: its shape, cache
/// type, decode loops, prefill instructions, row sets, decode splits and
/// workspace, the grid checked against the template's.
AttentionKernel attentionKernelOf(ModuleOp module, func::FuncOp kernel, AttentionOp op,
                                  LoweringConfigAttr lowering, const std::string &name) {
  auto forward = module.lookupSymbol<func::FuncOp>(kEntryPoint);
  AttentionKernel cpu = attentionKernelShape(op);
  cpu.name = name;
  cpu.cache = dtypeOf(forward.getArgument(2).getType().cast<KVCacheType>().getElement());
  if (cpu.vectorized()) {
    cpu.prefetchBytes = prefetchBytesOf(kernel, lowering);
    cpu.decodeStreams = decodeStreamsOf(kernel, lowering);
    cpu.decodeAccumulators = attentionDecodeAccumulatorsOf(kernel, lowering, cpu);
  }
  setPrefillMatmul(kernel, lowering, cpu);
  setRowSetsAndSplits(kernel, lowering, cpu);
  if (lowering.getWorkspaceBytes() != cpu.workspaceBytes())
    refuse(kernel,
           "attention with " + std::to_string(cpu.decodeSplits) +
               " decode splits needs workspace_bytes = " + std::to_string(cpu.workspaceBytes()) +
               ", not " + std::to_string(lowering.getWorkspaceBytes()));
  expectGrid(kernel, lowering, "per_row", cpu.workgroupsPerRow());
  return cpu;
}

std::string sourceFor(ModuleOp module, func::FuncOp kernel, LoweringConfigAttr lowering,
                      const std::string &name) {
  Operation *compute = kernelComputeOp(kernel);
  if (!compute)
    refuse(kernel, "computes nothing");
  if (!lowering.hasGrid())
    refuse(kernel, "has no grid in its q3.lowering: run the CPU target passes");
  if (lowering.getWorkspaceBytes() != 0 && !isa<AttentionOp>(compute))
    refuse(kernel, "has workspace_bytes in its q3.lowering, which only attention's decode "
                   "splits use");
  if (std::optional<FusedLinearKernel> product = productOf(kernel, compute, lowering, name))
    return productSource(kernel, lowering, *product);
  if (!isa<AttentionOp>(compute) &&
      (lowering.getThreadScratchBytes() != 0 || lowering.getThreadScratchRowBytes() != 0))
    refuse(kernel, "has thread_scratch in its q3.lowering, which only the products and "
                   "attention take");
  return llvm::TypeSwitch<Operation *, std::string>(compute)
      .Case<EmbeddingOp>([&](EmbeddingOp op) {
        expectGrid(kernel, lowering, "per_row", 1);
        return embeddingSource({name, dimOf(op.getTable(), 0), dimOf(op.getTable(), 1),
                                dtypeOf(op.getTable().getType())});
      })
      .Case<QKNormRopeCacheOp>([&](QKNormRopeCacheOp op) {
        auto cache = op.getCache().getType().cast<KVCacheType>();
        QKNormRopeCacheKernel cpu{name,
                                  dimOf(op.getQuery(), 1),
                                  cache.getKvHeads(),
                                  cache.getHeadDim(),
                                  dtypeOf(op.getQGain().getType()),
                                  op.getEps().convertToDouble(),
                                  op.getTheta().convertToDouble(),
                                  dtypeOf(cache.getElement())};
        expectGrid(kernel, lowering, "per_row", cpu.queryHeads);
        return qkNormRopeCacheSource(cpu);
      })
      .Case<AttentionOp>([&](AttentionOp op) {
        const AttentionKernel cpu = attentionKernelOf(module, kernel, op, lowering, name);
        expectThreadScratch(kernel, lowering, cpu.threadScratch());
        return attentionSource(cpu);
      })
      .Default([&](Operation *op) -> std::string {
        refuse(kernel, "no CPU kernel for '" + op->getName().getStringRef().str() +
                           "'; the CPU backend needs the default fusion pipeline");
      });
}

} // namespace

AttentionKernel attentionKernelShape(AttentionOp attention) {
  AttentionKernel shape;
  shape.queryHeads = dimOf(attention.getQuery(), 1);
  shape.kvHeads = dimOf(attention.getKeys(), 1);
  shape.headDim = dimOf(attention.getQuery(), 2);
  for (int64_t h = 0; h < shape.queryHeads; ++h)
    shape.kvHeadMap.push_back(attention.kvHeadFor(h));
  shape.scale = attention.getScale().convertToDouble();
  return shape;
}

bool cpuProductCanReadPrefillInPlace(func::FuncOp kernel, LoweringConfigAttr lowering) {
  Operation *compute = kernelComputeOp(kernel);
  if (!compute || isa<AttentionOp>(compute))
    return false;
  std::optional<FusedLinearKernel> product =
      productOf(kernel, compute, lowering, kernel.getSymName().str());
  return product && product->inPlacePrefillFits();
}

ThreadScratch cpuKernelThreadScratch(func::FuncOp kernel, LoweringConfigAttr lowering) {
  Operation *compute = kernelComputeOp(kernel);
  if (!compute)
    return {};
  if (auto attention = dyn_cast<AttentionOp>(compute)) {
    AttentionKernel shape = attentionKernelShape(attention);
    setPrefillMatmul(kernel, lowering, shape);
    return shape.threadScratch();
  }
  std::optional<FusedLinearKernel> product =
      productOf(kernel, compute, lowering, kernel.getSymName().str());
  return product ? product->threadScratch() : ThreadScratch{};
}

std::string cpuKernelSource(ModuleOp module, func::FuncOp kernel) {
  return sourceFor(module, kernel, loweringOf(kernel), kernel.getSymName().str());
}

std::string cpuKernelVariantSource(ModuleOp module, func::FuncOp kernel,
                                   LoweringConfigAttr variant) {
  return sourceFor(
      module, kernel, variant,
      runtime::variantKernelName(kernel.getSymName().str(), variantName(kernel, variant)));
}

} // namespace q3::cpu
