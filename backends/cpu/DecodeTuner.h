//===- DecodeTuner.h - measure how decode best streams its products -------===//
//
// q3c compile --tune, decode: a one-row product streams its weights once, so
// its speed is the machine's memory path, and how the runtime cuts it into
// pieces per thread (each piece starts a new stream the prefetch has not
// reached; too few leave a thread idle at the end) moved decode by 10% on
// one AMD family; how far ahead its loops prefetch depends on the memory's
// latency and bandwidth (and whether to prefetch at all: on one AMD EPYC
// family 26 VM the products decoded 15% faster with no prefetch); how many runs of it a core reads
// side by side (decode_streams) on how many streams its prefetchers follow well: four read 10%
// faster than one on one AMD EPYC family 26 host and 10% slower on another. The tuner runs a
// layer's products as decode does (the gate and up weight, then the down weight, one row each) with
// all the threads the compiled model will have, over 512 MiB of layers (the rates and their ranking
// change well past the last-level cache), in interleaved rounds (a shared machine's bandwidth
// drifts over seconds), and keeps each default unless another is faster by more than the rounds'
// noise allows. It measures in two stages: the splits and the prefetch distances at the default
// stream count, then the stream counts at the split chosen, each with the distance chosen and
// with one other, since how many runs a core reads well side by side depends on whether its
// loops prefetch.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "backends/cpu/CpuTarget.h"
#include "backends/cpu/ForeignLoad.h"
#include "backends/cpu/Tuner.h"
#include "backends/cpu/TuningCache.h"

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <string>
#include <vector>

namespace q3::cpu {

/// The distance the tuner's ratios are taken against, which another must
/// beat clearly: no software prefetch. On both AMD EPYC families measured
/// the model decoded 5-15% faster without prefetch while the tuner's layers
/// often measured it only 1.02-1.08x faster, so with 8 KiB as the baseline some
/// compiles kept a distance that cost; where prefetch paid (the first
/// 2-core machine: 22.7-25 against 15.6 GB/s) it did by far more than the
/// margin. The default of untuned builds stays kDefaultPrefetchBytes.
inline constexpr int64_t kBaselineDecodePrefetchBytes = kNoPrefetch;

/// One way to run decode's products: pieces per thread, prefetch distance,
/// rows read side by side.
struct DecodeSetting {
  int64_t chunks = 0;        // pieces per thread
  int64_t prefetchBytes = 0; // how far ahead the loop prefetches its weights (kNoPrefetch: not)
  int64_t streams = kDefaultDecodeStreams; // runs read side by side (decode_streams)

  bool operator==(const DecodeSetting &other) const {
    return chunks == other.chunks && prefetchBytes == other.prefetchBytes &&
           streams == other.streams;
  }
};

struct DecodeRate {
  DecodeSetting setting;
  double gbPerSecond = 0; // weight bytes streamed per second, 1e9: median of the rounds
  /// The median over the rounds of this setting's rate over the default
  /// setting's in the same round (1 for the default): the rounds run the
  /// candidates back to back, so a ratio within one round is not moved by
  /// the bandwidth's drift from round to round as much as the rates are.
  double relative = 1;
  /// The lower quartile of those ratios: a setting replaces the default only
  /// when it was faster in at least three rounds of four.
  double relativeLow = 1;
  /// The median over the rounds of this setting's rate over a plain read's
  /// of the same weights in the same round: the bandwidth probe's loop
  /// (runtime::readLines), cut into the same pieces per thread. How near the
  /// products come to what the memory gives a loop that only reads.
  double ofPlainRead = 0;
};

struct DecodeTuning {
  DecodeSetting chosen;
  /// The first stage: the splits and the prefetch distances.
  std::vector<DecodeRate> measured;
  /// The second stage: the stream counts, all at `streamsMeasuredAt`'s split
  /// (chosen in the first stage), at its distance and at one other
  /// (decodeStreamCandidates), relative to `streamsMeasuredAt`. Empty when
  /// --decode-streams gave the count.
  std::vector<DecodeRate> streamRates;
  DecodeSetting streamsMeasuredAt;
  /// The split the prefetch distances and stream counts were measured at:
  /// the default, or the one --decode-chunks gave.
  int64_t distanceChunks = 0;
  /// The stream count the splits and distances were measured at, the
  /// second stage's baseline: the default, or the one --decode-streams gave.
  int64_t baseStreams = kDefaultDecodeStreams;
  int threads = 1;
  /// The plain read's median GB/s in the rounds that measured the chosen
  /// setting (the second stage's, or the first's when --decode-streams gave
  /// the count; see DecodeRate::ofPlainRead).
  double plainReadGbPerSecond = 0;
  TuningProvenance provenance;
};

/// The rate of `tuning.chosen` where it was measured (the stream stage, or
/// the first stage when --decode-streams gave the count), or nullptr.
const DecodeRate *chosenRate(const DecodeTuning &tuning);

/// The key of a second-stage rate in q3.tuning's decode_streams_gb_s:
/// "streams_N" at the first stage's distance, "streams_N_prefetch_none" or
/// "streams_N_prefetch_BYTES" at the other.
std::string streamRateKey(const DecodeTuning &tuning, const DecodeSetting &setting);
/// "none" (no software prefetch) or "N bytes".
std::string describePrefetch(int64_t prefetchBytes);

/// Whether the first-stage `setting` was measured on the axis of `field`
/// (chunks or prefetchBytes): every other field at the value that axis was
/// measured at (the default distance, tuning.distanceChunks,
/// tuning.baseStreams).
bool onAxis(const DecodeTuning &tuning, const DecodeSetting &setting,
            int64_t DecodeSetting::*field);

/// The settings `level` measures first, each axis at the others' defaults:
/// the splits and the prefetch distances. With `fixedChunks` (q3c
/// --decode-chunks) the split is not measured: every candidate has it.
/// Every candidate has `fixedStreams` (q3c --decode-streams) or the default
/// count.
std::vector<DecodeSetting> decodeCandidates(TuneLevel level, int64_t fixedChunks = 0,
                                            int64_t fixedStreams = 0);

/// The distance the second stage measures each stream count at beside the
/// first stage's choice: none where the first stage chose a distance, else
/// the distance that measured fastest there relative to none (`measured`:
/// the first stage; the distances measured at `chunks` and `streams`).
/// kNoPrefetch when the first stage measured no distance.
int64_t alternateDecodePrefetch(const std::vector<DecodeRate> &measured, int64_t chosenPrefetch,
                                int64_t chunks, int64_t streams);

/// The second stage's settings: `at` with 1, 2 and 4 streams, then (when it
/// differs from `at`'s) the same counts at `alternatePrefetch`: how far
/// ahead a loop should prefetch depends on how many runs it reads side by
/// side (on an AMD EPYC family 23 VM the first stage, at four streams, chose
/// none, while one stream with prefetch streamed fastest of all).
std::vector<DecodeSetting> decodeStreamCandidates(const DecodeSetting &at,
                                                  int64_t alternatePrefetch);

/// Measures the candidates on `threads` threads with layers of two plain
/// products, the gate and up weight (`hidden` x 2 `intermediate`) and the
/// down weight, or returns the cached result for the same CPU,
/// shape, threads, level, split and kernel source. A measurement during
/// which others took more than `maxForeignShare` of the machine is used but
/// not cached. `fixedChunks` > 0: the split is given, not measured;
/// `fixedStreams` > 0 the same for the stream count.
DecodeTuning tuneDecode(const CpuTarget &target, int64_t hidden, int64_t intermediate,
                        const TunedWeights &weights, TuneLevel level, int threads,
                        double maxForeignShare = kMaxForeignShare, int64_t fixedChunks = 0,
                        int64_t fixedStreams = 0);

/// The split chosen from `measured` (among the settings at the baseline
/// prefetch distance): the fastest relative to the default, if it beats
/// the default clearly (clearlyFaster with `kDecodeTieFraction`); else the
/// default (the fastest by rate when the default was not measured).
/// `streams`: the stream count the splits were measured at (0: the default).
int64_t chooseDecodeChunks(const std::vector<DecodeRate> &measured, int64_t streams = 0);

/// The prefetch distance chosen from `measured` (among the settings at split
/// `chunks`; 0: the default split), by the same rule against the baseline
/// (kBaselineDecodePrefetchBytes).
int64_t chooseDecodePrefetch(const std::vector<DecodeRate> &measured, int64_t chunks = 0,
                             int64_t streams = 0);

/// The stream count and distance chosen from the second stage's `measured`
/// (the settings at `at`'s split; `at` is the default): the fastest relative
/// to `at` among those that beat it clearly, by the same rule, else `at`.
DecodeSetting chooseDecodeStreams(const std::vector<DecodeRate> &measured, const DecodeSetting &at);

/// A faster setting must beat the default by this fraction to replace it.
inline constexpr double kDecodeTieFraction = 0.03;

/// Adds `tuning` to the module's q3.tuning (decode_chunks, which
/// cpu-set-chunking reads, decode_prefetch_bytes, which cpu-set-prefetch
/// reads, decode_streams, which cpu-set-decode-streams reads, and the
/// measured rates).
void recordDecodeTuning(mlir::ModuleOp module, const DecodeTuning &tuning);

} // namespace q3::cpu
