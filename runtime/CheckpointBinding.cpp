#include "runtime/CheckpointBinding.h"

namespace q3::runtime {

namespace {

/// Bytes of the bound weights that point into the checkpoint (not converted
/// or computed at load).
uint64_t bytesReadInPlace(const std::vector<WeightData> &weights) {
  uint64_t bytes = 0;
  for (const WeightData &w : weights)
    if (w.data && w.owned.empty())
      bytes += uint64_t(w.bytes());
  return bytes;
}

BoundCheckpoint openAndBind(const std::string &path, const manifest::Manifest &m,
                            FilePlacement placement, ThreadPool &pool,
                            std::vector<std::string> *warnings,
                            const WeightPlanProgress &progress) {
  BoundCheckpoint bound;
  bound.checkpoint = std::make_unique<Checkpoint>(Checkpoint::open(path, placement, &pool));
  bound.placement.placement = placement;
  if (placement == FilePlacement::Mapped) {
    bound.folioCensuses = bound.checkpoint->folioCensuses();
    bound.placement.pageCacheHugeShare = combinedHugeShare(bound.folioCensuses);
  }
  bound.weights = evaluateWeightPlan(m, *bound.checkpoint, pool, warnings, progress);
  bound.placement.inPlaceBytes = bytesReadInPlace(bound.weights);
  return bound;
}

} // namespace

bool rereadPays(const PlacementFacts &facts) {
  return facts.cpuKernels && facts.pageCacheHugeShare && *facts.pageCacheHugeShare < 1.0 &&
         2 * facts.inPlaceBytes >= facts.fileBytes;
}

bool copyPays(const PlacementFacts &facts) {
  return facts.cpuKernels && facts.pageCacheHugeShare &&
         *facts.pageCacheHugeShare < kCopyBelowHugeShare &&
         2 * facts.inPlaceBytes >= facts.fileBytes &&
         saturatingAdd(facts.modelBytes, facts.fileBytes) <= facts.budgetBytes / 2;
}

BoundCheckpoint bindCheckpoint(const std::string &path, const manifest::Manifest &m,
                               std::optional<FilePlacement> asked, ThreadPool &pool,
                               const MemoryBudget &budget, uint64_t modelBytes,
                               std::vector<std::string> *warnings,
                               const WeightPlanProgress &progress) {
  if (asked)
    return openAndBind(path, m, *asked, pool, warnings, progress);
  BoundCheckpoint mapped = openAndBind(path, m, FilePlacement::Mapped, pool, warnings, progress);
  mapped.placement.chosen = true;
  PlacementFacts facts{m.target.backend == "cpu",
                       mapped.placement.pageCacheHugeShare,
                       mapped.placement.inPlaceBytes,
                       mapped.checkpoint->fileBytes(),
                       modelBytes,
                       budget.bytes};
  if (rereadPays(facts)) {
    // Small folios: read those parts back into huge ones if storage is
    // fast, so this load and every later one read them in place at full
    // speed.
    mapped.placement.reread =
        mapped.checkpoint->rereadSmallFolios(mapped.folioCensuses, &pool, kMinRereadBytesPerSecond);
    mapped.placement.hugeShareAfterReread = mapped.checkpoint->hugePageShare();
    facts.pageCacheHugeShare = mapped.placement.hugeShareAfterReread;
  }
  if (!copyPays(facts))
    return mapped;
  const CheckpointPlacement seen = mapped.placement;
  mapped.weights.clear(); // they point into the mapping
  mapped.checkpoint.reset();
  if (warnings)
    warnings->clear(); // the same ones come again
  BoundCheckpoint copied =
      openAndBind(path, m, FilePlacement::HugePageCopy, pool, warnings, progress);
  copied.placement.chosen = true;
  copied.placement.pageCacheHugeShare = seen.pageCacheHugeShare;
  copied.placement.reread = seen.reread;
  copied.placement.hugeShareAfterReread = seen.hugeShareAfterReread;
  return copied;
}

CheckpointPlacement placeEmbeddedWeights(const Artifact &artifact, uint64_t inPlaceBytes,
                                         ThreadPool &pool) {
  CheckpointPlacement placement;
  placement.chosen = true;
  placement.inPlaceBytes = inPlaceBytes;
  const std::optional<FolioCensus> census = artifact.mappedFolioCensus();
  if (census)
    placement.pageCacheHugeShare = census->hugeShare();
  if (!census || census->small.empty())
    return placement;
  placement.reread = artifact.rereadSmallFolios(*census, &pool, kMinRereadBytesPerSecond);
  if (const std::optional<FolioCensus> after = artifact.mappedFolioCensus())
    placement.hugeShareAfterReread = after->hugeShare();
  return placement;
}

} // namespace q3::runtime
