//===- MatMulKernel.cpp - the prefill matrix product ----------------------===//
//
// A shared-memory tiled GEMM with register blocking (MatMulTiling). A
// workgroup owns a tileRows x tileColumns block of y (SwiGLU: the gate
// columns and the matching up columns, 2 x tileColumns weight rows). Per
// step of tileK along K its invocations first load the x tile (times the
// prologue gain) and the weight tile (widened to f32) into shared memory,
// then each multiplies its registerRows x registerColumns block from there:
// every x and weight value loaded from memory serves registerColumns or
// registerRows products. An invocation's columns are strided by
// tileColumns / registerColumns, so neighbouring invocations read
// neighbouring shared-memory rows (the tiles are padded by one word against
// bank conflicts). For an RMSNorm input the workgroup's subgroups first sum
// x^2 of its rows into shared memory; the epilogue is the shared one.
//
//===----------------------------------------------------------------------===//
#include "backends/common/KernelMath.h"
#include "backends/vulkan/GpuKernelBuilder.h"
#include "backends/vulkan/Kernels.h"
#include "backends/vulkan/LinearOperands.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinTypes.h"

#include <stdexcept>

using namespace mlir;

namespace q3::vulkan {
namespace {

/// Weight rows a tile holds: with SwiGLU, the up rows after the gate rows.
int64_t tileWeightRows(const LinearKernel &kernel, const MatMulTiling &tiling) {
  return kernel.swiglu ? 2 * tiling.tileColumns : tiling.tileColumns;
}

} // namespace

int64_t matMulSharedBytes(const LinearKernel &kernel, const MatMulTiling &tiling) {
  const int64_t stride = tiling.tileK + 1;
  return 4 * (tiling.tileRows * stride + tileWeightRows(kernel, tiling) * stride +
              tiling.tileRows);
}

OwningOpRef<ModuleOp> buildMatMul(MLIRContext &context, const LinearKernel &kernel,
                                  const MatMulTiling &tiling) {
  const LinearOperands operands(context, kernel);
  const WeightAccess &weight = operands.weight;
  const std::optional<WeightAccess> &gain = operands.gain;
  const LinearBindings &slots = operands.slots;
  const bool vectorX = operands.vectorX;
  Type f32 = FloatType::getF32(&context);
  const int64_t perUnit = weight.elementsPerUnit();
  if (tiling.tileK % perUnit != 0 || tiling.tileK % 4 != 0 ||
      tiling.tileRows % tiling.registerRows != 0 ||
      tiling.tileColumns % tiling.registerColumns != 0)
    throw std::invalid_argument("matmul tiling does not divide its tiles");
  const size_t residualBinding = size_t(slots.residual), outBinding = size_t(slots.y);
  GpuKernelBuilder k(context, kernel.name, operands.bindings, int32_t(tiling.threads()));

  const int64_t TM = tiling.tileRows, TN = tiling.tileColumns, TK = tiling.tileK;
  const int64_t RM = tiling.registerRows, RN = tiling.registerColumns;
  const int64_t stride = TK + 1;
  const int64_t weightRows = tileWeightRows(kernel, tiling);
  const int64_t K = kernel.inFeatures;
  Value xTile = k.sharedArray(f32, TM * stride);
  Value wTile = k.sharedArray(f32, weightRows * stride);
  Value rowScales = k.sharedArray(f32, TM);

  Value tid = k.localId(), threads = k.workgroupSize();
  Value rows = k.rows(), partRows = k.partRows();
  Value columnTiles = k.div(k.add(partRows, k.index(TN - 1)), k.index(TN));
  Value id = k.workgroupId();
  Value tileRow = k.div(id, columnTiles), tileColumn = k.rem(id, columnTiles);
  // The grid may hold more workgroups than tiles (its y fold): those return.
  k.ifThen(k.lt(tileRow, k.div(k.add(rows, k.index(TM - 1)), k.index(TM))), [&] {
    Value row0 = k.mul(tileRow, k.index(TM));
    Value column0 = k.mul(tileColumn, k.index(TN)); // within the part
    Value x = k.tensor(0), w = k.tensor(1);
    Value xOffset = k.tensorOffset(0), wOffset = k.tensorOffset(1);

    // RMSNorm: the rows' Sum x^2, one subgroup per row.
    if (kernel.normEps) {
      k.forLoop(k.subgroupId(), k.index(TM), k.numSubgroups(), [&](Value r) {
        Value t = k.add(row0, r);
        Value inRange = k.lt(t, rows);
        const int64_t xPerRow = vectorX ? K / 4 : K;
        Value base = k.add(xOffset, k.mul(k.min(t, k.sub(rows, k.index(1))), k.index(xPerRow)));
        std::vector<Value> sum = k.forLoop(
            k.laneId(), k.index(xPerRow), k.subgroupSize(), {k.f32(0.0)},
            [&](Value i, const std::vector<Value> &acc) {
              Value v = k.load(x, k.add(base, i));
              if (!vectorX)
                return std::vector<Value>{k.fma(v, v, acc[0])};
              Value s = acc[0];
              for (int64_t e = 0; e < 4; ++e)
                s = k.fma(k.extract(v, e), k.extract(v, e), s);
              return std::vector<Value>{s};
            });
        Value total = k.subgroupSum(sum[0]);
        k.ifThen(k.eq(k.laneId(), k.index(0)), [&] {
          Value scale = kernels::inverseRms(k.b, k.loc, total, K, *kernel.normEps);
          k.store(k.select(inRange, scale, k.f32(0.0)), rowScales, r);
        });
      });
    }

    // This invocation's block: rows ty*RM + i, columns tx + j*(TN/RN).
    Value columnThreads = k.index(TN / RN);
    Value ty = k.div(tid, columnThreads), tx = k.rem(tid, columnThreads);
    const int64_t accumulators = RM * RN * (kernel.swiglu ? 2 : 1);
    std::vector<Value> init(size_t(accumulators), k.f32(0.0));
    std::vector<Value> acc = k.forLoop(
        k.index(0), k.index(K), k.index(TK), init, [&](Value k0, const std::vector<Value> &in) {
          k.barrier(); // the previous step's reads of the tiles are done
          // x tile: TM x TK, zero outside the rows and K; 4 values a load
          // when x is bound as vectors.
          const int64_t xWidth = vectorX ? 4 : 1;
          k.forLoop(tid, k.index(TM * TK / xWidth), threads, [&](Value e) {
            Value r = k.div(e, k.index(TK / xWidth));
            Value kk = k.mul(k.rem(e, k.index(TK / xWidth)), k.index(xWidth));
            Value t = k.add(row0, r), kIndex = k.add(k0, kk);
            Value valid = k.andI(k.lt(t, rows), k.lt(kIndex, k.index(K)));
            // Outside: read row 0's first element (in bounds) and store zeros.
            Value at = k.select(valid, k.add(k.mul(t, k.index(K / xWidth)), k.div(kIndex, k.index(xWidth))),
                                k.index(0));
            Value loaded = k.load(x, k.add(xOffset, at));
            // The gains of these columns (of column 0 outside K; unused).
            std::vector<Value> gains;
            if (gain)
              gains = gain->loadColumns(k, k.tensor(size_t(slots.gain)), k.tensorOffset(size_t(slots.gain)),
                                        k.select(valid, kIndex, k.index(0)), xWidth, xWidth);
            for (int64_t v = 0; v < xWidth; ++v) {
              Value value = vectorX ? k.extract(loaded, v) : loaded;
              if (gain)
                value = k.mul(value, gains[size_t(v)]);
              k.store(k.select(valid, value, k.f32(0.0)), xTile,
                      k.add(k.mul(r, k.index(stride)), k.add(kk, k.index(v))));
            }
          });
          // Weight tile: TN rows x TK (then, with SwiGLU, the matching up
          // rows from the up half's binding), loaded in whole units.
          const int64_t unitsPerTileRow = TK / perUnit;
          auto loadRows = [&](Value memref, Value offset, int64_t firstTileRow) {
            k.forLoop(tid, k.index(TN * unitsPerTileRow), threads, [&](Value e) {
              Value tr = k.div(e, k.index(unitsPerTileRow));
              Value uu = k.rem(e, k.index(unitsPerTileRow));
              Value n = k.add(column0, tr);
              Value kIndex = k.add(k0, k.mul(uu, k.index(perUnit)));
              Value valid = k.andI(k.lt(n, partRows), k.lt(kIndex, k.index(K)));
              // Outside the part or K: read the part's first unit (in
              // bounds) and store zeros.
              Value unit = k.select(valid,
                                    k.add(offset, k.add(weight.unitsBefore(k, n),
                                                        k.div(kIndex, k.index(perUnit)))),
                                    offset);
              std::vector<Value> loaded = weight.loadUnit(k, memref, unit);
              Value base = k.add(k.mul(k.add(tr, k.index(firstTileRow)), k.index(stride)),
                                 k.mul(uu, k.index(perUnit)));
              for (int64_t v = 0; v < perUnit; ++v)
                k.store(k.select(valid, loaded[size_t(v)], k.f32(0.0)), wTile,
                        k.add(base, k.index(v)));
            });
          };
          loadRows(w, wOffset, 0);
          if (kernel.swiglu)
            loadRows(k.tensor(size_t(slots.up)), k.tensorOffset(size_t(slots.up)), TN);
          k.barrier();
          // The block's products over this step's TK.
          return k.forLoop(k.index(0), k.index(TK), k.index(1), in,
                           [&](Value kk, const std::vector<Value> &a) {
                             std::vector<Value> out = a;
                             std::vector<Value> xs, gates, ups;
                             for (int64_t i = 0; i < RM; ++i) {
                               Value r = k.add(k.mul(ty, k.index(RM)), k.index(i));
                               xs.push_back(k.load(xTile, k.add(k.mul(r, k.index(stride)), kk)));
                             }
                             for (int64_t j = 0; j < RN; ++j) {
                               Value c = k.add(tx, k.index(j * (TN / RN)));
                               gates.push_back(
                                   k.load(wTile, k.add(k.mul(c, k.index(stride)), kk)));
                               if (kernel.swiglu)
                                 ups.push_back(k.load(
                                     wTile, k.add(k.mul(k.add(c, k.index(TN)), k.index(stride)),
                                                  kk)));
                             }
                             for (int64_t i = 0; i < RM; ++i)
                               for (int64_t j = 0; j < RN; ++j) {
                                 size_t at = size_t(i * RN + j);
                                 out[at] = k.fma(xs[size_t(i)], gates[size_t(j)], out[at]);
                                 if (kernel.swiglu) {
                                   size_t upAt = size_t(RM * RN) + at;
                                   out[upAt] = k.fma(xs[size_t(i)], ups[size_t(j)], out[upAt]);
                                 }
                               }
                             return out;
                           });
        });

    // Epilogue: norm scale, SwiGLU, residual; rows and columns past the end
    // are not stored.
    kernels::Epilogue epilogue{kernel.normEps.has_value(), kernel.swiglu, kernel.residual};
    for (int64_t i = 0; i < RM; ++i)
      for (int64_t j = 0; j < RN; ++j) {
        Value r = k.add(k.mul(ty, k.index(RM)), k.index(i));
        Value t = k.add(row0, r);
        Value local = k.add(column0, k.add(tx, k.index(j * (TN / RN))));
        k.ifThen(k.andI(k.lt(t, rows), k.lt(local, partRows)), [&] {
          Value n = k.add(k.partFirstRow(), local);
          Value at = k.add(k.mul(t, k.index(kernel.outFeatures)), n);
          Value scale = kernel.normEps ? k.load(rowScales, r) : Value();
          Value residual = kernel.residual ? k.load(k.tensor(residualBinding),
                                                    k.add(k.tensorOffset(residualBinding), at))
                                           : Value();
          size_t index = size_t(i * RN + j);
          Value up = kernel.swiglu ? acc[size_t(RM * RN) + index] : Value();
          Value y = kernels::applyEpilogue(k.b, k.loc, epilogue, acc[index], up, scale, residual);
          k.store(y, k.tensor(outBinding), k.add(k.tensorOffset(outBinding), at));
        });
      }
  });
  return k.finish();
}

} // namespace q3::vulkan
