#include "runtime/DType.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace q3::runtime {
namespace {

float fromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint32_t toBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(DType, NamesSizesAndParsing) {
  for (DType type : {DType::F32, DType::F16, DType::BF16})
    EXPECT_EQ(parseDType(dtypeName(type)), type);
  EXPECT_STREQ(dtypeName(DType::BF16), "BF16");
  EXPECT_EQ(dtypeSize(DType::F32), 4u);
  EXPECT_EQ(dtypeSize(DType::F16), 2u);
  EXPECT_EQ(dtypeSize(DType::BF16), 2u);
  EXPECT_FALSE(parseDType("I64"));
  EXPECT_FALSE(parseDType("bf16"));
  EXPECT_FALSE(parseDType(""));
}

TEST(DType, Bf16ExactValues) {
  EXPECT_EQ(floatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(floatToBf16(-2.0f), 0xc000);
  EXPECT_EQ(floatToBf16(0.0f), 0x0000);
  EXPECT_EQ(floatToBf16(-0.0f), 0x8000);
  EXPECT_EQ(bf16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(bf16ToFloat(0x4049), 3.140625f);
  EXPECT_EQ(bf16ToFloat(0x0001), fromBits(0x00010000)); // subnormal float stays exact
}

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(floatToBf16(fromBits(0x3f808000)), 0x3f80); // tie, even stays
  EXPECT_EQ(floatToBf16(fromBits(0x3f818000)), 0x3f82); // tie, odd rounds up
  EXPECT_EQ(floatToBf16(fromBits(0x3f808001)), 0x3f81); // above half
  EXPECT_EQ(floatToBf16(fromBits(0x3f807fff)), 0x3f80); // below half
  EXPECT_EQ(floatToBf16(fromBits(0x3fffffff)), 0x4000); // carry into exponent
}

TEST(DType, Bf16InfAndNan) {
  EXPECT_EQ(floatToBf16(kInf), 0x7f80);
  EXPECT_EQ(floatToBf16(-kInf), 0xff80);
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::max()), 0x7f80); // rounds past the largest bf16
  EXPECT_TRUE(std::isinf(bf16ToFloat(0x7f80)));
  // A NaN whose payload lives only in the dropped bits must not become inf.
  uint16_t nan = floatToBf16(fromBits(0x7f800001));
  EXPECT_TRUE(std::isnan(bf16ToFloat(nan)));
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(fromBits(0xffffffff)))));
  EXPECT_TRUE(std::isnan(bf16ToFloat(0x7fc0)));
}

TEST(DType, Bf16EveryValueRoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    float f = bf16ToFloat(uint16_t(h));
    if (std::isnan(f))
      EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(f)))) << h;
    else
      ASSERT_EQ(floatToBf16(f), h) << h;
  }
}

TEST(DType, F16ExactValues) {
  EXPECT_EQ(floatToF16(1.0f), 0x3c00);
  EXPECT_EQ(floatToF16(-2.0f), 0xc000);
  EXPECT_EQ(floatToF16(-0.0f), 0x8000);
  EXPECT_EQ(floatToF16(65504.0f), 0x7bff);
  EXPECT_EQ(floatToF16(std::ldexp(1.0f, -14)), 0x0400); // smallest normal
  EXPECT_EQ(f16ToFloat(0x3c00), 1.0f);
  EXPECT_EQ(f16ToFloat(0x3555), 0.333251953125f);
  EXPECT_EQ(f16ToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(f16ToFloat(0xc000), -2.0f);
}

TEST(DType, F16Subnormals) {
  EXPECT_EQ(f16ToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16ToFloat(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(f16ToFloat(0x8001), -std::ldexp(1.0f, -24));
  EXPECT_EQ(floatToF16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(floatToF16(std::ldexp(1023.0f, -24)), 0x03ff);
  EXPECT_EQ(floatToF16(std::ldexp(1.0f, -25)), 0x0000);    // tie to even (zero)
  EXPECT_EQ(floatToF16(std::ldexp(1.5f, -25)), 0x0001);    // above half
  EXPECT_EQ(floatToF16(std::ldexp(3.0f, -25)), 0x0002);    // 1.5 ulp: tie, rounds to even 2
  EXPECT_EQ(floatToF16(std::ldexp(5.0f, -25)), 0x0002);    // 2.5 ulp: tie, rounds to even 2
  EXPECT_EQ(floatToF16(std::ldexp(2047.0f, -25)), 0x0400); // rounds up into the smallest normal
  EXPECT_EQ(floatToF16(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(floatToF16(-std::ldexp(1.0f, -30)), 0x8000);
}

TEST(DType, F16RoundsToNearestEven) {
  EXPECT_EQ(floatToF16(1.0f + std::ldexp(1.0f, -11)), 0x3c00); // tie, even stays
  EXPECT_EQ(floatToF16(1.0f + std::ldexp(3.0f, -11)), 0x3c02); // tie, odd rounds up
  EXPECT_EQ(floatToF16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);
  EXPECT_EQ(floatToF16(65519.0f), 0x7bff);
  EXPECT_EQ(floatToF16(65520.0f), 0x7c00); // tie with odd 65504 goes to infinity
}

TEST(DType, F16InfAndNan) {
  EXPECT_EQ(floatToF16(kInf), 0x7c00);
  EXPECT_EQ(floatToF16(-kInf), 0xfc00);
  EXPECT_EQ(floatToF16(1e10f), 0x7c00);
  EXPECT_TRUE(std::isinf(f16ToFloat(0x7c00)));
  EXPECT_LT(f16ToFloat(0xfc00), 0.0f);
  EXPECT_TRUE(std::isnan(f16ToFloat(0x7e00)));
  EXPECT_TRUE(std::isnan(f16ToFloat(0x7c01)));
  EXPECT_TRUE(std::isnan(f16ToFloat(floatToF16(fromBits(0x7f800001)))));
  EXPECT_TRUE(std::isnan(f16ToFloat(floatToF16(std::nanf("")))));
}

// What an f16 KV cache stores: beyond the finite range, the largest f16 of
// that sign (not infinity); inside it, floatToF16's rounding; NaN stays NaN.
TEST(DType, F16SaturatingClampsToTheFiniteRange) {
  EXPECT_EQ(floatToF16Saturating(1e6f), 0x7bffu);
  EXPECT_EQ(floatToF16Saturating(-1e6f), 0xfbffu);
  EXPECT_EQ(floatToF16Saturating(kInf), 0x7bffu);
  EXPECT_EQ(floatToF16Saturating(-kInf), 0xfbffu);
  EXPECT_EQ(floatToF16Saturating(65520.0f), 0x7bffu); // floatToF16 rounds it to infinity
  EXPECT_EQ(f16ToFloat(floatToF16Saturating(kF16Max)), kF16Max);
  for (float v : {0.0f, -1.5f, 3.14159f, 1e-6f, 60000.0f})
    EXPECT_EQ(floatToF16Saturating(v), floatToF16(v)) << v;
  EXPECT_TRUE(std::isnan(f16ToFloat(floatToF16Saturating(std::nanf("")))));
}

TEST(DType, F16EveryValueRoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    float f = f16ToFloat(uint16_t(h));
    if (std::isnan(f))
      EXPECT_TRUE(std::isnan(f16ToFloat(floatToF16(f)))) << h;
    else
      ASSERT_EQ(floatToF16(f), h) << h;
  }
}

#ifdef __FLT16_MAX__
// The compiler's own float -> _Float16 conversion is IEEE RNE; compare on random bit patterns.
TEST(DType, F16MatchesCompilerConversion) {
  std::mt19937 random(1234);
  for (int i = 0; i < 2000000; ++i) {
    float f = fromBits(random());
    if (std::isnan(f))
      continue;
    _Float16 expected = static_cast<_Float16>(f);
    uint16_t expectedBits;
    std::memcpy(&expectedBits, &expected, sizeof expectedBits);
    ASSERT_EQ(floatToF16(f), expectedBits) << "bits 0x" << std::hex << toBits(f);
  }
}
#endif

TEST(DType, ConvertBuffersIncludingUnaligned) {
  std::vector<float> values = {1.0f, -0.5f, 3.0f, 65504.0f, 0.0f};
  for (DType type : {DType::F32, DType::F16, DType::BF16}) {
    std::vector<uint8_t> storage(values.size() * dtypeSize(type) + 1);
    uint8_t *unaligned = storage.data() + 1;
    convertFromF32(type, values.data(), unaligned, values.size());
    std::vector<float> back(values.size());
    convertToF32(type, unaligned, back.data(), back.size());
    if (type == DType::BF16)
      back[3] = values[3]; // 65504 is not exact in bf16
    EXPECT_EQ(back, values) << dtypeName(type);
  }
  uint16_t bf16[2];
  convertFromF32(DType::BF16, values.data(), bf16, 2);
  EXPECT_EQ(bf16[0], 0x3f80);
  EXPECT_EQ(bf16[1], 0xbf00);
}

} // namespace
} // namespace q3::runtime
