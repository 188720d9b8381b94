//===- KernelMath.cpp - the arithmetic every backend's kernels share ------===//
#include "backends/common/KernelMath.h"
#include "runtime/DType.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

#include <cmath>

using namespace mlir;

namespace q3::kernels {
namespace {

/// `type` with its element type replaced (scalar stays scalar, vector keeps its shape).
Type withElement(Type type, Type element) {
  if (auto vector = type.dyn_cast<VectorType>())
    return VectorType::get(vector.getShape(), element);
  return element;
}

Type i32Like(OpBuilder &b, Type type) { return withElement(type, b.getI32Type()); }
Type f32Like(OpBuilder &b, Type type) { return withElement(type, b.getF32Type()); }

/// x - floor(x): exact in floating point.
Value fraction(OpBuilder &b, Location loc, Value x) {
  return b.create<arith::SubFOp>(loc, x, b.create<math::FloorOp>(loc, x));
}

/// c0 + x (c1 + x (c2 + ...)) for coefficients c0, c1, ... in f32.
Value horner(OpBuilder &b, Location loc, Value x, std::initializer_list<double> coefficients) {
  std::vector<double> c(coefficients);
  Value acc = floatConstant(b, loc, x.getType(), c.back());
  for (size_t i = c.size() - 1; i-- > 0;) {
    acc = b.create<arith::MulFOp>(loc, acc, x);
    acc = b.create<arith::AddFOp>(loc, acc, floatConstant(b, loc, x.getType(), c[i]));
  }
  return acc;
}

/// `value` rounded to its `bits` most significant mantissa bits (toward zero).
double truncateMantissa(double value, int bits) {
  if (value == 0)
    return 0;
  int exponent = 0;
  double mantissa = std::frexp(value, &exponent); // value = mantissa * 2^exponent, |m| in [0.5, 1)
  double scaled = std::trunc(std::ldexp(mantissa, bits));
  return std::ldexp(scaled, exponent - bits);
}

/// The rotation frequency in turns per position, in three f32 words: two
/// with 12 significant bits (so a 12-bit integer times them is exact) and
/// the rest.
struct TurnsPerPosition {
  float high, mid, low;
};

TurnsPerPosition turnsPerPosition(double frequencyRadians) {
  const double turns = frequencyRadians / (2.0 * M_PI);
  const double high = truncateMantissa(turns, 12);
  const double mid = truncateMantissa(turns - high, 12);
  return {float(high), float(mid), float(turns - high - mid)};
}

} // namespace

Value floatConstant(OpBuilder &b, Location loc, Type type, double value) {
  if (auto vector = type.dyn_cast<VectorType>())
    return b.create<arith::ConstantOp>(
        loc, vector,
        DenseElementsAttr::get(vector, b.getFloatAttr(vector.getElementType(), value)));
  return b.create<arith::ConstantOp>(loc, type, b.getFloatAttr(type, value));
}

Value intConstant(OpBuilder &b, Location loc, Type type, int64_t value) {
  if (auto vector = type.dyn_cast<VectorType>())
    return b.create<arith::ConstantOp>(
        loc, vector,
        DenseElementsAttr::get(vector, b.getIntegerAttr(vector.getElementType(), value)));
  return b.create<arith::ConstantOp>(loc, type, b.getIntegerAttr(type, value));
}

//===- Weights and the bf16 cache ----------------------------------------===//

Value widenBf16Low(OpBuilder &b, Location loc, Value word) {
  Value shifted = b.create<arith::ShLIOp>(loc, word, intConstant(b, loc, word.getType(), 16));
  return b.create<arith::BitcastOp>(loc, f32Like(b, word.getType()), shifted);
}

Value widenBf16High(OpBuilder &b, Location loc, Value word) {
  Value masked = b.create<arith::AndIOp>(
      loc, word, intConstant(b, loc, word.getType(), int64_t(int32_t(0xFFFF0000u))));
  return b.create<arith::BitcastOp>(loc, f32Like(b, word.getType()), masked);
}

Value widenF16(OpBuilder &b, Location loc, Value half) {
  return b.create<arith::ExtFOp>(loc, f32Like(b, half.getType()), half);
}

Value roundToBf16Bits(OpBuilder &b, Location loc, Value value) {
  Type i32 = i32Like(b, value.getType());
  Value bits = b.create<arith::BitcastOp>(loc, i32, value);
  Value sixteen = intConstant(b, loc, i32, 16);
  Value high = b.create<arith::ShRUIOp>(loc, bits, sixteen);
  // Ties to even: add 0x7FFF plus the lowest kept bit, then drop 16 bits.
  Value odd = b.create<arith::AndIOp>(loc, high, intConstant(b, loc, i32, 1));
  Value addend = b.create<arith::AddIOp>(loc, intConstant(b, loc, i32, 0x7FFF), odd);
  Value rounded =
      b.create<arith::ShRUIOp>(loc, b.create<arith::AddIOp>(loc, bits, addend), sixteen);
  // A NaN keeps its sign and payload's top bits and becomes quiet.
  Value quiet = b.create<arith::OrIOp>(loc, high, intConstant(b, loc, i32, 64));
  Value isNaN = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::UNO, value, value);
  return b.create<arith::SelectOp>(loc, isNaN, quiet, rounded);
}

Value clampToF16Range(OpBuilder &b, Location loc, Value value) {
  Type type = value.getType();
  Value max = floatConstant(b, loc, type, runtime::kF16Max);
  Value min = floatConstant(b, loc, type, -runtime::kF16Max);
  // Ordered comparisons are false for NaN, which therefore passes through.
  Value above = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OGT, value, max);
  Value low = b.create<arith::SelectOp>(loc, above, max, value);
  Value below = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OLT, low, min);
  return b.create<arith::SelectOp>(loc, below, min, low);
}

//===- RMSNorm and the epilogues -----------------------------------------===//

Value inverseRms(OpBuilder &b, Location loc, Value sumSquares, int64_t count, double eps) {
  Type type = sumSquares.getType();
  Value mean = b.create<arith::DivFOp>(loc, sumSquares, floatConstant(b, loc, type, double(count)));
  Value shifted = b.create<arith::AddFOp>(loc, mean, floatConstant(b, loc, type, float(eps)));
  Value root = b.create<math::SqrtOp>(loc, shifted);
  return b.create<arith::DivFOp>(loc, floatConstant(b, loc, type, 1.0), root);
}

Value silu(OpBuilder &b, Location loc, Value x) {
  Value e = b.create<math::ExpOp>(loc, b.create<arith::NegFOp>(loc, x));
  Value denominator = b.create<arith::AddFOp>(loc, floatConstant(b, loc, x.getType(), 1.0), e);
  return b.create<arith::DivFOp>(loc, x, denominator);
}

Value applyEpilogue(OpBuilder &b, Location loc, const Epilogue &epilogue, Value gateDot,
                    Value upDot, Value rowScale, Value residual) {
  Value value = gateDot;
  if (epilogue.normalized)
    value = b.create<arith::MulFOp>(loc, value, rowScale);
  if (epilogue.swiglu) {
    Value up = epilogue.normalized ? b.create<arith::MulFOp>(loc, upDot, rowScale) : upDot;
    value = b.create<arith::MulFOp>(loc, silu(b, loc, value), up);
  }
  if (epilogue.residual)
    value = b.create<arith::AddFOp>(loc, value, residual);
  return value;
}

//===- RoPE ---------------------------------------------------------------===//

double ropeFrequency(double theta, int64_t headDim, int64_t pair) {
  return std::pow(theta, double(pair) * (-2.0 / double(headDim)));
}

std::array<float, 3> ropeTurnWords(double frequency) {
  TurnsPerPosition t = turnsPerPosition(frequency);
  return {t.high, t.mid, t.low};
}

SinCos ropeSinCos(OpBuilder &b, Location loc, Value position, Value turnsHigh, Value turnsMid,
                  Value turnsLow) {
  Type f32 = turnsHigh.getType();
  Type i32 = i32Like(b, f32);
  // position = ph * 4096 + pl with 12-bit halves: each times a 12-bit word
  // of the turns is exact in f32, and so is its fraction.
  Value ph = b.create<arith::ShRUIOp>(loc, position, intConstant(b, loc, i32, 12));
  Value pl = b.create<arith::AndIOp>(loc, position, intConstant(b, loc, i32, 4095));
  Value phF = b.create<arith::UIToFPOp>(loc, f32, ph);
  Value plF = b.create<arith::UIToFPOp>(loc, f32, pl);
  Value pF = b.create<arith::UIToFPOp>(loc, f32, position);
  Value c4096 = floatConstant(b, loc, f32, 4096.0);
  Value highTimes4096 = b.create<arith::MulFOp>(loc, turnsHigh, c4096); // exact: a power of 2
  Value midTimes4096 = b.create<arith::MulFOp>(loc, turnsMid, c4096);
  Value t1 = fraction(b, loc, b.create<arith::MulFOp>(loc, phF, highTimes4096));
  Value t2 = fraction(b, loc, b.create<arith::MulFOp>(loc, plF, turnsHigh));
  Value t3 = fraction(b, loc, b.create<arith::MulFOp>(loc, phF, midTimes4096));
  Value small = b.create<arith::AddFOp>(loc, b.create<arith::MulFOp>(loc, plF, turnsMid),
                                        b.create<arith::MulFOp>(loc, pF, turnsLow));
  Value turns = fraction(b, loc, b.create<arith::AddFOp>(loc, t1, t2));
  turns = fraction(b, loc, b.create<arith::AddFOp>(loc, turns, t3));
  turns = fraction(b, loc, b.create<arith::AddFOp>(loc, turns, small));
  // Quarter turns: the nearest quadrant and the rest in [-1/2, 1/2] (exact).
  Value quarters = b.create<arith::MulFOp>(loc, turns, floatConstant(b, loc, f32, 4.0));
  Value quadrantF = b.create<math::FloorOp>(
      loc, b.create<arith::AddFOp>(loc, quarters, floatConstant(b, loc, f32, 0.5)));
  Value rest = b.create<arith::SubFOp>(loc, quarters, quadrantF);
  Value x = b.create<arith::MulFOp>(loc, rest, floatConstant(b, loc, f32, M_PI / 2));
  Value x2 = b.create<arith::MulFOp>(loc, x, x);
  // Taylor polynomials on [-pi/4, pi/4]: truncation below 1e-11.
  Value sinX = b.create<arith::MulFOp>(
      loc, x,
      horner(b, loc, x2,
             {1.0, -1.0 / 6, 1.0 / 120, -1.0 / 5040, 1.0 / 362880, -1.0 / 39916800}));
  Value cosX = horner(b, loc, x2,
                      {1.0, -1.0 / 2, 1.0 / 24, -1.0 / 720, 1.0 / 40320, -1.0 / 3628800,
                       1.0 / 479001600});
  // Quadrant q: (cos, sin) = (c, s), (-s, c), (-c, -s), (s, -c).
  Value quadrant = b.create<arith::AndIOp>(loc, b.create<arith::FPToSIOp>(loc, i32, quadrantF),
                                           intConstant(b, loc, i32, 3));
  Value odd = b.create<arith::CmpIOp>(
      loc, arith::CmpIPredicate::ne,
      b.create<arith::AndIOp>(loc, quadrant, intConstant(b, loc, i32, 1)), intConstant(b, loc, i32, 0));
  Value negateCos = b.create<arith::CmpIOp>(
      loc, arith::CmpIPredicate::eq,
      b.create<arith::AndIOp>(loc, b.create<arith::AddIOp>(loc, quadrant, intConstant(b, loc, i32, 1)),
                              intConstant(b, loc, i32, 2)),
      intConstant(b, loc, i32, 2));
  Value negateSin = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::uge, quadrant,
                                            intConstant(b, loc, i32, 2));
  Value cosMagnitude = b.create<arith::SelectOp>(loc, odd, sinX, cosX);
  Value sinMagnitude = b.create<arith::SelectOp>(loc, odd, cosX, sinX);
  Value cos = b.create<arith::SelectOp>(loc, negateCos, b.create<arith::NegFOp>(loc, cosMagnitude),
                                        cosMagnitude);
  Value sin = b.create<arith::SelectOp>(loc, negateSin, b.create<arith::NegFOp>(loc, sinMagnitude),
                                        sinMagnitude);
  return {cos, sin};
}

std::pair<Value, Value> ropeRotate(OpBuilder &b, Location loc, Value first, Value second,
                                   const SinCos &angle) {
  Value a = b.create<arith::SubFOp>(loc, b.create<arith::MulFOp>(loc, first, angle.cos),
                                    b.create<arith::MulFOp>(loc, second, angle.sin));
  Value c = b.create<arith::AddFOp>(loc, b.create<arith::MulFOp>(loc, second, angle.cos),
                                    b.create<arith::MulFOp>(loc, first, angle.sin));
  return {a, c};
}

//===- Online softmax -----------------------------------------------------===//

SoftmaxStep onlineSoftmaxStep(OpBuilder &b, Location loc, Value max, Value sum, Value score) {
  Value newMax = b.create<arith::MaxFOp>(loc, max, score);
  Value rescale = b.create<math::ExpOp>(loc, b.create<arith::SubFOp>(loc, max, newMax));
  Value weight = b.create<math::ExpOp>(loc, b.create<arith::SubFOp>(loc, score, newMax));
  Value newSum = b.create<arith::AddFOp>(loc, b.create<arith::MulFOp>(loc, sum, rescale), weight);
  return {newMax, newSum, rescale, weight};
}

SoftmaxMerge mergeSoftmax(OpBuilder &b, Location loc, Value maxA, Value sumA, Value maxB,
                          Value sumB) {
  Value max = b.create<arith::MaxFOp>(loc, maxA, maxB);
  Value scaleA = b.create<math::ExpOp>(loc, b.create<arith::SubFOp>(loc, maxA, max));
  Value scaleB = b.create<math::ExpOp>(loc, b.create<arith::SubFOp>(loc, maxB, max));
  Value sum = b.create<arith::AddFOp>(loc, b.create<arith::MulFOp>(loc, sumA, scaleA),
                                      b.create<arith::MulFOp>(loc, sumB, scaleB));
  return {max, sum, scaleA, scaleB};
}

float lowestScore() { return -3.0e38f; }

DecodeSplit decodeSplit(OpBuilder &b, Location loc, Value positions, int64_t splits,
                        int64_t minPositions) {
  auto constant = [&](int64_t v) { return b.create<arith::ConstantIndexOp>(loc, v); };
  auto ceilDiv = [&](Value a, Value d) {
    Value up = b.create<arith::AddIOp>(loc, a, b.create<arith::SubIOp>(loc, d, constant(1)));
    return b.create<arith::DivSIOp>(loc, up, d).getResult();
  };
  Value even = ceilDiv(positions, constant(splits));
  Value span = b.create<arith::MaxSIOp>(loc, even, constant(minPositions));
  return {span, ceilDiv(positions, span)};
}

} // namespace q3::kernels
