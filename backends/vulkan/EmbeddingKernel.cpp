//===- EmbeddingKernel.cpp - q3.embedding on Vulkan -----------------------===//
//
// Workgroup t copies the table row of token t into row t of the result,
// widened to f32; its invocations stride over the row. A bf16 table is read
// as 32-bit words of two values (widened by a shift and a mask), so no
// 16-bit storage is needed.
//
//===----------------------------------------------------------------------===//
#include "backends/common/KernelMath.h"
#include "backends/vulkan/GpuKernelBuilder.h"
#include "backends/vulkan/Kernels.h"
#include "backends/vulkan/WeightAccess.h"

using namespace mlir;

namespace q3::vulkan {

OwningOpRef<ModuleOp> buildEmbedding(MLIRContext &context, const EmbeddingKernel &kernel) {
  WeightAccess table(context, kernel.table, kernel.hidden);
  GpuKernelBuilder k(context, kernel.name,
                     {{"table", table.element()},
                      {"tokens", IntegerType::get(&context, 32)},
                      {"result", FloatType::getF32(&context)}},
                     /*defaultWorkgroupSize=*/64);
  Value t = k.workgroupId();
  k.ifThen(k.lt(t, k.rows()), [&] {
    Value token = k.toIndex(k.load(k.tensor(1), k.add(k.tensorOffset(1), t)));
    // A table in parts: this dispatch holds rows [partFirstRow, + partRows).
    Value first = k.partFirstRow();
    Value inPart = k.andI(k.ge(token, first), k.lt(token, k.add(first, k.partRows())));
    k.ifThen(inPart, [&] {
      Value row = k.sub(token, first);
      Value out = k.add(k.tensorOffset(2), k.mul(t, k.index(kernel.hidden)));
      Value tableBase = k.add(k.tensorOffset(0), table.unitsBefore(k, row));
      k.forLoop(k.localId(), k.index(table.unitsPerRow()), k.workgroupSize(), [&](Value unit) {
        std::vector<Value> values = table.loadUnit(k, k.tensor(0), k.add(tableBase, unit));
        Value column = k.mul(unit, k.index(table.elementsPerUnit()));
        for (size_t i = 0; i < values.size(); ++i)
          k.store(values[i], k.tensor(2), k.add(out, k.add(column, k.index(int64_t(i)))));
      });
    });
  });
  return k.finish();
}

} // namespace q3::vulkan
