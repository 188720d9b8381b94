//===- PassErrors.h - a thrown error as a pass's diagnostic ---------------===//
//
// The target and tuning readers (targetOf, measuredInteger, ...) throw on an
// attribute they cannot read; a pass turns that into an error on the module
// that names the pass, and fails.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mlir/IR/Operation.h"
#include "mlir/Support/LogicalResult.h"

#include "llvm/ADT/StringRef.h"

#include <exception>
#include <type_traits>

namespace q3::cpu {

namespace detail {
template <typename T> struct OrFailure { using type = mlir::FailureOr<T>; };
template <typename T> struct OrFailure<mlir::FailureOr<T>> { using type = mlir::FailureOr<T>; };
} // namespace detail

/// What `compute()` returns (a FailureOr<T> stays one), or, where it throws,
/// failure() after the error "<pass>: <what>" on `op`.
template <typename Compute>
auto valueOrPassError(mlir::Operation *op, llvm::StringRef pass, Compute &&compute) ->
    typename detail::OrFailure<std::invoke_result_t<Compute>>::type {
  try {
    return compute();
  } catch (const std::exception &error) {
    op->emitError() << pass << ": " << error.what();
    return mlir::failure();
  }
}

} // namespace q3::cpu
