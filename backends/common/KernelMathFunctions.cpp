//===- KernelMathFunctions.cpp - the shared math as MLIR functions --------===//
#include "backends/common/KernelMathFunctions.h"
#include "backends/common/KernelMath.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>

using namespace mlir;

namespace q3::kernels {
namespace {

Type floatsOf(MLIRContext &context, int64_t lanes, Type element) {
  return lanes > 1 ? Type(VectorType::get({lanes}, element)) : element;
}

/// A private function `name` of `inputs` -> `results` whose body `body`
/// builds (returning the result values), printed as MLIR text.
std::string
functionText(const std::string &name, const std::function<std::vector<Type>(MLIRContext &)> &inputs,
             const std::function<std::vector<Type>(MLIRContext &)> &results,
             const std::function<std::vector<Value>(OpBuilder &, Location, ValueRange)> &body) {
  MLIRContext context;
  context.loadDialect<func::FuncDialect, arith::ArithDialect, math::MathDialect>();
  OpBuilder b(&context);
  Location loc = b.getUnknownLoc();
  auto func = func::FuncOp::create(loc, name, b.getFunctionType(inputs(context), results(context)));
  func.setPrivate();
  Block *entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);
  b.create<func::ReturnOp>(loc, body(b, loc, entry->getArguments()));
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "\n";
  func->print(os);
  os << "\n";
  func->erase();
  return text;
}

/// functionText for one result.
std::string functionText(const std::string &name,
                         const std::function<std::vector<Type>(MLIRContext &)> &inputs,
                         const std::function<Type(MLIRContext &)> &result,
                         const std::function<Value(OpBuilder &, Location, ValueRange)> &body) {
  return functionText(
      name, inputs, [&](MLIRContext &c) { return std::vector<Type>{result(c)}; },
      [&](OpBuilder &b, Location loc, ValueRange args) {
        return std::vector<Value>{body(b, loc, args)};
      });
}

} // namespace

std::string bf16RoundingFunctionText(const std::string &name, int64_t lanes) {
  return functionText(
      name,
      [&](MLIRContext &c) { return std::vector<Type>{floatsOf(c, lanes, FloatType::getF32(&c))}; },
      [&](MLIRContext &c) { return floatsOf(c, lanes, IntegerType::get(&c, 16)); },
      [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
        Value bits = roundToBf16Bits(b, loc, args[0]);
        return b.create<arith::TruncIOp>(
            loc, floatsOf(*b.getContext(), lanes, b.getIntegerType(16)), bits);
      });
}

std::string inverseRmsFunctionText(const std::string &name, int64_t count, double eps) {
  return functionText(
      name, [](MLIRContext &c) { return std::vector<Type>{FloatType::getF32(&c)}; },
      [](MLIRContext &c) { return FloatType::getF32(&c); },
      [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
        return inverseRms(b, loc, args[0], count, eps);
      });
}

std::string swigluFunctionText(const std::string &name, int64_t lanes) {
  return functionText(
      name,
      [&](MLIRContext &c) {
        Type t = floatsOf(c, lanes, FloatType::getF32(&c));
        return std::vector<Type>{t, t};
      },
      [&](MLIRContext &c) { return floatsOf(c, lanes, FloatType::getF32(&c)); },
      [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
        return b.create<arith::MulFOp>(loc, silu(b, loc, args[0]), args[1]);
      });
}

std::string mergeSoftmaxFunctionText(const std::string &name) {
  return functionText(
      name, [](MLIRContext &c) { return std::vector<Type>(4, FloatType::getF32(&c)); },
      [](MLIRContext &c) { return std::vector<Type>(4, FloatType::getF32(&c)); },
      [](OpBuilder &b, Location loc, ValueRange args) {
        const SoftmaxMerge merged = mergeSoftmax(b, loc, args[0], args[1], args[2], args[3]);
        return std::vector<Value>{merged.max, merged.sum, merged.scaleA, merged.scaleB};
      });
}

std::string decodeSplitFunctionText(const std::string &name, int64_t splits, int64_t minPositions) {
  return functionText(
      name, [](MLIRContext &c) { return std::vector<Type>{IndexType::get(&c)}; },
      [](MLIRContext &c) { return std::vector<Type>(2, IndexType::get(&c)); },
      [&](OpBuilder &b, Location loc, ValueRange args) {
        const DecodeSplit split = decodeSplit(b, loc, args[0], splits, minPositions);
        return std::vector<Value>{split.span, split.active};
      });
}

} // namespace q3::kernels
