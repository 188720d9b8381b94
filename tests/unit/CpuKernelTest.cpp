//===- CpuKernelTest.cpp - generated CPU kernels vs the reference ---------===//
//
// Like llama.cpp's test-backend-ops: each generated kernel is compiled to a
// shared object, loaded from memory, run on random inputs, and compared with
// the reference interpreter's arithmetic for the same op.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/ColumnBlockLinear.h"
#include "backends/cpu/CompileKernels.h"
#include "backends/cpu/CompileModel.h"
#include "backends/cpu/KernelSource.h"
#include "backends/reference/Kernels.h"
#include "runtime/CpuFeatures.h"
#include "runtime/DType.h"
#include "runtime/KernelABI.h"
#include "runtime/SharedLibrary.h"
#include "runtime/ThreadPool.h"
#include "runtime/WeightLayout.h"
#include "tests/common/KernelTestData.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <tuple>

namespace q3::testing {
namespace {

using cpu::DType;
using cpu::FusedLinearKernel;

struct LinearCase {
  std::string label;
  int64_t in, out, rows;
  DType weight;
  bool norm, swiglu, residual;
  bool prologueGain = false; // gain applied to x in the kernel, not folded into w
  bool columnBlocks = false; // weight bound in runtime/WeightLayout.h's column blocks
  cpu::PrefillMatmul matmul = cpu::PrefillMatmul::F32; // with column blocks
  int64_t tileRows = 6;                                // rows of the prefill register tile
  bool perCall = false;            // row-major weight, panels packed by each prefill
  std::vector<int64_t> parts = {}; // the weight in buffers of these rows (not columnBlocks)
  int64_t inPlaceRows = 1;         // most prefill rows read in place (per call, avx512bf16)
  int64_t accumulators = 4;        // per weight row of decode's row loop (not columnBlocks)
};

/// `c` with decode's row loop summing each row into `accumulators`.
LinearCase withAccumulators(LinearCase c, int64_t accumulators) {
  c.label += "_" + std::to_string(accumulators) + "_accumulators";
  c.accumulators = accumulators;
  return c;
}

/// `c` (a row-major weight: f32, or 16-bit with an odd K) bound in `parts`,
/// as cpu-sink-weight-concat leaves a concatenated weight.
LinearCase inParts(LinearCase c, std::vector<int64_t> parts) {
  c.label = "parts_" + c.label;
  c.parts = std::move(parts);
  return c;
}

/// `c` with its weight packed per call (and bound in `parts`).
LinearCase perCall(LinearCase c, std::vector<int64_t> parts = {}) {
  c.label = "percall_" + c.label;
  c.columnBlocks = false;
  c.perCall = true;
  c.parts = std::move(parts);
  return c;
}

/// The rows whose activations the kernel rounds to bf16: every row of a
/// prefill (more than one row) with bf16 products, none in decode.
int64_t roundedRows(const LinearCase &c) {
  return c.matmul != cpu::PrefillMatmul::F32 && c.rows > 1 ? c.rows : 0;
}

float roundedToBf16(float value) {
  uint16_t half;
  runtime::convertFromF32(runtime::DType::BF16, &value, &half, 1);
  float widened;
  runtime::convertToF32(runtime::DType::BF16, &half, &widened, 1);
  return widened;
}

void PrintTo(const LinearCase &c, std::ostream *os) { *os << c.label; }

std::string caseName(const ::testing::TestParamInfo<LinearCase> &info) { return info.param.label; }

/// The text of `func.func ... @<name>(` in `source`, up to the next function.
std::string functionText(const std::string &source, const std::string &name) {
  const size_t begin = source.find("@" + name + "(");
  if (begin == std::string::npos)
    return "";
  return source.substr(begin, source.find("func.func", begin) - begin);
}

/// The kernel `c` describes, named "case" (entry q3_kernel_case).
FusedLinearKernel kernelFor(const LinearCase &c) {
  FusedLinearKernel kernel;
  kernel.name = "case";
  kernel.inFeatures = c.in;
  kernel.outFeatures = c.out;
  kernel.weight = c.weight;
  if (c.norm)
    kernel.normEps = 1e-6;
  kernel.swiglu = c.swiglu;
  kernel.residual = c.residual;
  if (c.prologueGain)
    kernel.prologueGain = DType::BF16;
  kernel.columnBlocks = c.columnBlocks;
  kernel.panelsPerCall = c.perCall;
  kernel.weightParts = c.parts;
  kernel.prefillMatmul = c.matmul;
  kernel.prefillTileRows = c.tileRows;
  kernel.inPlacePrefillRows = c.inPlaceRows;
  kernel.decodeAccumulators = c.accumulators;
  return kernel;
}

/// Compiles `c` for `cpu`, runs it in two workgroup ranges, and compares with
/// the reference; returns max |actual - expected| / max |expected|. With
/// `sameRounding` the reference rounds the activations where the kernel does
/// (after the gain, before the norm's scale), so only the order of the f32
/// sums differs.
double relativeErrorOf(const LinearCase &c, const std::string &cpu, bool sameRounding = false) {
  const FusedLinearKernel kernel = kernelFor(c);

  std::vector<uint8_t> library = cpu::linkSharedObject(
      cpu::compileKernelsToObject(cpu::fusedLinearSource(kernel), cpu::resolveCpuTarget(cpu)));
  auto loaded = runtime::SharedLibrary::loadFromMemory("kernels", library.data(), library.size());
  auto entry = reinterpret_cast<runtime::KernelEntry>(loaded->symbol("q3_kernel_case"));

  std::mt19937 rng(42);
  std::vector<float> x = randomValues(c.rows * c.in, rng);
  // Weights as stored (bf16/f16/f32) and their exact f32 widening for the reference.
  std::vector<float> weights = randomValues(kernel.weightRows() * c.in, rng, 0.5f);
  std::vector<uint8_t> stored(weights.size() * runtime::dtypeSize(c.weight));
  runtime::convertFromF32(c.weight, weights.data(), stored.data(), weights.size());
  runtime::convertToF32(c.weight, stored.data(), weights.data(), weights.size());
  if (c.columnBlocks) {
    std::vector<uint8_t> packed(stored.size());
    runtime::packColumnBlocks(reinterpret_cast<const uint16_t *>(stored.data()),
                              reinterpret_cast<uint16_t *>(packed.data()), c.in, 0,
                              kernel.weightRows() / runtime::kColumnBlockRows);
    stored = std::move(packed);
  }
  std::vector<float> residual = randomValues(c.rows * c.out, rng);
  std::vector<float> expected(c.rows * c.out), actual(c.rows * c.out, NAN);

  // A bf16 gain: the reference folds it into its f32 copy of the weight.
  std::vector<float> gain = randomValues(c.in, rng);
  std::vector<uint8_t> gainStored(gain.size() * 2);
  runtime::convertFromF32(runtime::DType::BF16, gain.data(), gainStored.data(), gain.size());
  runtime::convertToF32(runtime::DType::BF16, gainStored.data(), gain.data(), gain.size());
  std::vector<float> referenceWeights = weights;
  if (c.prologueGain)
    for (size_t i = 0; i < referenceWeights.size(); ++i)
      referenceWeights[i] *= gain[i % c.in];

  const double eps = 1e-6;
  if (sameRounding) {
    // The kernel computes (round(x * gain) . w) * s with s the row's inverse
    // RMS: the reference gets round(x * gain) * s, the unfolded weight and no
    // norm of its own.
    std::vector<float> roundedX = x;
    for (int64_t t = 0; t < roundedRows(c); ++t) {
      float *row = roundedX.data() + t * c.in;
      double squares = 0.0;
      for (int64_t k = 0; k < c.in; ++k)
        squares += double(row[k]) * row[k];
      const float scale = c.norm ? float(1.0 / std::sqrt(squares / double(c.in) + eps)) : 1.0f;
      for (int64_t k = 0; k < c.in; ++k)
        row[k] = roundedToBf16(c.prologueGain ? row[k] * gain[k] : row[k]) * scale;
    }
    std::vector<float> unroundedExpected(expected.size());
    reference::fusedLinear(x.data(), referenceWeights.data(),
                           c.residual ? residual.data() : nullptr, unroundedExpected.data(), c.rows,
                           c.in, c.out, c.norm ? &eps : nullptr, c.swiglu);
    reference::fusedLinear(roundedX.data(), weights.data(), c.residual ? residual.data() : nullptr,
                           expected.data(), roundedRows(c), c.in, c.out, nullptr, c.swiglu);
    const int64_t done = roundedRows(c) * c.out;
    std::copy(unroundedExpected.begin() + done, unroundedExpected.end(), expected.begin() + done);
  } else {
    reference::fusedLinear(x.data(), referenceWeights.data(),
                           c.residual ? residual.data() : nullptr, expected.data(), c.rows, c.in,
                           c.out, c.norm ? &eps : nullptr, c.swiglu);
  }

  std::vector<void *> buffers = {x.data()};
  std::vector<int64_t> bytes = {int64_t(x.size() * 4)};
  // Each part in a buffer of its own, as the runtime binds them.
  std::vector<std::vector<uint8_t>> parts;
  const int64_t rowBytes = int64_t(stored.size()) / kernel.weightRows();
  int64_t firstRow = 0;
  for (int64_t rows : kernel.partRows()) {
    parts.emplace_back(stored.begin() + firstRow * rowBytes,
                       stored.begin() + (firstRow + rows) * rowBytes);
    firstRow += rows;
  }
  for (std::vector<uint8_t> &part : parts) {
    buffers.push_back(part.data());
    bytes.push_back(int64_t(part.size()));
  }
  if (c.prologueGain) {
    buffers.push_back(gainStored.data());
    bytes.push_back(int64_t(gainStored.size()));
  }
  if (c.residual) {
    buffers.push_back(residual.data());
    bytes.push_back(int64_t(residual.size() * 4));
  }
  buffers.push_back(actual.data());
  bytes.push_back(int64_t(actual.size() * 4));
  // The thread scratch the lowering plans (cpu-plan-thread-scratch), last,
  // exactly as large as the runtime's smallest region would be.
  std::vector<uint8_t> scratch(size_t(kernel.threadScratch().bytesFor(c.rows)));
  buffers.push_back(scratch.data());
  bytes.push_back(int64_t(scratch.size()));
  const int64_t scalars[] = {c.rows, c.rows, c.rows};
  // Two calls over disjoint workgroup ranges, as two threads would run it.
  const int64_t split = kernel.workgroups() / 2;
  entry(buffers.data(), bytes.data(), scalars, 0, split);
  entry(buffers.data(), bytes.data(), scalars, split, kernel.workgroups());
  if (c.rows == 1) {
    // Decode cuts each call's columns into runs read side by side: a column
    // lands in another run, or in the columns the runs leave, when the pool
    // splits the work otherwise (other thread counts), and must come out
    // bit for bit the same.
    const std::vector<float> twoCalls = actual;
    for (int64_t w = 0; w < kernel.workgroups(); ++w)
      entry(buffers.data(), bytes.data(), scalars, w, w + 1);
    if (std::memcmp(twoCalls.data(), actual.data(), actual.size() * 4) != 0)
      ADD_FAILURE() << c.label << ": decode depends on how the workgroups are split";
    // Nor may it depend on how many rows decode reads side by side
    // (q3.lowering's decode_streams; each row's sum keeps its order) or on
    // whether it prefetches (0 below: prefetch_bytes = none).
    for (int64_t streams : {1, 2, 0}) {
      FusedLinearKernel other = kernel;
      other.decodeStreams = streams == 0 ? kernel.decodeStreams : streams;
      if (streams == 0)
        other.prefetchBytes = cpu::kNoPrefetch;
      std::vector<uint8_t> otherLibrary = cpu::linkSharedObject(
          cpu::compileKernelsToObject(cpu::fusedLinearSource(other), cpu::resolveCpuTarget(cpu)));
      auto otherLoaded = runtime::SharedLibrary::loadFromMemory("kernels", otherLibrary.data(),
                                                                otherLibrary.size());
      auto otherEntry =
          reinterpret_cast<runtime::KernelEntry>(otherLoaded->symbol("q3_kernel_case"));
      std::fill(actual.begin(), actual.end(), NAN);
      otherEntry(buffers.data(), bytes.data(), scalars, 0, split);
      otherEntry(buffers.data(), bytes.data(), scalars, split, kernel.workgroups());
      if (std::memcmp(twoCalls.data(), actual.data(), actual.size() * 4) != 0)
        ADD_FAILURE() << c.label << ": decode with "
                      << (streams == 0 ? std::string("no prefetch")
                                       : std::to_string(streams) + " streams")
                      << " differs from decode with " << kernel.decodeStreams << " streams";
    }
  }

  double worst = 0.0, largest = 0.0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (!std::isfinite(actual[i]) || !std::isfinite(expected[i]))
      return std::nan(""); // an element was not written, or overflowed: fails any bound
    worst = std::max(worst, std::fabs(double(actual[i]) - double(expected[i])));
    largest = std::max(largest, std::fabs(double(expected[i])));
  }
  return worst / largest;
}

class FusedLinearKernelTest : public ::testing::TestWithParam<LinearCase> {};

TEST_P(FusedLinearKernelTest, MatchesReference) {
  EXPECT_LE(relativeErrorOf(GetParam(), "host"), 1e-5);
}

bool hostHasAvx512Bf16() { return __builtin_cpu_supports("avx512bf16"); }

bool hostHasAmxBf16() { return __builtin_cpu_supports("amx-bf16"); }

using cpu::PrefillMatmul;

/// Cases whose prefill rows take the bf16 products of `matmul`: ragged and
/// Qwen3-0.6B depths, every epilogue, the prologue gain, a pair of output
/// blocks cut short, 16..40 rows (AMX pads to 32).
std::vector<LinearCase> bf16PrefillCases(PrefillMatmul matmul) {
  const DType bf16 = DType::BF16;
  return {
      LinearCase{"plain", 64, 80, 13, bf16, false, false, false, false, true, matmul},
      LinearCase{"norm_gain_swiglu", 128, 48, 17, bf16, true, true, false, true, true, matmul},
      LinearCase{"norm_residual", 96, 64, 32, bf16, true, false, true, false, true, matmul},
      LinearCase{"qwen3_0_6b_down", 3072, 1024, 40, bf16, false, false, true, false, true, matmul},
      LinearCase{"qwen3_0_6b_qkv", 1024, 4096, 19, bf16, true, false, false, true, true, matmul}};
}

// The bf16 products round x (after the gain) to bf16, whose relative error is
// at most 2^-9: against the reference that rounds the same rows they agree to
// f32 summation order; against the exact reference they stay within 1% of
// the largest output (over K products of mixed signs) and do differ.
void expectBf16Prefill(PrefillMatmul matmul, bool packPerCall = false) {
  std::vector<LinearCase> cases = bf16PrefillCases(matmul);
  if (packPerCall)
    for (LinearCase &c : cases)
      c = perCall(c);
  for (const LinearCase &c : cases) {
    EXPECT_LE(relativeErrorOf(c, "host", true), 1e-5) << c.label;
    const double error = relativeErrorOf(c, "host");
    EXPECT_LE(error, 1e-2) << c.label;
    if (roundedRows(c) > 0) {
      EXPECT_GT(error, 1e-7) << c.label << ": the prefill did not round the activations";
    }
  }
  // Decode (one row) stays f32; the rows the tiles leave and prefills
  // shorter than AMX's 16 rows are rounded like the rest of the prefill.
  for (int64_t rows : {1, 5, 15}) {
    LinearCase c{"short", 256, 64, rows, DType::BF16, true, false, false, true, true, matmul};
    EXPECT_LE(relativeErrorOf(packPerCall ? perCall(c) : c, "host", true), 1e-5) << rows << " rows";
  }
}

// Every prefill register tile height the tuner may choose gives the same
// products (13 rows: full tiles and a remainder for each height).
TEST(FusedLinearKernel, ColumnBlockTilesOfEveryHeight) {
  for (int64_t tileRows = 1; tileRows <= 8; ++tileRows) {
    LinearCase c{"tile", 72, 96, 13, DType::BF16, true, true, true, true, true};
    c.tileRows = tileRows;
    EXPECT_LE(relativeErrorOf(c, "host"), 1e-5) << tileRows << " rows";
  }
}

// Packed per call: the same products from every tile height, the weight in
// one buffer or in parts (a part boundary inside a pair of output blocks),
// bf16 or f16 (each pair's halves widened apart).
TEST(FusedLinearKernel, PanelTilesOfEveryHeight) {
  for (DType weight : {DType::BF16, DType::F16})
    for (int64_t tileRows = 1; tileRows <= 8; ++tileRows) {
      LinearCase c{"tile", 72, 96, 13, weight, true, true, true, true, true};
      c.tileRows = tileRows;
      EXPECT_LE(relativeErrorOf(perCall(c), "host"), 1e-5) << tileRows << " rows";
      EXPECT_LE(relativeErrorOf(perCall(c, {96, 96}), "host"), 1e-5) << tileRows << " rows, parts";
    }
}

// The rows 8-row tiles leave run in tiles of 4, 2 and 1 rows (one pass over
// the weights each, where single rows took a pass per row): every remainder
// from 0 to 7 after two full tiles, f32 products and, where the host has
// them, vdpbf16ps ones, packed per call and at load.
TEST(FusedLinearKernel, LeftoverRowsRunInSmallerTiles) {
  EXPECT_EQ(cpu::detail::leftoverTileRows(8), (std::vector<int>{4, 2, 1}));
  EXPECT_EQ(cpu::detail::leftoverTileRows(6), (std::vector<int>{4, 2, 1}));
  EXPECT_EQ(cpu::detail::leftoverTileRows(2), (std::vector<int>{1}));
  EXPECT_TRUE(cpu::detail::leftoverTileRows(1).empty());
  std::vector<PrefillMatmul> matmuls = {PrefillMatmul::F32};
  if (hostHasAvx512Bf16())
    matmuls.push_back(PrefillMatmul::Avx512Bf16);
  for (PrefillMatmul matmul : matmuls)
    for (int64_t rows = 16; rows < 24; ++rows) {
      LinearCase c{"leftover", 72, 96, rows, DType::BF16, true, true, true, true, true, matmul};
      c.tileRows = 8;
      EXPECT_LE(relativeErrorOf(perCall(c), "host", true), 1e-5) << rows << " rows, per call";
      EXPECT_LE(relativeErrorOf(c, "host", true), 1e-5) << rows << " rows, at load";
    }
}

// Prompts of 2 to 7 rows read a per-call weight's rows in place, once for
// all their rows (vdpbf16ps on k pairs, no panels), rounded as the tiles
// round them: every epilogue, the prologue gain, a weight in parts,
// Qwen3-0.6B's q/k/v depth; 8 rows take the tiles again. A K whose pairs
// are not whole 16-pair vectors cannot.
TEST(FusedLinearKernel, Avx512Bf16FewRowPrefillsReadTheWeightInPlace) {
  if (!hostHasAvx512Bf16())
    GTEST_SKIP() << "this CPU has no AVX512-BF16";
  const DType bf16 = DType::BF16;
  const PrefillMatmul matmul = PrefillMatmul::Avx512Bf16;
  auto cases = [&](int64_t rows) {
    std::vector<LinearCase> list = {
        perCall(LinearCase{"plain", 64, 80, rows, bf16, false, false, false, false, false, matmul},
                {48, 32}),
        perCall(LinearCase{"norm_gain_swiglu", 128, 48, rows, bf16, true, true, false, true, false,
                           matmul}),
        perCall(LinearCase{"norm_residual", 96, 64, rows, bf16, true, false, true, false, false,
                           matmul})};
    if (rows == 2 || rows == 7)
      list.push_back(perCall(LinearCase{"qwen3_0_6b_qkv", 1024, 4096, rows, bf16, true, false,
                                        false, true, false, matmul},
                             {2048, 1024, 1024}));
    return list;
  };
  for (int64_t rows = 2; rows <= 8; ++rows)
    for (LinearCase c : cases(rows)) {
      c.inPlaceRows = FusedLinearKernel::kMaxInPlacePrefillRows;
      const FusedLinearKernel kernel = kernelFor(c);
      ASSERT_TRUE(kernel.inPlacePrefillFits()) << c.label;
      EXPECT_FALSE(functionText(cpu::fusedLinearSource(kernel), "case_in_place_rows7_4").empty());
      EXPECT_LE(relativeErrorOf(c, "host", true), 1e-5) << c.label << ", " << rows << " rows";
      if (rows == 3) {
        EXPECT_GT(relativeErrorOf(c, "host"), 1e-7) << c.label << ": the rows were not rounded";
      }
    }
  LinearCase ragged{"ragged", 72, 96, 3, bf16, true, true, true, true, false, matmul};
  EXPECT_FALSE(kernelFor(perCall(ragged)).inPlacePrefillFits());
}

TEST(FusedLinearKernel, Avx512Bf16PanelPrefillRoundsOnlyTheActivations) {
  if (!hostHasAvx512Bf16())
    GTEST_SKIP() << "this CPU has no AVX512-BF16";
  expectBf16Prefill(PrefillMatmul::Avx512Bf16, true);
}

TEST(FusedLinearKernel, Avx512Bf16PrefillRoundsOnlyTheActivations) {
  if (!hostHasAvx512Bf16())
    GTEST_SKIP() << "this CPU has no AVX512-BF16";
  expectBf16Prefill(PrefillMatmul::Avx512Bf16);
}

TEST(FusedLinearKernel, AmxPrefillRoundsOnlyTheActivations) {
  if (!hostHasAmxBf16())
    GTEST_SKIP() << "this CPU has no AMX-BF16";
  ASSERT_EQ(runtime::requestAmxState(), "");
  expectBf16Prefill(PrefillMatmul::Amx);
}

/// Compiles and links `c` for `cpu` and finds its entry, without running it
/// (the host may lack the target's instructions).
bool compilesAndLinks(const LinearCase &c, const cpu::CpuTarget &target) {
  std::vector<uint8_t> library = cpu::linkSharedObject(
      cpu::compileKernelsToObject(cpu::fusedLinearSource(kernelFor(c)), target));
  auto loaded = runtime::SharedLibrary::loadFromMemory("kernels", library.data(), library.size());
  return loaded->symbol("q3_kernel_case") != nullptr;
}

// The same source compiles for every supported CPU level and stays correct
// (no F16C below x86-64-v3: f16 weights are widened in software there).
TEST(FusedLinearKernel, CompilesForEveryCpuLevel) {
  const std::vector<LinearCase> cases = {
      {"f16", 40, 72, 3, DType::F16, true, true, true},
      {"bf16", 64, 64, 2, DType::BF16, true, false, true},
      {"bf16_blocks", 64, 64, 9, DType::BF16, true, false, true, true, true},
      perCall({"bf16", 64, 64, 9, DType::BF16, true, false, true, true}, {32, 32}),
      perCall({"bf16_decode", 64, 64, 1, DType::BF16, true, true, false, true}),
      {"f16_blocks", 40, 64, 9, DType::F16, true, true, true, true, true},
      perCall({"f16", 40, 64, 9, DType::F16, true, false, true, true}, {16, 48}),
      perCall({"f16_decode", 40, 64, 1, DType::F16, true, true, false, true})};
  for (const char *level : {"x86-64-v2", "x86-64-v3", "x86-64-v4"}) {
    const cpu::CpuTarget target = cpu::resolveCpuTarget(level);
    const bool runnable = runtime::missingCpuFeatures(target.requiredFeatures).empty();
    for (const LinearCase &c : cases) {
      if (runnable)
        EXPECT_LE(relativeErrorOf(c, level), 1e-5) << level << " " << c.label;
      else
        EXPECT_TRUE(compilesAndLinks(c, target)) << level << " " << c.label;
    }
  }
  EXPECT_THROW(cpu::resolveCpuTarget("pentium"), std::invalid_argument);
}

// The bf16 prefill instructions compile and link for CPUs that have them,
// whatever this host is (their execution tests below skip without them).
TEST(FusedLinearKernel, Avx512Bf16AndAmxKernelsCompileForTheirCpus) {
  LinearCase c{"blocks", 64, 64, 40, DType::BF16, true, false, true, true, true};
  c.matmul = cpu::PrefillMatmul::Avx512Bf16;
  EXPECT_TRUE(compilesAndLinks(c, cpu::resolveCpuTarget("znver4")));
  c.matmul = cpu::PrefillMatmul::Amx;
  EXPECT_TRUE(compilesAndLinks(c, cpu::resolveCpuTarget("sapphirerapids")));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, FusedLinearKernelTest,
    ::testing::Values(
        LinearCase{"plain_f32_decode", 64, 256, 1, DType::F32, false, false, false},
        LinearCase{"plain_bf16_prefill", 64, 200, 5, DType::BF16, false, false, false},
        LinearCase{"plain_f16", 48, 96, 3, DType::F16, false, false, false},
        LinearCase{"ragged_k_bf16", 40, 72, 2, DType::BF16, false, false, false},
        LinearCase{"norm_f32", 128, 130, 4, DType::F32, true, false, false},
        LinearCase{"norm_bf16_ragged", 72, 64, 3, DType::BF16, true, false, false},
        LinearCase{"norm_swiglu_f32", 64, 192, 3, DType::F32, true, true, false},
        LinearCase{"norm_swiglu_bf16", 96, 100, 1, DType::BF16, true, true, false},
        LinearCase{"residual_bf16", 192, 64, 4, DType::BF16, false, false, true},
        LinearCase{"residual_f16_decode", 128, 48, 1, DType::F16, false, false, true},
        LinearCase{"all_epilogues_bf16", 64, 64, 2, DType::BF16, true, true, true},
        LinearCase{"qwen3_0_6b_qkv_decode", 1024, 4096, 1, DType::BF16, true, false, false},
        LinearCase{"prologue_gain_norm_bf16", 72, 96, 3, DType::BF16, true, false, false, true},
        LinearCase{"prologue_gain_swiglu_f16", 64, 40, 2, DType::F16, true, true, false, true},
        LinearCase{"prologue_gain_qwen3_0_6b_qkv_prefill", 1024, 4096, 5, DType::BF16, true, false,
                   false, true},
        // Column blocks: 6-row prefill tiles plus leftover rows, an odd number
        // of output blocks (a pair cut short), every epilogue.
        LinearCase{"blocks_plain_decode", 64, 48, 1, DType::BF16, false, false, false, false, true},
        LinearCase{"blocks_plain_prefill", 40, 80, 13, DType::BF16, false, false, false, false,
                   true},
        LinearCase{"blocks_norm_gain", 72, 96, 7, DType::BF16, true, false, false, true, true},
        LinearCase{"blocks_swiglu", 64, 48, 6, DType::BF16, true, true, false, true, true},
        LinearCase{"blocks_residual_decode", 192, 64, 1, DType::BF16, false, false, true, false,
                   true},
        LinearCase{"blocks_all_epilogues", 64, 32, 8, DType::BF16, true, true, true, false, true},
        LinearCase{"blocks_qwen3_0_6b_mlp_prefill", 1024, 3072, 9, DType::BF16, true, true, false,
                   true, true},
        // Decode over many workgroups: its runs must not depend on the split.
        LinearCase{"blocks_qwen3_0_6b_mlp_decode", 1024, 3072, 1, DType::BF16, true, true, false,
                   true, true},
        LinearCase{"blocks_qwen3_0_6b_o_decode", 2048, 1040, 1, DType::BF16, false, false, true,
                   false, true},
        // Packed per call: the gather tail of K (40, 72: K/2 not a multiple
        // of 16), a pair cut short, every epilogue, decode and prefill, and
        // weights in parts: q/k/v, gate/up, and parts of one 16-row block
        // that split a pair of blocks.
        perCall(LinearCase{"plain_decode", 64, 48, 1, DType::BF16, false, false, false}),
        perCall(LinearCase{"plain_prefill", 40, 80, 13, DType::BF16, false, false, false}),
        perCall(LinearCase{"norm_gain", 72, 96, 7, DType::BF16, true, false, false, true}),
        perCall(LinearCase{"swiglu", 64, 48, 6, DType::BF16, true, true, false, true}),
        perCall(LinearCase{"residual_decode", 192, 64, 1, DType::BF16, false, false, true}),
        // Decode reads bf16 rows in (k, k+1) pairs over 64-wide steps and
        // the rest of K as it is: 64 + 2 x 16 + 8 (gain and norm too).
        perCall(LinearCase{"pairs_and_tails_decode", 104, 48, 1, DType::BF16, true, false, true,
                           true}),
        // Fewer accumulators per row (AVX2: rows side by side x accumulators
        // must fit 16 registers): each row's sum in another order, the same
        // whatever the streams (checked in relativeErrorOf).
        withAccumulators(perCall(LinearCase{"pairs_and_tails_decode", 104, 48, 1, DType::BF16, true,
                                            false, true, true}),
                         2),
        withAccumulators(perCall(LinearCase{"swiglu_decode", 104, 48, 1, DType::BF16, true, true,
                                            false, true}),
                         1),
        withAccumulators(LinearCase{"plain_f32_decode", 136, 72, 1, DType::F32, false, false, true},
                         1),
        withAccumulators(LinearCase{"f16_decode", 72, 40, 1, DType::F16, true, false, false}, 2),
        perCall(LinearCase{"all_epilogues", 64, 32, 8, DType::BF16, true, true, true}),
        perCall(LinearCase{"qwen3_0_6b_qkv_prefill", 1024, 4096, 9, DType::BF16, true, false, false,
                           true},
                {2048, 1024, 1024}),
        perCall(LinearCase{"qwen3_0_6b_qkv_decode", 1024, 4096, 1, DType::BF16, true, false, false,
                           true},
                {2048, 1024, 1024}),
        perCall(LinearCase{"qwen3_0_6b_mlp_prefill", 1024, 3072, 9, DType::BF16, true, true, false,
                           true},
                {3072, 3072}),
        perCall(LinearCase{"qwen3_0_6b_mlp_decode", 1024, 3072, 1, DType::BF16, true, true, false,
                           true},
                {3072, 3072}),
        perCall(LinearCase{"parts_split_a_pair", 40, 80, 13, DType::BF16, false, false, true},
                {16, 48, 16}),
        perCall(LinearCase{"parts_split_a_pair_decode", 40, 80, 1, DType::BF16, false, false, true},
                {16, 48, 16}),
        // f16 weights take the same layouts (f32 FMAs on the widened halves).
        LinearCase{"blocks_f16_prefill", 72, 96, 13, DType::F16, true, true, true, true, true},
        LinearCase{"blocks_f16_decode", 72, 96, 1, DType::F16, true, false, true, true, true},
        perCall(LinearCase{"f16_qwen3_0_6b_qkv_prefill", 1024, 4096, 9, DType::F16, true, false,
                           false, true},
                {2048, 1024, 1024}),
        perCall(LinearCase{"f16_qwen3_0_6b_mlp_decode", 1024, 3072, 1, DType::F16, true, true,
                           false, true},
                {3072, 3072}),
        perCall(LinearCase{"f16_gather_tail", 40, 80, 13, DType::F16, false, false, true},
                {16, 48, 16}),
        // Row-major kernels read a concatenated weight part by part too (f32
        // checkpoints: q/k/v and gate/up read where they are mapped): the 4 x 4
        // and 4-row tiles, the leftover rows and columns, decode.
        inParts(LinearCase{"f32_qwen3_0_6b_qkv_prefill", 1024, 4096, 9, DType::F32, true, false,
                           false, true},
                {2048, 1024, 1024}),
        inParts(LinearCase{"f32_qwen3_0_6b_mlp_decode", 1024, 3072, 1, DType::F32, true, true,
                           false, true},
                {3072, 3072}),
        inParts(LinearCase{"f32_swiglu_prefill", 40, 48, 7, DType::F32, true, true, true, true},
                {48, 48}),
        inParts(LinearCase{"f32_ragged", 40, 80, 13, DType::F32, false, false, true}, {16, 48, 16}),
        inParts(LinearCase{"bf16_odd_k", 41, 64, 6, DType::BF16, true, false, false, true},
                {32, 16, 16})),
    caseName);

/// Compiles one kernel's source for the host and returns its entry.
struct LoadedKernel {
  std::unique_ptr<runtime::SharedLibrary> library;
  runtime::KernelEntry entry;
};
LoadedKernel compileForHost(const std::string &source, const std::string &name) {
  std::vector<uint8_t> bytes =
      cpu::linkSharedObject(cpu::compileKernelsToObject(source, cpu::resolveCpuTarget("host")));
  LoadedKernel kernel{runtime::SharedLibrary::loadFromMemory(name, bytes.data(), bytes.size()),
                      nullptr};
  kernel.entry =
      reinterpret_cast<runtime::KernelEntry>(kernel.library->symbol("q3_kernel_" + name));
  return kernel;
}

double maxRelativeDiff(const std::vector<float> &actual, const std::vector<float> &expected) {
  if (actual.size() != expected.size())
    return std::nan("");
  double worst = 0.0, largest = 1e-30;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (!std::isfinite(actual[i]) || !std::isfinite(expected[i]))
      return std::nan(""); // fails any bound
    worst = std::max(worst, std::fabs(double(actual[i]) - double(expected[i])));
    largest = std::max(largest, std::fabs(double(expected[i])));
  }
  return worst / largest;
}

TEST(EmbeddingKernel, CopiesWidenedRows) {
  cpu::EmbeddingKernel kernel{"embed", 50, 24, DType::BF16};
  LoadedKernel loaded = compileForHost(cpu::embeddingSource(kernel), "embed");
  std::mt19937 rng(1);
  std::vector<float> table = randomValues(50 * 24, rng);
  std::vector<uint8_t> stored(table.size() * 2);
  runtime::convertFromF32(runtime::DType::BF16, table.data(), stored.data(), table.size());
  runtime::convertToF32(runtime::DType::BF16, stored.data(), table.data(), table.size());
  std::vector<int32_t> tokens = {0, 49, 7, 7};
  std::vector<float> out(tokens.size() * 24, NAN);
  void *buffers[] = {stored.data(), tokens.data(), out.data()};
  const int64_t bytes[] = {int64_t(stored.size()), int64_t(tokens.size() * 4),
                           int64_t(out.size() * 4)};
  const int64_t scalars[] = {4, 4, 4};
  loaded.entry(buffers, bytes, scalars, 0, 4);
  for (size_t t = 0; t < tokens.size(); ++t)
    for (int k = 0; k < 24; ++k)
      ASSERT_EQ(out[t * 24 + k], table[tokens[t] * 24 + k]) << t << "," << k;
}

/// The cache as the kernel stores it (f32, or bf16 bits) read back as f32.
std::vector<float> cacheAsF32(const std::vector<uint8_t> &stored, DType cache) {
  std::vector<float> values(stored.size() / runtime::dtypeSize(cache));
  runtime::convertToF32(cache, stored.data(), values.data(), values.size());
  return values;
}

/// Each value rounded to `cache` and back, as a cache of that type holds it.
/// `values` as a cache of `cache` holds them: rounded to nearest even, and
/// an f16 cache clamps to its finite range first.
std::vector<float> roundedTo(std::vector<float> values, DType cache) {
  if (cache == DType::F16) {
    for (float &v : values)
      v = runtime::f16ToFloat(runtime::floatToF16Saturating(v));
    return values;
  }
  std::vector<uint8_t> stored(values.size() * runtime::dtypeSize(cache));
  runtime::convertFromF32(cache, values.data(), stored.data(), values.size());
  return cacheAsF32(stored, cache);
}

/// The q/k-norm + RoPE + cache kernel of head_dim `d` (8: one element at a
/// time; 32 and 128: 16 lanes) with gains stored as `gains`, writing a cache
/// of `cache`, for `rows` rows from position `startPos`. The workgroups run
/// in one call and again in calls that start mid-row at each of `splits`
/// (as threads share a dispatch out): the outputs must be the same bits.
/// With `outliers`, some values and (through a large key gain) keys lie
/// beyond f16's range.
void checkQKNormRope(int64_t d, DType gains, DType cache = DType::F32, int64_t rows = 3,
                     int64_t startPos = 5, std::vector<int64_t> splits = {},
                     bool outliers = false) {
  SCOPED_TRACE(::testing::Message() << "head_dim " << d << ", cache " << runtime::dtypeName(cache)
                                    << ", rows " << rows << " from " << startPos);
  const int64_t qHeads = 4, kvHeads = 2, layers = 2, capacity = startPos + rows + 8;
  const int64_t layer = 1;
  cpu::QKNormRopeCacheKernel kernel{"qkrope", qHeads, kvHeads, d, gains, 1e-6, 1e4, cache};
  LoadedKernel loaded = compileForHost(cpu::qkNormRopeCacheSource(kernel), "qkrope");
  std::mt19937 rng(2);
  const int64_t width = (qHeads + 2 * kvHeads) * d;
  std::vector<float> qkv = randomValues(rows * width, rng, 2.0f);
  std::vector<float> qGain = randomValues(d, rng), kGain = randomValues(d, rng);
  if (outliers) {
    for (int64_t t = 0; t < rows; ++t)
      for (int64_t i = (qHeads + kvHeads) * d; i < width; i += 5)
        qkv[t * width + i] = (i % 2 ? -1 : 1) * 3e5f;
    std::fill_n(kGain.begin(), d / 2, 4e5f);
  }
  // Gains as stored, and their exact widening for the reference.
  std::vector<uint8_t> qGainStored(d * runtime::dtypeSize(gains)), kGainStored = qGainStored;
  runtime::convertFromF32(gains, qGain.data(), qGainStored.data(), d);
  runtime::convertFromF32(gains, kGain.data(), kGainStored.data(), d);
  runtime::convertToF32(gains, qGainStored.data(), qGain.data(), d);
  runtime::convertToF32(gains, kGainStored.data(), kGain.data(), d);
  const size_t cacheBytes = size_t(layers * capacity * kvHeads * d) * runtime::dtypeSize(cache);
  std::vector<uint8_t> kStored(cacheBytes, 0), vStored(cacheBytes, 0);
  std::vector<float> query(rows * qHeads * d, NAN);
  void *buffers[] = {qkv.data(),     qGainStored.data(), kGainStored.data(),
                     kStored.data(), vStored.data(),     query.data()};
  const int64_t bytes[] = {int64_t(qkv.size() * 4),     int64_t(qGainStored.size()),
                           int64_t(kGainStored.size()), int64_t(kStored.size()),
                           int64_t(vStored.size()),     int64_t(query.size() * 4)};
  const int64_t scalars[] = {rows, startPos + rows, capacity, layer, startPos};
  loaded.entry(buffers, bytes, scalars, 0, rows * qHeads);
  if (!splits.empty()) {
    const std::vector<float> whole = query;
    const std::vector<uint8_t> wholeK = kStored, wholeV = vStored;
    std::fill(query.begin(), query.end(), NAN);
    std::fill(kStored.begin(), kStored.end(), 0);
    std::fill(vStored.begin(), vStored.end(), 0);
    splits.push_back(rows * qHeads);
    int64_t begin = 0;
    for (int64_t end : splits) {
      loaded.entry(buffers, bytes, scalars, begin, end);
      begin = end;
    }
    EXPECT_EQ(std::memcmp(query.data(), whole.data(), query.size() * 4), 0)
        << "queries differ when the rows are shared out differently";
    EXPECT_EQ(kStored, wholeK) << "keys differ when the rows are shared out differently";
    EXPECT_EQ(vStored, wholeV);
  }

  // The reference: split, normalize each head, rotate.
  std::vector<float> q(rows * qHeads * d), k(rows * kvHeads * d), v(rows * kvHeads * d);
  for (int64_t t = 0; t < rows; ++t) {
    std::copy_n(qkv.begin() + t * width, qHeads * d, q.begin() + t * qHeads * d);
    std::copy_n(qkv.begin() + t * width + qHeads * d, kvHeads * d, k.begin() + t * kvHeads * d);
    std::copy_n(qkv.begin() + t * width + (qHeads + kvHeads) * d, kvHeads * d,
                v.begin() + t * kvHeads * d);
  }
  reference::rmsNorm(q.data(), qGain.data(), q.data(), rows * qHeads, d, 1e-6);
  reference::rmsNorm(k.data(), kGain.data(), k.data(), rows * kvHeads, d, 1e-6);
  reference::ropeRotateHalf(q.data(), rows, qHeads, d, startPos, 1e4);
  reference::ropeRotateHalf(k.data(), rows, kvHeads, d, startPos, 1e4);
  EXPECT_LE(maxRelativeDiff(query, q), 1e-6);
  // The cache is [layers][kvHeads][capacity][d]: head kv of row t lands at
  // position startPos + t of that head's run.
  const std::vector<float> kCache = cacheAsF32(kStored, cache), vCache = cacheAsF32(vStored, cache);
  std::vector<float> expectedK(kCache.size(), 0.0f), expectedV(vCache.size(), 0.0f);
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t kv = 0; kv < kvHeads; ++kv) {
      const int64_t at = ((layer * kvHeads + kv) * capacity + startPos + t) * d;
      std::copy_n(k.begin() + (t * kvHeads + kv) * d, d, expectedK.begin() + at);
      std::copy_n(v.begin() + (t * kvHeads + kv) * d, d, expectedV.begin() + at);
    }
  if (cache == DType::F32) {
    EXPECT_LE(maxRelativeDiff(kCache, expectedK), 1e-6) << "keys, or rows outside the step touched";
  } else {
    // bf16 keys: the kernel's f32 key, within 1e-6, rounded to nearest even;
    // so within one bf16 step (2^-8 relative) of the rounded reference.
    EXPECT_LE(maxRelativeDiff(kCache, roundedTo(expectedK, cache)), 1.0 / 256);
  }
  EXPECT_EQ(vCache, roundedTo(expectedV, cache))
      << "values are copied into the cache, rounded to its type to nearest even";
  if (outliers) {
    const float largest = cache == DType::F16 ? runtime::kF16Max : 1e5f;
    EXPECT_TRUE(
        std::all_of(kCache.begin(), kCache.end(), [](float x) { return std::isfinite(x); }));
    EXPECT_TRUE(
        std::all_of(vCache.begin(), vCache.end(), [](float x) { return std::isfinite(x); }));
    EXPECT_GE(*std::max_element(vCache.begin(), vCache.end()), largest);
    EXPECT_GE(*std::max_element(kCache.begin(), kCache.end()), largest);
  }
}

TEST(QKNormRopeCacheKernel, NormalizesRotatesAndWritesTheCache) {
  checkQKNormRope(8, DType::F32);
  checkQKNormRope(32, DType::F32);
  checkQKNormRope(128, DType::BF16); // Qwen3's head_dim and gain dtype
  checkQKNormRope(128, DType::F16);
  checkQKNormRope(8, DType::BF16, DType::BF16);
  checkQKNormRope(128, DType::BF16, DType::BF16);
  checkQKNormRope(8, DType::BF16, DType::F16); // one element at a time
  checkQKNormRope(128, DType::BF16, DType::F16);
}

// RoPE's angles are computed directly every 64 positions and rotated one
// position at a time between: near Qwen3's longest context and across
// several periods they stay as accurate as direct ones, whichever rows a
// call starts at.
// An f16 cache stores a key or value beyond f16's range as its largest
// finite value, not as an infinity that would turn attention into NaN.
TEST(QKNormRopeCacheKernel, F16CacheClampsOutliersToItsRange) {
  checkQKNormRope(128, DType::BF16, DType::F16, 3, 5, {}, true);
  checkQKNormRope(8, DType::BF16, DType::F16, 3, 5, {}, true); // one element at a time
  checkQKNormRope(128, DType::BF16, DType::F32, 3, 5, {}, true);
}

TEST(QKNormRopeCacheKernel, RotatesLongContextsAsAccuratelyOnEverySplit) {
  checkQKNormRope(128, DType::BF16, DType::F32, 200, 40700, {1, 4 * 63 + 2, 4 * 130 + 3});
  checkQKNormRope(8, DType::F32, DType::F32, 100, 1000, {4 * 37 + 1});
}

/// Runs an attention kernel of head_dim `d` (12: scalar path, 32 and 128:
/// vector path) over `visible` positions with `map` from query heads to KV
/// heads, for the last `rows` positions: 1 is a decode step (past 16
/// positions its softmax's vector loop, odd ones its score loop's single
/// position; it prefetches the value rows), more a prefill (the flash kernel's
/// blocks). Past the visible positions the cache holds NaNs. With
/// `bf16Prefill` (matmul = avx512bf16) the prefill multiplies bf16 inputs,
/// `rowSets` blocks of rows per workgroup. With `splits` > 1 decode splits
/// the positions in runs of at least `splitPositions`, and `threads` > 0
/// runs the workgroups on that many threads, one per chunk, `repeats` times.
/// Decode prefetches `prefetchBytes` ahead (cpu::kNoPrefetch: not at all).
/// `paths`: the source holds both paths or (as the tuners' do) the one run.
/// Decode sums `valueAccumulators` value columns per head each pass. Returns
/// the kernel's output.
std::vector<float>
checkAttention(int64_t d, int64_t visible = 7, std::vector<int64_t> map = {0, 0, 0, 1, 1, 1},
               int64_t rows = 3, DType cache = DType::F32, bool bf16Prefill = false,
               int64_t rowSets = cpu::AttentionKernel::kBf16PrefillRowSets, int64_t splits = 1,
               int64_t splitPositions = 16, int threads = 0, int repeats = 1,
               int64_t streams = cpu::kDefaultDecodeStreams,
               int64_t prefetchBytes = cpu::kDefaultPrefetchBytes,
               cpu::AttentionKernel::Paths paths = cpu::AttentionKernel::Paths::PrefillAndDecode,
               int64_t valueAccumulators = 8) {
  const int64_t qHeads = int64_t(map.size()), capacity = std::max<int64_t>(48, visible + 5);
  const int64_t kvHeads = *std::max_element(map.begin(), map.end()) + 1;
  cpu::AttentionKernel kernel{"attn", qHeads, kvHeads, d, map, 1.0 / std::sqrt(double(d)), cache};
  kernel.bf16Prefill = bf16Prefill;
  kernel.prefillRowSets = bf16Prefill ? rowSets : 1;
  kernel.decodeSplits = splits;
  kernel.splitPositions = splitPositions;
  kernel.decodeStreams = streams;
  kernel.prefetchBytes = prefetchBytes;
  kernel.paths = paths;
  kernel.decodeAccumulators = valueAccumulators;
  // The attention checks run each kernel on many contexts: compile each once.
  static std::map<std::string, LoadedKernel> compiled;
  const std::string source = cpu::attentionSource(kernel);
  auto found = compiled.find(source);
  if (found == compiled.end())
    found = compiled.emplace(source, compileForHost(source, "attn")).first;
  const LoadedKernel &loaded = found->second;
  std::mt19937 rng(3);
  std::vector<float> q = randomValues(rows * qHeads * d, rng, 2.0f);
  // The reference reads [visible][kvHeads][d]; the kernel one layer of the
  // cache, [kvHeads][capacity][d], with garbage past the visible positions.
  // A bf16 cache holds the keys and values rounded; the reference reads the
  // same rounded values.
  std::vector<float> keys = roundedTo(randomValues(visible * kvHeads * d, rng, 2.0f), cache);
  std::vector<float> values = roundedTo(randomValues(visible * kvHeads * d, rng), cache);
  std::vector<float> keyCache(kvHeads * capacity * d, NAN), valueCache = keyCache;
  for (int64_t s = 0; s < visible; ++s)
    for (int64_t kv = 0; kv < kvHeads; ++kv) {
      std::copy_n(keys.begin() + (s * kvHeads + kv) * d, d,
                  keyCache.begin() + (kv * capacity + s) * d);
      std::copy_n(values.begin() + (s * kvHeads + kv) * d, d,
                  valueCache.begin() + (kv * capacity + s) * d);
    }
  std::vector<uint8_t> keysStored(keyCache.size() * runtime::dtypeSize(cache));
  std::vector<uint8_t> valuesStored(keysStored.size());
  runtime::convertFromF32(cache, keyCache.data(), keysStored.data(), keyCache.size());
  runtime::convertFromF32(cache, valueCache.data(), valuesStored.data(), valueCache.size());
  std::vector<float> out(q.size(), NAN), expected(q.size());
  // Decode splits' workspace: zeroed, as the runtime allocates it. Then each
  // thread's own scratch (the bf16 prefill's rounded rows), filled with
  // garbage: a kernel must not read what it did not write there.
  std::vector<uint8_t> workspace(size_t(kernel.workspaceBytes()), 0);
  std::vector<void *> shared = {q.data(), keysStored.data(), valuesStored.data(), out.data()};
  std::vector<int64_t> bytes = {int64_t(q.size() * 4), int64_t(keysStored.size()),
                                int64_t(valuesStored.size()), int64_t(out.size() * 4)};
  if (kernel.decodeSplits > 1) {
    shared.push_back(workspace.data());
    bytes.push_back(int64_t(workspace.size()));
  }
  const int64_t scratchBytes = kernel.threadScratch().bytesFor(rows);
  bytes.push_back(scratchBytes);
  std::unique_ptr<runtime::ThreadPool> pool;
  if (threads > 0)
    pool = std::make_unique<runtime::ThreadPool>(threads);
  const size_t slots = pool ? size_t(pool->size()) : 1;
  std::vector<std::vector<uint8_t>> scratch(slots,
                                            std::vector<uint8_t>(size_t(scratchBytes), 0xff));
  std::vector<std::vector<void *>> buffersOf(slots, shared);
  for (size_t slot = 0; slot < slots; ++slot)
    buffersOf[slot].push_back(scratch[slot].data());
  const int64_t scalars[] = {rows, visible, capacity};
  const int64_t workgroups = rows * kernel.workgroupsPerRow(), split = workgroups / 2 + 1;
  // Each repeat starts from a NaN output: a dispatch that found the split
  // counters as the last one left them (not back at 0) would leave some unmerged.
  for (int repeat = 0; repeat < repeats; ++repeat) {
    std::fill(out.begin(), out.end(), NAN);
    if (pool) {
      pool->parallelFor(
          workgroups,
          [&](int64_t begin, int64_t end) {
            loaded.entry(buffersOf[size_t(runtime::ThreadPool::currentSlot())].data(), bytes.data(),
                         scalars, begin, end);
          },
          int(workgroups));
    } else {
      // Two calls over disjoint workgroup ranges, as two threads would run it.
      loaded.entry(buffersOf[0].data(), bytes.data(), scalars, 0, split);
      loaded.entry(buffersOf[0].data(), bytes.data(), scalars, split, workgroups);
    }
  }
  reference::causalAttention(q.data(), keys.data(), values.data(), expected.data(), rows, visible,
                             qHeads, kvHeads, d, 1.0 / std::sqrt(double(d)), map);
  if (!bf16Prefill || rows == 1) {
    EXPECT_LE(maxRelativeDiff(out, expected), 1e-5)
        << "head_dim " << d << ", " << visible << " positions, " << rows << " rows, "
        << kernel.headsPerWorkgroup() << " heads per workgroup, " << splits << " decode splits";
    return out;
  }
  // The kernel rounds each probability against the running maximum of its
  // key block, the reference against the row's: a probability may round the
  // other way (2^-9 relative), so it is held to the rounded reference
  // loosely, and to being several times nearer it than to the exact one.
  std::vector<float> rounded(q.size());
  reference::causalAttention(q.data(), keys.data(), values.data(), rounded.data(), rows, visible,
                             qHeads, kvHeads, d, 1.0 / std::sqrt(double(d)), map, true);
  const double toRounded = maxRelativeDiff(out, rounded), toExact = maxRelativeDiff(out, expected);
  EXPECT_LE(toRounded, 2e-3) << "head_dim " << d << ", " << visible << " positions, " << rows
                             << " rows, " << kernel.headsPerWorkgroup() << " heads per workgroup, "
                             << rowSets << " row sets";
  EXPECT_LE(toRounded, 0.25 * toExact) << "to the exact reference: " << toExact;
  return out;
}

TEST(AttentionKernel, MatchesReferenceWithGroupedHeads) {
  checkAttention(12);
  checkAttention(32);
  checkAttention(128); // Qwen3's head_dim
  checkAttention(128, 40);
  checkAttention(12, 35);
}

TEST(AttentionKernel, DecodesOneRowOverTheCache) {
  // Decode goes through the positions 512 at a time (softmax 16 at a time):
  // part of one block, one whole block, whole blocks and a last partial one.
  for (int64_t visible : {1, 2, 3, 16, 17, 40, 512, 513, 1100})
    for (int64_t d : {12, 32, 128})
      for (const std::vector<int64_t> &map : {std::vector<int64_t>{0, 0, 1, 1}, {0, 1}})
        checkAttention(d, visible, map, 1);
}

// Decode reads each 512-position block's keys and values as 1, 2 or 4 runs
// side by side (q3.lowering's decode_streams), then the positions the runs
// leave one at a time: blocks shorter than the runs, runs of one position,
// positions left over, whole and partial blocks; with splits too.
TEST(AttentionKernel, DecodesInRunsSideBySide) {
  const std::vector<int64_t> gqa2 = {0, 0, 1, 1}, mha = {0, 1};
  for (int64_t streams : {1, 2, 4})
    for (int64_t visible : {1, 2, 3, 4, 5, 7, 8, 9, 63, 512, 515, 1100, 2051})
      for (const auto &map : {gqa2, mha})
        checkAttention(128, visible, map, 1, DType::F32, false, 1, 1, 16, 0, 1, streams);
  for (int64_t streams : {1, 2})
    for (DType cache : {DType::BF16, DType::F16})
      checkAttention(64, 700, gqa2, 1, cache, false, 1, 3, 16, 0, 2, streams);
}

// prefetch_bytes = none: decode's loops issue no prefetch and compute the
// same, with runs side by side or not, split or not.
TEST(AttentionKernel, DecodesWithoutSoftwarePrefetch) {
  const std::vector<int64_t> gqa2 = {0, 0, 1, 1};
  for (int64_t streams : {1, 4})
    for (int64_t visible : {1, 17, 515, 1100})
      checkAttention(128, visible, gqa2, 1, DType::F32, false, 1, 1, 16, 0, 1, streams,
                     cpu::kNoPrefetch);
  checkAttention(64, 700, gqa2, 1, DType::BF16, false, 1, 3, 16, 0, 2, 2, cpu::kNoPrefetch);
  cpu::AttentionKernel kernel{"attn", 4, 2, 128, gqa2, 1.0, DType::F32};
  EXPECT_NE(functionText(cpu::attentionSource(kernel), "attn_decode").find("memref.prefetch"),
            std::string::npos);
  kernel.prefetchBytes = cpu::kNoPrefetch;
  EXPECT_EQ(functionText(cpu::attentionSource(kernel), "attn_decode").find("memref.prefetch"),
            std::string::npos);
}

// Decode sums each head's 16-lane value columns in passes of
// decode_accumulators columns (q3.lowering): every grouping, a last shorter
// pass included, adds the same products in the same order, so the output is
// the reference's and bit for bit the same whatever the passes; with runs
// side by side, splits and a 16-bit cache too.
TEST(AttentionKernel, DecodesTheValuesInPassesOfColumns) {
  using Paths = cpu::AttentionKernel::Paths;
  const std::vector<int64_t> gqa2 = {0, 0, 1, 1}, mha = {0, 1};
  for (int64_t visible : {1, 17, 515})
    for (const auto &map : {gqa2, mha}) {
      std::vector<float> outputs[4];
      const int64_t counts[] = {1, 2, 3, 8};
      for (int i = 0; i < 4; ++i)
        outputs[i] = checkAttention(128, visible, map, 1, DType::F32, false, 1, 1, 16, 0, 1,
                                    cpu::kDefaultDecodeStreams, cpu::kDefaultPrefetchBytes,
                                    Paths::DecodeOnly, counts[i]);
      for (int i = 1; i < 4; ++i)
        EXPECT_EQ(0, std::memcmp(outputs[0].data(), outputs[i].data(), outputs[0].size() * 4))
            << counts[i] << " columns per pass against 1, " << visible << " positions";
    }
  for (int64_t accumulators : {1, 4})
    checkAttention(64, 700, gqa2, 1, DType::F16, false, 1, 3, 16, 0, 2, 2,
                   cpu::kDefaultPrefetchBytes, Paths::DecodeOnly, accumulators);
}

// The tuners compile the path they measure alone (AttentionKernel::paths):
// its function and rows are the model kernel's, the other path's are not in
// the source.
TEST(AttentionKernel, RunsOnePathAlone) {
  using Paths = cpu::AttentionKernel::Paths;
  const std::vector<int64_t> gqa2 = {0, 0, 1, 1};
  for (int64_t splits : {1, 3})
    for (int64_t visible : {1, 17, 700})
      checkAttention(128, visible, gqa2, 1, DType::F32, false, 1, splits, 16, 0, 2,
                     cpu::kDefaultDecodeStreams, cpu::kNoPrefetch, Paths::DecodeOnly);
  for (bool bf16 : {false, true})
    for (int64_t rows : {2, 9, 40})
      if (!bf16 || hostHasAvx512Bf16()) // the bf16 flash kernel runs vdpbf16ps
        checkAttention(128, rows + 21, gqa2, rows, DType::F32, bf16, 2, 1, 16, 0, 1,
                       cpu::kDefaultDecodeStreams, cpu::kDefaultPrefetchBytes, Paths::PrefillOnly);
  cpu::AttentionKernel kernel{"attn", 4, 2, 128, gqa2, 1.0, DType::F32};
  kernel.bf16Prefill = true;
  kernel.decodeSplits = 2;
  auto functions = [&](Paths paths) {
    kernel.paths = paths;
    const std::string source = cpu::attentionSource(kernel);
    return std::tuple(source.find("@attn_decode(") != std::string::npos,
                      source.find("@attn_flash_bf16(") != std::string::npos);
  };
  EXPECT_EQ(functions(Paths::PrefillAndDecode), std::tuple(true, true));
  EXPECT_EQ(functions(Paths::DecodeOnly), std::tuple(true, false));
  EXPECT_EQ(functions(Paths::PrefillOnly), std::tuple(false, true));
  cpu::AttentionKernel scalar{"attn", 4, 2, 12, gqa2, 1.0, DType::F32};
  scalar.paths = Paths::DecodeOnly;
  EXPECT_THROW(cpu::attentionSource(scalar), std::invalid_argument);
}

// Decode splits (q3.lowering's fourth attention tile entry): a head group's
// positions run in up to `splits` workgroups of at least 16 positions here
// (512 in compiled models); the last to arrive merges their records. One
// workgroup (up to 16 positions), fewer runs than splits (17-47), every
// split, runs that end inside a 512-position block, head groups of 1, 2, 4
// and 8 heads on one or two KV heads, bf16 and f16 caches; on two calls
// (twice in a row) or on four threads claiming single workgroups in any
// order (ten times in a row): the counters are back at 0 after each dispatch.
TEST(AttentionKernel, DecodeSplitsThePositionsAndMerges) {
  const std::vector<int64_t> gqa2 = {0, 0, 1, 1}, mha = {0, 1}, mqa = {0, 0, 0, 0},
                             gqa8 = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
  for (int64_t splits : {2, 3, 4})
    for (int64_t visible : {1, 16, 17, 47, 64, 100, 1100})
      for (const auto &map : {gqa2, mha, mqa, gqa8})
        checkAttention(128, visible, map, 1, DType::F32, false, 1, splits, 16, 0, 2);
  for (DType cache : {DType::BF16, DType::F16})
    checkAttention(128, 200, gqa2, 1, cache, false, 1, 4, 16, 0, 2);
  for (int64_t d : {16, 32, 64, 256})
    checkAttention(d, 90, gqa2, 1, DType::F32, false, 1, 3, 16, 0, 2);
  // Prefill runs as without splits (split 0 of each head group leads the blocks).
  for (int64_t rows : {2, 9, 17})
    checkAttention(128, rows + 21, gqa2, rows, DType::F32, false, 1, 3, 16, 0, 2);
  for (int repeat = 0; repeat < 2; ++repeat)
    for (int64_t splits : {int64_t(2), int64_t(8), cpu::AttentionKernel::kMaxDecodeSplits})
      checkAttention(128, 700, gqa2, 1, DType::F32, false, 1, splits, 16, 4, 10);
  cpu::AttentionKernel shape{"attn", 4, 2, 128, gqa2};
  EXPECT_EQ(shape.workspaceBytes(), 0) << "no workspace without splits";
  shape.decodeSplits = 3;
  EXPECT_EQ(shape.workgroupsPerRow(), 6);
  EXPECT_EQ(shape.workspaceBytes(), 2 * 64 + 2 * 3 * 2 * (16 + 128) * 4)
      << "a counter line per head group, a record per head group, split and head";
}

// --kv-cache=bf16: keys and values are read as bf16 and widened exactly.
TEST(AttentionKernel, ReadsABf16Cache) {
  for (int64_t rows : {1, 3})
    for (int64_t d : {12, 128})
      checkAttention(d, 33, {0, 0, 1, 1}, rows, DType::BF16);
}

// --kv-cache=f16: read as f16 and widened exactly (vcvtph2ps).
TEST(AttentionKernel, ReadsAnF16Cache) {
  for (int64_t rows : {1, 3})
    for (int64_t d : {12, 128})
      checkAttention(d, 33, {0, 0, 1, 1}, rows, DType::F16);
}

// A prefill runs in blocks of 16 query vectors (8 rows of a head pair, 16
// rows of one head) over keys 16 positions at a time: full and partial row
// blocks, several key blocks, cached positions before the rows (a chunked
// prefill), and workgroup ranges that split a block (checkAttention's two calls).
TEST(AttentionKernel, PrefillsInBlocksOfRowsAndKeys) {
  const std::vector<int64_t> gqa2 = {0, 0, 1, 1}, mha = {0, 1, 2};
  for (const auto &map : {gqa2, mha})
    for (int64_t rows : {2, 8, 9, 16, 17, 40})
      for (int64_t cached : {0, 5, 21})
        checkAttention(32, rows + cached, map, rows);
  for (DType cache : {DType::F32, DType::BF16, DType::F16})
    checkAttention(128, 70, gqa2, 37, cache);
  for (int64_t d : {16, 64, 256}) // head sizes of one, four and sixteen feature groups
    checkAttention(d, 45, gqa2, 19);
  // Value tiles whose vectors are no power of two (48: 4 lanes x 3, 80: 2 x
  // 5, 192: 1 x 12) or split into column groups (288: 2 groups of 9 vectors).
  for (int64_t d : {48, 80, 192, 288})
    checkAttention(d, 45, gqa2, 19);
}

// A GQA group of 4, 5 or 8 query heads (Qwen3-4B/8B, 14B, 32B) runs in one workgroup,
// which reads each key and value row once for all of them: decode over one
// and several position blocks, prefills of 4 / 2 rows per block with cached
// positions before them, and every cache type.
TEST(AttentionKernel, RunsAWholeHeadGroupPerWorkgroup) {
  const std::vector<int64_t> gqa4 = {0, 0, 0, 0, 1, 1, 1, 1};
  const std::vector<int64_t> gqa8 = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
  for (const auto &map : {gqa4, gqa8}) {
    cpu::AttentionKernel shape{"attn", int64_t(map.size()), 2, 128, map};
    EXPECT_EQ(shape.headsPerWorkgroup(), int64_t(map.size()) / 2);
    EXPECT_EQ(shape.prefillBlockRows(), 16 / shape.headsPerWorkgroup());
    for (int64_t visible : {1, 17, 513})
      checkAttention(128, visible, map, 1);
    for (int64_t rows : {2, 5, 9, 37})
      for (int64_t cached : {0, 21})
        checkAttention(128, rows + cached, map, rows);
    for (DType cache : {DType::BF16, DType::F16})
      for (int64_t rows : {1, 9})
        checkAttention(128, 40, map, rows, cache);
  }
  checkAttention(32, 30, gqa4, 7);
  // Groups that leave one of the 16 lanes idle: 5 (Qwen3-14B) and 3 heads,
  // 3 and 5 rows per prefill block.
  const std::vector<int64_t> gqa5 = {0, 0, 0, 0, 0, 1, 1, 1, 1, 1}, gqa3 = {0, 0, 0, 1, 1, 1};
  for (const auto &map : {gqa5, gqa3}) {
    cpu::AttentionKernel shape{"attn", int64_t(map.size()), 2, 128, map};
    EXPECT_EQ(shape.headsPerWorkgroup(), int64_t(map.size()) / 2);
    for (int64_t visible : {1, 17, 513})
      checkAttention(128, visible, map, 1);
    for (int64_t rows : {2, 3, 4, 7, 16, 37})
      checkAttention(128, rows + 21, map, rows);
    checkAttention(128, 40, map, 9, DType::BF16);
  }
}

// matmul = avx512bf16: the flash prefill multiplies bf16 pairs (vdpbf16ps)
// and computes like the reference that rounds the same inputs; decode stays
// f32. Partial row and key blocks, cached positions, GQA groups of 2, 4 and
// 5, MHA, every cache type, head sizes of one to eight 32-feature vectors,
// and workgroups that run one to four blocks of rows (the sets share each
// key block's copies; a set past the rows stores nothing).
TEST(AttentionKernel, PrefillsWithBf16Products) {
  if (!hostHasAvx512Bf16())
    GTEST_SKIP() << "this CPU has no AVX512-BF16";
  const std::vector<int64_t> gqa2 = {0, 0, 1, 1}, mha = {0, 1, 2}, gqa4 = {0, 0, 0, 0, 1, 1, 1, 1},
                             gqa5 = {0, 0, 0, 0, 0, 1, 1, 1, 1, 1};
  for (const auto &map : {gqa2, mha, gqa4, gqa5})
    for (int64_t rows : {2, 9, 17, 40})
      for (int64_t cached : {0, 21})
        checkAttention(128, rows + cached, map, rows, DType::F32, true);
  for (DType cache : {DType::BF16, DType::F16})
    checkAttention(128, 70, gqa2, 37, cache, true);
  for (int64_t d : {32, 64, 96, 256, 320}) // 96: 2 lanes x 6 vectors; 320: 2 groups of 10
    checkAttention(d, 45, gqa2, 19, DType::F32, true);
  checkAttention(128, 40, gqa2, 1, DType::F32, true);
  for (int64_t sets : {int64_t(1), int64_t(3), cpu::AttentionKernel::kMaxPrefillRowSets})
    for (int64_t rows : {5, 17, 40})
      checkAttention(128, rows + 21, gqa2, rows, DType::F32, true, sets);
  // A call's workgroups share the key blocks they rounded, up to
  // roundedRowsPerCall positions (1024 for head_dim 128, 512 for 256); the
  // blocks past those are rounded by each workgroup. Prompts that end
  // inside, at and past that many positions, and a bf16 cache.
  for (int64_t visible : {1000, 1024, 1100})
    checkAttention(128, visible, gqa2, 37, DType::F32, true);
  checkAttention(128, 1100, gqa4, 40, DType::BF16, true, 3);
  checkAttention(256, 600, gqa2, 19, DType::F32, true);
}

// Aligned runs of query heads on one KV head run in one workgroup (the
// largest run of 8, 5, 4, 3 or 2 heads that divides them); other maps (MHA,
// or pairs split across KV heads) one head per workgroup.
TEST(AttentionKernel, GroupsQueryHeadsThatShareAKvHead) {
  const std::vector<int64_t> gqa2 = {0, 0, 1, 1}, mqa = {0, 0, 0, 0, 0, 0}, mha = {0, 1, 2},
                             gqa3 = {0, 0, 0, 1, 1, 1}, custom = {1, 1, 0, 0},
                             split = {0, 0, 0, 1, 1, 1, 1, 1};
  for (int64_t visible : {3, 8, 33})
    for (const auto &map : {gqa2, mqa, mha, gqa3, custom, split})
      checkAttention(32, visible, map);
  EXPECT_EQ((cpu::AttentionKernel{"a", 4, 2, 128, gqa2, 1.0}.headsPerWorkgroup()), 2);
  EXPECT_EQ((cpu::AttentionKernel{"a", 6, 1, 128, mqa, 1.0}.headsPerWorkgroup()), 3);
  EXPECT_EQ((cpu::AttentionKernel{"a", 3, 3, 128, mha, 1.0}.headsPerWorkgroup()), 1);
  EXPECT_EQ((cpu::AttentionKernel{"a", 6, 2, 128, gqa3, 1.0}.headsPerWorkgroup()), 3);
  EXPECT_EQ((cpu::AttentionKernel{"a", 8, 2, 128, split, 1.0}.headsPerWorkgroup()), 1);
  EXPECT_EQ((cpu::AttentionKernel{"a", 4, 2, 24, gqa2, 1.0}.headsPerWorkgroup()), 1);
  EXPECT_EQ((cpu::AttentionKernel{"a", 4, 2, 128, gqa2, 1.0}.prefillBlockRows()), 8);
  EXPECT_EQ((cpu::AttentionKernel{"a", 3, 3, 128, mha, 1.0}.prefillBlockRows()), 16);
  EXPECT_EQ((cpu::AttentionKernel{"a", 4, 2, 24, gqa2, 1.0}.prefillBlockRows()), 1);
}

} // namespace
} // namespace q3::testing
