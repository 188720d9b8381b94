//===- TuningRecord.cpp - what a tuner writes into q3.tuning --------------===//
#include "backends/cpu/TuningRecord.h"
#include "backends/cpu/passes/CpuPasses.h"

#include <cmath>

namespace q3::cpu {

TuningRecord::TuningRecord(mlir::ModuleOp module) : builder(module.getContext()), module(module) {
  if (mlir::DictionaryAttr existing = tuningOf(module))
    entries = mlir::NamedAttrList(existing);
}

void TuningRecord::set(llvm::StringRef key, mlir::Attribute value) { entries.set(key, value); }

mlir::FloatAttr TuningRecord::rate(double value) {
  return builder.getF64FloatAttr(std::round(value * 10) / 10);
}

void TuningRecord::setOthersShare(llvm::StringRef key, const TuningProvenance &provenance) {
  if (provenance.keptOut)
    set(key, builder.getF64FloatAttr(shareForPeople(provenance)));
}

void TuningRecord::commit() {
  module->setAttr(kTuningAttrName, entries.getDictionary(module.getContext()));
}

} // namespace q3::cpu
