//===- CheckpointBinding.h - where the checkpoint's bytes live ------------===//
//
// The CPU kernels of an artifact that packs per call read most weights where
// the checkpoint's bytes are. Mapped, those bytes are the page cache's: huge
// folios when the file was read back from disk (one TLB entry per 2 MB),
// small ones when it was written in small pieces and is still cached as it
// was written, and then decode ran about half as fast on the project's AMD
// VM (docs/cpu-backend.md). Which folios the page cache holds is decided
// by whoever read the file in first, so a load that meets small ones can
// drop them and read the file back from storage through a mapping advised
// for huge pages: once (about 0.4 s for 1.2 GB on the VM), and later loads
// map it at full speed. Where storage is slow, or other processes hold the
// small folios mapped, a copy onto transparent huge pages costs a read of
// the file at every load. This file measures which case a load meets and
// takes the cheapest that makes the weights fast.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Artifact.h"
#include "runtime/Checkpoint.h"
#include "runtime/Manifest.h"
#include "runtime/MappedFile.h"
#include "runtime/ResourceLimits.h"
#include "runtime/ThreadPool.h"
#include "runtime/WeightPlan.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace q3::runtime {

/// How the checkpoint was placed, and what the choice saw.
struct CheckpointPlacement {
  FilePlacement placement = FilePlacement::Mapped;
  bool chosen = false; // by the measurement below, not asked for
  /// The share of the checkpoint the page cache held in huge folios
  /// (Checkpoint::hugePageShare), when measured.
  std::optional<double> pageCacheHugeShare;
  /// Bytes the kernels read straight from the checkpoint.
  uint64_t inPlaceBytes = 0;
  /// Where the page cache held parts of the checkpoint in small folios: the
  /// read back of those parts into huge ones (Checkpoint::rereadSmallFolios),
  /// and the share of huge folios measured after it.
  std::optional<RereadResult> reread;
  std::optional<double> hugeShareAfterReread;
};

/// Below this share of huge folios (after the read back, where it ran) a CPU
/// artifact's in-place weights are copied onto huge pages.
constexpr double kCopyBelowHugeShare = 0.5;

/// Storage must read at least this fast for a load to read the small-folio
/// parts of the checkpoint back into huge folios: 1.2 GB (Qwen3-0.6B in
/// bf16, all of it small) then costs at most 1.2 s once, where a copy costs
/// 0.2-1.3 s at every load on the project's VM and holds the weights twice.
constexpr double kMinRereadBytesPerSecond = 1e9;

/// What the choice between mapping and copying looks at.
struct PlacementFacts {
  bool cpuKernels = false;                  // the artifact runs on the CPU
  std::optional<double> pageCacheHugeShare; // of the mapped checkpoint
  uint64_t inPlaceBytes = 0;                // read by the kernels from the mapping
  uint64_t fileBytes = 0;                   // of the checkpoint
  uint64_t modelBytes = 0;                  // everything else the model allocates
  uint64_t budgetBytes = 0;                 // memory this process may use
};

/// True when reading the checkpoint's small-folio parts back into huge
/// folios pays: CPU kernels that read at least half of the checkpoint in
/// place, and a page cache measured to hold some of it in small folios.
/// Each 4 KiB page of a stream is a TLB miss (in a VM also a fault of the
/// hypervisor's page tables the first time): with a quarter of the 0.6B
/// checkpoint in small folios the first prompt after the load took
/// 0.26-0.29 s against 0.10-0.13 s mended, and decode ran 3-4% slower
/// (docs/cpu-backend.md, "Where the checkpoint's bytes live").
bool rereadPays(const PlacementFacts &facts);

/// True when the copy pays: CPU kernels that read at least half of the
/// checkpoint in place, a page cache measured to hold less than
/// kCopyBelowHugeShare of it in huge folios, and a copy that fits half of the
/// budget beside the model.
bool copyPays(const PlacementFacts &facts);

struct BoundCheckpoint {
  std::unique_ptr<Checkpoint> checkpoint;
  std::vector<WeightData> weights;
  CheckpointPlacement placement;
  /// A mapped checkpoint's folio census, taken at open (placement's
  /// pageCacheHugeShare); the read back starts from it.
  std::vector<std::optional<FolioCensus>> folioCensuses;
};

/// Opens the checkpoint at `path` and evaluates `m`'s weight plan on it
/// (evaluateWeightPlan). `asked` places it as asked. Without it the checkpoint
/// is mapped; when rereadPays, the parts the page cache holds in small folios
/// are read back from storage into huge ones (unless storage reads slower
/// than kMinRereadBytesPerSecond) and the share measured again; when then
/// copyPays, it is reopened as a huge-page copy (read by `pool`'s threads)
/// and the plan evaluated again.
BoundCheckpoint bindCheckpoint(const std::string &path, const manifest::Manifest &m,
                               std::optional<FilePlacement> asked, ThreadPool &pool,
                               const MemoryBudget &budget, uint64_t modelBytes,
                               std::vector<std::string> *warnings,
                               const WeightPlanProgress &progress);

/// For CPU kernels that read an artifact's embedded weights (`inPlaceBytes`
/// of it) in place: where the page cache holds some of its mapped part in
/// small folios, that part read back into huge ones, as bindCheckpoint does
/// for a checkpoint (a copied artifact, `cp` or `scp`, is cached all small:
/// loads took 0.46-0.53 s against 0.08 s). Never a copy: the artifact is
/// the deployable thing, meant to be mapped.
CheckpointPlacement placeEmbeddedWeights(const Artifact &artifact, uint64_t inPlaceBytes,
                                         ThreadPool &pool);

} // namespace q3::runtime
