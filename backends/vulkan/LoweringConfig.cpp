#include "backends/vulkan/LoweringConfig.h"

#include "ir/Q3Ops.h"

#include "mlir/IR/Builders.h"

using namespace mlir;

namespace q3::vulkan {

void setLoweringConfig(func::FuncOp kernel, llvm::StringRef name, Attribute value) {
  Builder b(kernel.getContext());
  NamedAttrList entries;
  if (auto config = kernel->getAttrOfType<DictionaryAttr>(kLoweringConfigAttr))
    entries.append(config.getValue());
  else
    entries.set("target", b.getStringAttr("vulkan"));
  entries.set(name, value);
  kernel->setAttr(kLoweringConfigAttr, entries.getDictionary(kernel.getContext()));
}

Attribute loweringConfig(func::FuncOp kernel, llvm::StringRef name) {
  auto config = kernel->getAttrOfType<DictionaryAttr>(kLoweringConfigAttr);
  return config ? config.get(name) : Attribute();
}

std::optional<int64_t> loweringConfigInt(func::FuncOp kernel, llvm::StringRef name) {
  if (auto value = loweringConfig(kernel, name).dyn_cast_or_null<IntegerAttr>())
    return value.getInt();
  return std::nullopt;
}

bool loweringConfigFlag(func::FuncOp kernel, llvm::StringRef name) {
  return bool(loweringConfig(kernel, name).dyn_cast_or_null<UnitAttr>());
}

Operation *kernelAnchor(func::FuncOp kernel) {
  Operation *anchor = nullptr;
  for (Operation &op : kernel.getBody().front().without_terminator())
    if (!isa<ir::MergeHeadsOp, ir::ReshapeHeadsOp>(op))
      anchor = &op;
  return anchor;
}

} // namespace q3::vulkan
