//===- MatVecKernel.cpp - the decode (and short-prompt) matrix product ----===//
//
// Decode is bandwidth-bound: every weight byte is read once per token, so
// the kernel is built around the weight stream. Subgroup s of workgroup w
// computes output column n = w * subgroups + s of the part it runs on, for
// each of the dispatch's rows (at most `rows`, a compile-time bound: 1 for
// decode, a few for short prompts, so each weight unit loaded serves every
// row). Its lanes read the weight row in 16-byte units, lane l taking units
// l, l + S, ... (S the subgroup size), so a subgroup's loads are contiguous
// and coalesce (SwiGLU: the up half's row n from its own binding too).
// Each lane widens its unit (bf16: shift and mask of 32-bit
// words), reads the matching x values (16 bytes at a time where K allows),
// scales them by the prologue gain, and accumulates the dot products, and
// for an RMSNorm input also Sum x^2 (every subgroup reads all of x anyway).
// Subgroup sums finish each row; lane 0 applies the shared epilogue (norm
// scale, SwiGLU with the up row n + N, residual) and stores.
//
// A product with few columns leaves most of a GPU idle at one subgroup per
// column (the H200 streamed o and down, 1024 columns, at 450-550 GB/s and
// the 152k-column lm_head at 2750). With C = `columnSubgroups` > 1, C
// subgroups of a workgroup share a column: subgroup s takes part s % C of
// the units (lane l of part p: units p * S + l, then every C * S), and
// after a barrier the column's first subgroup adds the others' sums from
// shared memory.
//
//===----------------------------------------------------------------------===//
#include "backends/common/KernelMath.h"
#include "backends/vulkan/GpuKernelBuilder.h"
#include "backends/vulkan/Kernels.h"
#include "backends/vulkan/LinearOperands.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

namespace q3::vulkan {

namespace {
/// Sums a lane carries per row: the gate dot, the up dot (SwiGLU), Sum x^2 (norm).
constexpr int64_t kSumsPerRow = 3;
} // namespace

int64_t matVecSharedBytes(int64_t maxRows, int64_t columnSubgroups, int64_t subgroups) {
  return columnSubgroups > 1 ? 4 * subgroups * maxRows * kSumsPerRow : 0;
}

OwningOpRef<ModuleOp> buildMatVec(MLIRContext &context, const LinearKernel &kernel, int64_t maxRows,
                                  int64_t columnSubgroups, int64_t subgroups) {
  const LinearOperands operands(context, kernel);
  const WeightAccess &weight = operands.weight;
  const std::optional<WeightAccess> &gain = operands.gain;
  const LinearBindings &slots = operands.slots;
  const bool vectorX = operands.vectorX;
  const int64_t perUnit = weight.elementsPerUnit();
  const size_t residualBinding = size_t(slots.residual), outBinding = size_t(slots.y);
  GpuKernelBuilder k(context, kernel.name, operands.bindings, /*defaultWorkgroupSize=*/128);

  const int64_t K = kernel.inFeatures;
  const int64_t xPerRow = vectorX ? K / 4 : K; // x elements (as bound) per row
  const int64_t C = columnSubgroups;
  // Subgroup s of workgroup w: part s % C of column w * (subgroups / C) + s / C.
  Value sg = k.subgroupId();
  Value column =
      k.add(k.mul(k.workgroupId(), k.div(k.numSubgroups(), k.index(C))), k.div(sg, k.index(C)));
  Value part = k.rem(sg, k.index(C));
  Value lane = k.laneId();
  Value rows = k.rows();
  const size_t perRow = kSumsPerRow;

  // This lane's sums over its units of `col`'s row: units part * S + lane,
  // then every C * S (S the subgroup size).
  auto laneSums = [&](Value col) {
    Value x = k.tensor(0), w = k.tensor(1);
    // Row r's x (rows past the dispatch's reread its last row; unused).
    std::vector<Value> xRow;
    for (int64_t r = 0; r < maxRows; ++r)
      xRow.push_back(k.add(k.tensorOffset(0),
                           k.mul(k.min(k.index(r), k.sub(rows, k.index(1))), k.index(xPerRow))));
    Value gateRow = k.add(k.tensorOffset(1), weight.unitsBefore(k, col));
    Value upRow = kernel.swiglu
                      ? k.add(k.tensorOffset(size_t(slots.up)), weight.unitsBefore(k, col))
                      : Value();
    std::vector<Value> init(size_t(maxRows) * perRow, k.f32(0.0));
    return k.forLoop(
        k.add(k.mul(part, k.subgroupSize()), lane), k.index(weight.unitsPerRow()),
        k.mul(k.subgroupSize(), k.index(C)), init, [&](Value unit, const std::vector<Value> &acc) {
          std::vector<Value> next = acc;
          std::vector<Value> gates = weight.loadUnit(k, w, k.add(gateRow, unit));
          std::vector<Value> ups;
          if (kernel.swiglu)
            ups = weight.loadUnit(k, k.tensor(size_t(slots.up)), k.add(upRow, unit));
          Value first = k.mul(unit, k.index(perUnit)); // the unit's first column
          std::vector<Value> gains;
          if (gain)
            gains = gain->loadColumns(k, k.tensor(size_t(slots.gain)),
                                      k.tensorOffset(size_t(slots.gain)), first, perUnit, perUnit);
          for (int64_t r = 0; r < maxRows; ++r) {
            std::vector<Value> xs;
            if (vectorX) {
              Value firstVector = k.mul(unit, k.index(perUnit / 4));
              for (int64_t v = 0; v < perUnit / 4; ++v) {
                Value vec = k.load(x, k.add(xRow[size_t(r)], k.add(firstVector, k.index(v))));
                for (int64_t e = 0; e < 4; ++e)
                  xs.push_back(k.extract(vec, e));
              }
            } else {
              for (int64_t e = 0; e < perUnit; ++e)
                xs.push_back(k.load(x, k.add(xRow[size_t(r)], k.add(first, k.index(e)))));
            }
            Value &gate = next[size_t(r) * perRow], &up = next[size_t(r) * perRow + 1],
                  &squares = next[size_t(r) * perRow + 2];
            for (int64_t e = 0; e < perUnit; ++e) {
              Value xv = xs[size_t(e)];
              if (kernel.normEps)
                squares = k.fma(xv, xv, squares);
              if (gain)
                xv = k.mul(xv, gains[size_t(e)]);
              gate = k.fma(gates[size_t(e)], xv, gate);
              if (kernel.swiglu)
                up = k.fma(ups[size_t(e)], xv, up);
            }
          }
          return next;
        });
  };
  // The subgroup's sums of the sums that are used (the others stay 0).
  auto subgroupSums = [&](std::vector<Value> sums) {
    for (int64_t r = 0; r < maxRows; ++r) {
      sums[size_t(r) * perRow] = k.subgroupSum(sums[size_t(r) * perRow]);
      if (kernel.swiglu)
        sums[size_t(r) * perRow + 1] = k.subgroupSum(sums[size_t(r) * perRow + 1]);
      if (kernel.normEps)
        sums[size_t(r) * perRow + 2] = k.subgroupSum(sums[size_t(r) * perRow + 2]);
    }
    return sums;
  };
  // Lane 0 applies the shared epilogue to the column's totals and stores.
  auto store = [&](const std::vector<Value> &totals) {
    kernels::Epilogue epilogue{kernel.normEps.has_value(), kernel.swiglu, kernel.residual};
    Value n = k.add(k.partFirstRow(), column);
    for (int64_t r = 0; r < maxRows; ++r) {
      Value gate = totals[size_t(r) * perRow];
      Value up = kernel.swiglu ? totals[size_t(r) * perRow + 1] : Value();
      Value scale = kernel.normEps ? kernels::inverseRms(k.b, k.loc, totals[size_t(r) * perRow + 2],
                                                         K, *kernel.normEps)
                                   : Value();
      k.ifThen(k.andI(k.eq(lane, k.index(0)), k.lt(k.index(r), rows)), [&] {
        Value at = k.add(k.mul(k.index(r), k.index(kernel.outFeatures)), n);
        Value residual = kernel.residual ? k.load(k.tensor(residualBinding),
                                                  k.add(k.tensorOffset(residualBinding), at))
                                         : Value();
        Value y = kernels::applyEpilogue(k.b, k.loc, epilogue, gate, up, scale, residual);
        k.store(y, k.tensor(outBinding), k.add(k.tensorOffset(outBinding), at));
      });
    }
  };

  Value valid = k.lt(column, k.partRows());
  if (C == 1) {
    k.ifThen(valid, [&] { store(subgroupSums(laneSums(column))); });
    return k.finish();
  }
  // C subgroups per column: every subgroup reaches the barrier (a column
  // past the part reads the last one's row), the column's first adds the
  // C subgroups' sums from shared memory.
  Value lastColumn = k.sub(k.partRows(), k.index(1));
  std::vector<Value> sums = subgroupSums(laneSums(k.min(column, lastColumn)));
  Value shared = k.sharedArray(FloatType::getF32(&context), subgroups * maxRows * int64_t(perRow));
  auto slot = [&](Value subgroup, size_t i) {
    return k.add(k.mul(subgroup, k.index(maxRows * int64_t(perRow))), k.index(int64_t(i)));
  };
  k.ifThen(k.eq(lane, k.index(0)), [&] {
    for (size_t i = 0; i < sums.size(); ++i)
      k.store(sums[i], shared, slot(sg, i));
  });
  k.barrier();
  k.ifThen(k.andI(valid, k.eq(part, k.index(0))), [&] {
    std::vector<Value> totals = sums;
    for (int64_t c = 1; c < C; ++c)
      for (size_t i = 0; i < totals.size(); ++i)
        totals[i] = k.add(totals[i], k.load(shared, slot(k.add(sg, k.index(c)), i)));
    store(totals);
  });
  return k.finish();
}

} // namespace q3::vulkan
