//===- DecodeSplitTuner.h - measure decode attention's position splits ----===//
//
// q3c compile --tune, decode attention: how many workgroups each head group's
// decode is split into (cpu-split-decode-attention). Without a measurement
// the splits just cover the threads with the head groups; whether more
// (or none) stream the cache faster is the machine's to say (on AMD family
// 26 with 2 threads and 8 head groups one and two splits measured the same
// within the noise, here and in whole-model runs). The tuner compiles the
// model's attention kernel with each candidate (1, the covering count and
// twice it, at most 16), runs one decode step over 2048 cached positions of 16 layers
// (their own f32 caches, so the measurement streams from memory) on every
// CPU, 5 rounds with the candidates taking turns. At the covering count it
// also measures the runs each block's keys and values are read in side by
// side (decode_streams 2 and 4; not 1: after 2048 tokens on AMD family 26,
// one run streamed the cache at 43-45 GB/s, two and four at 47-56, a
// deficit this step did not show), and the default
// count without software prefetch (after 2048 tokens on AMD family 25,
// attention took 13% less time without it). Every candidate is judged by its
// per-round ratios to the default loops (the covering split, 4 streams, 8
// KiB), the products' rule: best-of-5 rates picked outliers (a compile kept 8
// KiB at 1.06x by rate and ran slower for it; another took 2 splits at 1.37x
// by rate whose median ratio was 0.999).
// Cached per CPU, thread count, shape and kernel sources.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "backends/cpu/CpuTarget.h"
#include "backends/cpu/ForeignLoad.h"
#include "backends/cpu/KernelSource.h"
#include "backends/cpu/TuningCache.h"

#include "mlir/IR/BuiltinOps.h"

#include <vector>

namespace q3::cpu {

struct DecodeSplitRate {
  int64_t splits = 1;
  double gbPerSecond = 0;                  // KV cache bytes read per second, 1e9 (the median round)
  int64_t streams = kDefaultDecodeStreams; // runs read side by side
  int64_t prefetchBytes = kDefaultPrefetchBytes; // or kNoPrefetch
  // Median and lower quartile of its per-round ratios to the default loops
  // (the covering split, the base stream count, the default distance); 0:
  // not measured.
  double relative = 0, relativeLow = 0;
};

struct DecodeSplitTuning {
  DecodeSplitRate chosen;                      // one of `measured`
  std::vector<DecodeSplitRate> measured;       // the splits, then the streams, then no prefetch
  int64_t baseStreams = kDefaultDecodeStreams; // the streams the splits were measured at
  int threads = 0;
  int64_t positions = 0; // cached positions of the measured step
  TuningProvenance provenance;
};

/// What the tuner measures for `shape` on `threads` threads: 1, the
/// covering count and twice it (at most kMaxDecodeSplits), ascending.
std::vector<int64_t> decodeSplitCandidates(const AttentionKernel &shape, int64_t threads);

/// The (splits, streams, prefetch) the tuner runs: the split candidates at
/// `fixedStreams` (0: the default count), then, unless it is given, the
/// other stream count (2 or 4) at the covering split, all at the default
/// distance; then the covering split at `fixedStreams` (or the default
/// count) without software prefetch.
std::vector<DecodeSplitRate> decodeSplitSettings(const AttentionKernel &shape, int64_t threads,
                                                 int64_t fixedStreams = 0);

/// The one measured setting decode attention keeps: of `rates`, those whose
/// per-round ratios to `base` (the covering split at the base stream count
/// and the default distance) say clearly faster by the products' rule
/// (clearlyFaster with kDecodeTieFraction), the one of the highest median
/// ratio; else `base`. Never a combination of two winners: those were not
/// measured together.
DecodeSplitRate chooseAttentionDecode(const std::vector<DecodeSplitRate> &rates,
                                      const DecodeSplitRate &base);

/// Measures decode attention of `shape` (its queryHeads, kvHeads, headDim,
/// map and scale; an f32 cache; the vector template: head_dim a multiple of
/// 16) with each candidate split on `threads` threads, or returns the cached
/// result for the same CPU, threads, shape and kernel sources. A
/// measurement during which others took more than `maxForeignShare` of the
/// machine is used but not cached.
DecodeSplitTuning tuneDecodeSplits(const CpuTarget &target, const AttentionKernel &shape,
                                   int threads, double maxForeignShare = kMaxForeignShare,
                                   int64_t fixedStreams = 0);

/// Adds the result to the module's q3.tuning: `attention_decode_splits`
/// (which cpu-split-decode-attention reads), `attention_decode_streams`
/// (cpu-set-decode-streams) where streams were measured,
/// `attention_decode_prefetch_bytes` (cpu-set-prefetch: a byte count or
/// "none") and `attention_decode_gb_s`.
void recordDecodeSplitTuning(mlir::ModuleOp module, const DecodeSplitTuning &tuning);

} // namespace q3::cpu
