//===- WeightAccess.h - how a kernel reads rows of a stored matrix --------===//
//
// A weight (or the embedding table) is a row-major [rows, columns] matrix of
// f32, f16 or bf16. A kernel reads it in units: the widest load that divides
// a row (16 bytes where it can, so a subgroup's loads coalesce), widened to
// f32 by the shared helpers: bf16 as 32-bit words of two values (a shift
// gives the even element, a mask the odd one), f16 from 16-bit storage.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "backends/vulkan/Kernels.h"

#include "mlir/IR/Value.h"

#include <vector>

namespace q3::vulkan {

class GpuKernelBuilder;

class WeightAccess {
public:
  /// Rows of `columns` elements of `storage`, read in units of at most
  /// `maxElementsPerUnit` elements.
  WeightAccess(mlir::MLIRContext &context, DType storage, int64_t columns,
               int64_t maxElementsPerUnit = 8);

  /// The element type of the binding (f32, f16, i32, or a vector of 4).
  mlir::Type element() const { return element_; }
  int64_t elementsPerUnit() const { return elementsPerUnit_; }
  int64_t unitsPerRow() const { return columns_ / elementsPerUnit_; }
  /// Bytes of one unit (the binding's element).
  int64_t unitBytes() const;
  /// Units before row `row` (index).
  mlir::Value unitsBefore(GpuKernelBuilder &k, mlir::Value row) const;
  /// The unit at `unitIndex` of `memref` (a binding of element()), widened:
  /// elementsPerUnit() f32 values in column order.
  std::vector<mlir::Value> loadUnit(GpuKernelBuilder &k, mlir::Value memref,
                                    mlir::Value unitIndex) const;
  /// One element, column `column` of the row that starts at unit `rowUnit`,
  /// widened (for reads that are not unit-aligned).
  mlir::Value loadElement(GpuKernelBuilder &k, mlir::Value memref, mlir::Value rowUnit,
                          mlir::Value column) const;
  /// `count` elements from column `first` on, widened: whole units when
  /// `first` is known to be a multiple of `firstMultiple` that units divide
  /// (and so does `count`), else element by element.
  std::vector<mlir::Value> loadColumns(GpuKernelBuilder &k, mlir::Value memref,
                                       mlir::Value rowUnit, mlir::Value first,
                                       int64_t firstMultiple, int64_t count) const;

private:
  DType storage_;
  int64_t columns_;
  int64_t elementsPerUnit_;
  mlir::Type element_;
};

} // namespace q3::vulkan
