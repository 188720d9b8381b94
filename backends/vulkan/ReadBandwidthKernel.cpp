//===- ReadBandwidthKernel.cpp - the device's read bandwidth --------------===//
//
// q3run bench compares decode's weight stream with what the device can
// read: invocation g of G reads 16-byte vectors g, g + G, g + 2G, ... (so
// each step of all invocations reads one contiguous block) and XORs them.
// The XOR is stored only when it equals a value no data has, which the
// compiler cannot know, so the reads stay.
//
//===----------------------------------------------------------------------===//
#include "backends/vulkan/GpuKernelBuilder.h"
#include "backends/vulkan/Kernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

namespace q3::vulkan {

OwningOpRef<ModuleOp> buildReadBandwidth(MLIRContext &context, const std::string &name,
                                         int64_t vectorsPerInvocation) {
  Type i32 = IntegerType::get(&context, 32);
  Type vector = VectorType::get({4}, i32);
  GpuKernelBuilder k(context, name, {{"data", vector}, {"sink", i32}},
                     /*defaultWorkgroupSize=*/256, /*extraPushWords=*/1);
  Value vectors = k.extraPushWord(0); // in the buffer; every invocation reads its share
  Value invocations = k.mul(k.b.create<gpu::GridDimOp>(k.loc, gpu::Dimension::x),
                            k.workgroupSize());
  Value total = k.mul(invocations, k.b.create<gpu::GridDimOp>(k.loc, gpu::Dimension::y));
  Value global = k.add(k.mul(k.workgroupId(), k.workgroupSize()), k.localId());
  Value zero = k.b.create<arith::ConstantOp>(
      k.loc, vector, DenseElementsAttr::get(vector.cast<VectorType>(), k.b.getI32IntegerAttr(0)));
  std::vector<Value> folded = k.forLoop(
      k.index(0), k.index(vectorsPerInvocation), k.index(1), {zero},
      [&](Value step, const std::vector<Value> &acc) {
        Value at = k.add(global, k.mul(step, total));
        Value safe = k.select(k.lt(at, vectors), at, k.index(0));
        Value data = k.load(k.tensor(0), k.add(k.tensorOffset(0), safe));
        return std::vector<Value>{k.b.create<arith::XOrIOp>(k.loc, acc[0], data)};
      });
  Value word = k.b.create<arith::XOrIOp>(
      k.loc, k.b.create<arith::XOrIOp>(k.loc, k.extract(folded[0], 0), k.extract(folded[0], 1)),
      k.b.create<arith::XOrIOp>(k.loc, k.extract(folded[0], 2), k.extract(folded[0], 3)));
  k.ifThen(k.eq(word, k.i32(0x51C0FFEE)), [&] {
    k.store(word, k.tensor(1), k.tensorOffset(1));
  });
  return k.finish();
}

} // namespace q3::vulkan
