//===- MatVecKernel.cpp - the decode matrix-vector product ----------------===//
//
// Decode is bandwidth-bound: every weight byte is read once per token, so
// the kernel is built around the weight stream. Subgroup s of workgroup w
// computes output column n = w * subgroups + s of the part it runs on; its
// lanes read the row in 16-byte units, lane l taking units l, l + S, ...
// (S the subgroup size), so a subgroup's loads are contiguous and coalesce.
// Each lane widens its unit (bf16: shift and mask of 32-bit words), scales
// the matching x by the prologue gain, and accumulates the dot product, and
// for an RMSNorm input also Sum x^2 (every subgroup reads all of x anyway).
// Two subgroup sums finish the row; lane 0 applies the shared epilogue
// (norm scale, SwiGLU with the up row n + N, residual) and stores.
//
//===----------------------------------------------------------------------===//
#include "backends/common/KernelMath.h"
#include "backends/vulkan/GpuKernelBuilder.h"
#include "backends/vulkan/Kernels.h"
#include "backends/vulkan/WeightAccess.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

namespace q3::vulkan {

OwningOpRef<ModuleOp> buildMatVec(MLIRContext &context, const LinearKernel &kernel) {
  WeightAccess weight(context, kernel.weight, kernel.inFeatures);
  Type f32 = FloatType::getF32(&context);
  std::vector<TensorBinding> bindings = {{"x", f32}, {"weight", weight.element()}};
  std::optional<WeightAccess> gain;
  if (kernel.gain) {
    gain.emplace(context, *kernel.gain, kernel.inFeatures, /*maxElementsPerUnit=*/2);
    bindings.push_back({"gain", gain->element()});
  }
  const size_t residualBinding = bindings.size();
  if (kernel.residual)
    bindings.push_back({"residual", f32});
  const size_t outBinding = bindings.size();
  bindings.push_back({"y", f32});
  GpuKernelBuilder k(context, kernel.name, bindings, /*defaultWorkgroupSize=*/128);

  const int64_t perUnit = weight.elementsPerUnit();
  Value column = k.add(k.mul(k.workgroupId(), k.numSubgroups()), k.subgroupId());
  k.ifThen(k.lt(column, k.partRows()), [&] {
    Value lane = k.laneId();
    Value x = k.tensor(0), w = k.tensor(1);
    Value xBase = k.tensorOffset(0); // row 0: a decode dispatch has one row
    Value gateRow = k.add(k.tensorOffset(1), weight.unitsBefore(k, column));
    Value upRow = kernel.swiglu
                      ? k.add(k.tensorOffset(1),
                              weight.unitsBefore(k, k.add(column, k.index(kernel.outFeatures))))
                      : Value();
    Value zero = k.f32(0.0);
    std::vector<Value> init = {zero, zero, zero};
    std::vector<Value> sums = k.forLoop(
        lane, k.index(weight.unitsPerRow()), k.subgroupSize(), init,
        [&](Value unit, const std::vector<Value> &acc) {
          Value gate = acc[0], up = acc[1], squares = acc[2];
          std::vector<Value> gates = weight.loadUnit(k, w, k.add(gateRow, unit));
          std::vector<Value> ups;
          if (kernel.swiglu)
            ups = weight.loadUnit(k, w, k.add(upRow, unit));
          Value first = k.mul(unit, k.index(perUnit));
          for (int64_t e = 0; e < perUnit; ++e) {
            Value kIndex = k.add(first, k.index(e));
            Value xv = k.load(x, k.add(xBase, kIndex));
            if (kernel.normEps)
              squares = k.fma(xv, xv, squares);
            if (gain)
              xv = k.mul(xv, gain->loadElement(k, k.tensor(2), k.tensorOffset(2), kIndex));
            gate = k.fma(gates[size_t(e)], xv, gate);
            if (kernel.swiglu)
              up = k.fma(ups[size_t(e)], xv, up);
          }
          return std::vector<Value>{gate, up, squares};
        });
    Value gate = k.subgroupSum(sums[0]);
    Value up = kernel.swiglu ? k.subgroupSum(sums[1]) : Value();
    Value scale = kernel.normEps ? kernels::inverseRms(k.b, k.loc, k.subgroupSum(sums[2]),
                                                       kernel.inFeatures, *kernel.normEps)
                                 : Value();
    k.ifThen(k.eq(lane, k.index(0)), [&] {
      Value n = k.add(k.partFirstRow(), column);
      Value residual = kernel.residual
                           ? k.load(k.tensor(residualBinding), k.add(k.tensorOffset(residualBinding), n))
                           : Value();
      kernels::Epilogue epilogue{kernel.normEps.has_value(), kernel.swiglu, kernel.residual};
      Value y = kernels::applyEpilogue(k.b, k.loc, epilogue, gate, up, scale, residual);
      k.store(y, k.tensor(outBinding), k.add(k.tensorOffset(outBinding), n));
    });
  });
  return k.finish();
}

} // namespace q3::vulkan
