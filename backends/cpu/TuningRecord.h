//===- TuningRecord.h - what a tuner writes into q3.tuning ----------------===//
//
// Each tuner (products' prefill, decode, attention) records its choice, the
// rates it measured and how it measured them in the module's q3.tuning
// dictionary, which the target passes read and the manifest carries. The
// three add to one dictionary: a record keeps the entries others wrote and
// replaces its own.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "backends/cpu/TuningCache.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OperationSupport.h"

namespace q3::cpu {

class TuningRecord {
public:
  explicit TuningRecord(mlir::ModuleOp module);

  /// Sets `key` to `value`.
  void set(llvm::StringRef key, mlir::Attribute value);
  /// A measured rate as q3.tuning keeps it: rounded to tenths.
  mlir::FloatAttr rate(double value);
  /// `key` = the share of the machine others took, when that kept the
  /// measurement out of the cache (nothing otherwise).
  void setOthersShare(llvm::StringRef key, const TuningProvenance &provenance);
  /// Writes the dictionary back to the module.
  void commit();

  mlir::Builder builder;

private:
  mlir::ModuleOp module;
  mlir::NamedAttrList entries;
};

} // namespace q3::cpu
