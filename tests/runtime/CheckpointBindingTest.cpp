// When a load reads the small-folio parts of the checkpoint back into huge
// folios, and when it copies the checkpoint onto huge pages instead of
// reading it in place: only for CPU kernels that read most of it in place,
// the read back wherever some of it is small, the copy only where most of it
// stayed small and the copy fits comfortably.
#include "runtime/CheckpointBinding.h"

#include <gtest/gtest.h>

namespace q3::runtime {
namespace {

constexpr uint64_t kGB = 1000000000;

/// A 0.6B-like load that copies: 1.2 GB read in place from small folios.
PlacementFacts smallFolios() {
  PlacementFacts facts;
  facts.cpuKernels = true;
  facts.pageCacheHugeShare = 0.1;
  facts.inPlaceBytes = 1190000000;
  facts.fileBytes = 1192000000;
  facts.modelBytes = 2 * kGB;
  facts.budgetBytes = 24 * kGB;
  return facts;
}

TEST(CheckpointBinding, CopiesInPlaceWeightsHeldInSmallFolios) {
  EXPECT_TRUE(copyPays(smallFolios()));
}

TEST(CheckpointBinding, MapsAPageCacheOfHugeFolios) {
  PlacementFacts facts = smallFolios();
  facts.pageCacheHugeShare = kCopyBelowHugeShare;
  EXPECT_FALSE(copyPays(facts));
  facts.pageCacheHugeShare = 0.9;
  EXPECT_FALSE(copyPays(facts));
}

TEST(CheckpointBinding, MapsWhenTheShareCouldNotBeMeasured) {
  PlacementFacts facts = smallFolios();
  facts.pageCacheHugeShare = std::nullopt;
  EXPECT_FALSE(copyPays(facts));
}

TEST(CheckpointBinding, MapsForVulkanKernels) {
  PlacementFacts facts = smallFolios();
  facts.cpuKernels = false; // the weights go to device memory anyway
  EXPECT_FALSE(copyPays(facts));
}

TEST(CheckpointBinding, MapsWhenTheKernelsReadLittleInPlace) {
  PlacementFacts facts = smallFolios();
  facts.inPlaceBytes = facts.fileBytes / 2 - 1; // packed at load: a copy would only add memory
  EXPECT_FALSE(copyPays(facts));
  facts.inPlaceBytes = facts.fileBytes / 2;
  EXPECT_TRUE(copyPays(facts));
}

TEST(CheckpointBinding, MapsWhenTheCopyWouldCrowdMemory) {
  PlacementFacts facts = smallFolios();
  facts.budgetBytes = 2 * (facts.modelBytes + facts.fileBytes) - 1;
  EXPECT_FALSE(copyPays(facts));
  facts.budgetBytes += 1;
  EXPECT_TRUE(copyPays(facts));
  facts.modelBytes = UINT64_MAX; // saturates instead of wrapping to small
  EXPECT_FALSE(copyPays(facts));
}

TEST(CheckpointBinding, ReadsBackAnySmallFolioPartsOfInPlaceWeights) {
  PlacementFacts facts = smallFolios();
  EXPECT_TRUE(rereadPays(facts));
  facts.pageCacheHugeShare = 0.97; // a few stretches small: still every token's TLB misses
  EXPECT_TRUE(rereadPays(facts));
  facts.budgetBytes = 0; // a read back holds no second copy
  EXPECT_TRUE(rereadPays(facts));
}

TEST(CheckpointBinding, LeavesAllHugeOrUnmeasuredOrPackedWeightsAlone) {
  PlacementFacts facts = smallFolios();
  facts.pageCacheHugeShare = 1.0;
  EXPECT_FALSE(rereadPays(facts));
  facts.pageCacheHugeShare = std::nullopt;
  EXPECT_FALSE(rereadPays(facts));
  facts = smallFolios();
  facts.cpuKernels = false;
  EXPECT_FALSE(rereadPays(facts));
  facts = smallFolios();
  facts.inPlaceBytes = facts.fileBytes / 2 - 1; // packed at load: read once, not streamed
  EXPECT_FALSE(rereadPays(facts));
}

} // namespace
} // namespace q3::runtime
