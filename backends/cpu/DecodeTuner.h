//===- DecodeTuner.h - measure how finely decode splits its products ------===//
//
// q3c compile --tune, decode: a one-row product streams its weights once, so
// its speed is the machine's memory path, and how the runtime cuts it into
// pieces per thread (each piece starts a new stream the prefetch has not
// reached; too few leave a thread idle at the end) moved decode by 10% on
// one AMD family. The tuner runs the model's SwiGLU product on one row with
// all the threads the compiled model will have, over weight copies larger
// than the last-level cache, for each candidate split in interleaved rounds
// (a shared machine's bandwidth drifts over seconds), and keeps the default
// unless another split is faster by more than the rounds' noise allows.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "backends/cpu/CpuTarget.h"
#include "backends/cpu/Tuner.h"

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <string>
#include <vector>

namespace q3::cpu {

struct DecodeChunkRate {
  int64_t chunks = 0;      // pieces per thread
  double gbPerSecond = 0;  // weight bytes streamed per second, 1e9: median of the rounds
};

struct DecodeTuning {
  int64_t chunks = 0; // chosen
  std::vector<DecodeChunkRate> measured;
  int threads = 1;
  double seconds = 0; // spent measuring (0 when cached)
  bool cached = false;
  std::string cachePath; // where the result is (or would be) kept; "" if none
};

/// The pieces per thread `level` measures (the default among them).
std::vector<int64_t> decodeChunkCandidates(TuneLevel level);

/// Measures the candidates on `threads` threads with the SwiGLU product of
/// `hidden` x `intermediate`, or returns the cached result for the same CPU,
/// shape, threads, level and kernel source.
DecodeTuning tuneDecode(const CpuTarget &target, int64_t hidden, int64_t intermediate,
                        TuneLevel level, int threads);

/// The candidate chosen from `measured`: the fastest, unless the default is
/// within `kDecodeTieFraction` of it.
int64_t chooseDecodeChunks(const std::vector<DecodeChunkRate> &measured);

/// A faster split must beat the default by this fraction to replace it.
inline constexpr double kDecodeTieFraction = 0.03;

/// Adds `tuning` to the module's q3.tuning (decode_chunks, which
/// cpu-set-chunking reads, and the measured rates).
void recordDecodeTuning(mlir::ModuleOp module, const DecodeTuning &tuning);

} // namespace q3::cpu
