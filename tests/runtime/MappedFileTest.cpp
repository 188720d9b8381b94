// A checkpoint's bytes are the same whether read in place or copied onto huge
// pages, and a copy keeps them through dropPages (which, on anonymous memory,
// would otherwise hand back zeros: weights silently lost).
#include "PageCacheFiles.h"
#include "TestFiles.h"

#include "runtime/LoadError.h"
#include "runtime/MappedFile.h"
#include "runtime/Smaps.h"
#include "runtime/ThreadPool.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace q3::runtime {
namespace {

using testing::evictFromPageCache;
using testing::readInSmallPieces;
using testing::TempDir;

/// `size` bytes no two nearby alike (a multiplicative hash of the index,
/// `shift` picking its bits); by default 5 MB and a bit: more than two huge
/// pages, not a whole number of them.
std::vector<uint8_t> patternBytes(size_t size = (size_t(5) << 20) + 12345, int shift = 13) {
  std::vector<uint8_t> bytes(size);
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = uint8_t(i * 2654435761u >> shift);
  return bytes;
}

std::vector<uint8_t> contents(const MappedFile &file) {
  return std::vector<uint8_t>(file.data(), file.data() + file.size());
}

TEST(MappedFile, ACopyOnHugePagesHoldsTheFilesBytes) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  const std::vector<uint8_t> bytes = patternBytes();
  testing::writeBytes(path, bytes);
  auto mapped = MappedFile::open(path);
  auto copied = MappedFile::open(path, FilePlacement::HugePageCopy);
  ASSERT_EQ(copied->size(), bytes.size());
  EXPECT_NE(copied->data(), mapped->data());
  EXPECT_EQ(contents(*mapped), bytes);
  EXPECT_EQ(contents(*copied), bytes);
}

TEST(MappedFile, DroppingPagesLosesNoBytes) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  const std::vector<uint8_t> bytes = patternBytes();
  testing::writeBytes(path, bytes);
  for (FilePlacement placement : {FilePlacement::Mapped, FilePlacement::HugePageCopy}) {
    auto file = MappedFile::open(path, placement);
    file->dropPages(file->data(), file->size());
    EXPECT_EQ(contents(*file), bytes) << "placement " << int(placement);
  }
}

TEST(MappedFile, EmptyAndMissingFilesAreTheSameEitherWay) {
  TempDir dir;
  const std::string empty = dir.file("empty.safetensors");
  testing::writeBytes(empty, {});
  const std::string missing = dir.file("missing.safetensors");
  for (FilePlacement placement : {FilePlacement::Mapped, FilePlacement::HugePageCopy}) {
    auto file = MappedFile::open(empty, placement);
    EXPECT_EQ(file->size(), 0u);
    EXPECT_EQ(file->data(), nullptr);
    try {
      MappedFile::open(missing, placement);
      ADD_FAILURE() << "opened a missing file";
    } catch (const LoadError &error) {
      EXPECT_NE(std::string(error.what()).find("missing.safetensors: cannot open"),
                std::string::npos)
          << error.what();
    }
  }
}

TEST(MappedFile, ACopyReadByManyThreadsHoldsTheFilesBytes) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  const std::vector<uint8_t> bytes = patternBytes();
  testing::writeBytes(path, bytes);
  for (int threads : {2, 3, 8}) { // more threads than 2 MB blocks, too
    ThreadPool pool(threads);
    auto copied = MappedFile::open(path, FilePlacement::HugePageCopy, &pool);
    EXPECT_EQ(contents(*copied), bytes) << threads << " threads";
  }
}

// A load that meets the checkpoint in small page-cache folios reads it back
// from storage (CheckpointBinding.h): the bytes must stay the file's, and
// storage slower than asked stops it after the first 64 MB.
TEST(MappedFile, RereadIntoHugeFoliosKeepsTheBytes) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  const std::vector<uint8_t> bytes = patternBytes((size_t(70) << 20) + 4321, 17);
  testing::writeBytes(path, bytes);
  auto file = MappedFile::open(path);
  EXPECT_EQ(contents(*file), bytes); // its pages mapped here, too
  ThreadPool pool(2);
  const RereadResult slow = file->rereadIntoHugeFolios(&pool, 1e30); // no storage is as fast
  if (slow.bytes == 0)
    GTEST_SKIP() << "no transparent huge pages here";
  EXPECT_TRUE(slow.slowStorage);
  EXPECT_EQ(slow.bytes, size_t(64) << 20) << "the first piece only";
  EXPECT_EQ(contents(*file), bytes);
  const RereadResult fast = file->rereadIntoHugeFolios(&pool, 0);
  EXPECT_FALSE(fast.slowStorage);
  EXPECT_EQ(fast.bytes, size_t(70) << 20) << "every whole 2 MB stretch";
  EXPECT_GE(fast.seconds, 0.0);
  EXPECT_EQ(contents(*file), bytes);
  const RereadResult none =
      MappedFile::open(path, FilePlacement::HugePageCopy)->rereadIntoHugeFolios(&pool, 0);
  EXPECT_EQ(none.bytes, 0u) << "a copy has no page cache to mend";
}

TEST(MappedFile, HugePageShareIsAShareOfWholeStretches) {
  TempDir dir;
  const std::string big = dir.file("big.safetensors"), small = dir.file("small.safetensors");
  testing::writeBytes(big, patternBytes());
  testing::writeBytes(small, std::vector<uint8_t>(size_t(1) << 20, 7));
  // Which folios the page cache holds is the kernel's business; the share is
  // a share whenever smaps can be read.
  if (const std::optional<double> share = MappedFile::open(big)->hugePageShare()) {
    EXPECT_GE(*share, 0.0);
    EXPECT_LE(*share, 1.0);
  }
  EXPECT_EQ(MappedFile::open(small)->hugePageShare(), std::nullopt) << "no whole 2 MB stretch";
  EXPECT_EQ(MappedFile::open(big, FilePlacement::HugePageCopy)->hugePageShare(), 1.0);
}

// A VM that evicts the page cache of files no process maps (the project's
// does, 200 MB a minute) has each load fault the checkpoint back in. A plain
// mapping's faults read it in small folios, so a few loads left the cache
// broken up and decode on small pages; the mapping is advised for huge
// pages, so what it reads back is as huge as a read-back meant to mend it.
TEST(MappedFile, AnEvictedFileIsReadBackInHugeFolios) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  const std::vector<uint8_t> bytes = patternBytes((size_t(16) << 20) + 777, 11);
  testing::writeBytes(path, bytes);
  if (!evictFromPageCache(path))
    GTEST_SKIP() << "this file system keeps the file's pages cached";
  const std::optional<double> readBack = MappedFile::open(path)->hugePageShare();
  // The reference: the read-back that drops the cache and reads it through
  // a mapping advised for huge pages.
  ThreadPool pool(2);
  if (MappedFile::open(path)->rereadIntoHugeFolios(&pool, 0).bytes == 0)
    GTEST_SKIP() << "no transparent huge pages here";
  const std::optional<double> mended = MappedFile::open(path)->hugePageShare();
  if (!readBack || !mended || *mended == 0)
    GTEST_SKIP() << "this file system reads no huge folios (or smaps is unreadable)";
  EXPECT_GE(*readBack, *mended) << "a plain fault read the evicted file in smaller folios";
  EXPECT_EQ(contents(*MappedFile::open(path)), bytes);
}

// A checkpoint cached partly in small folios (read() by another program,
// say) streamed a quarter of its bytes through 4 KiB pages; the census
// names those stretches and the read back mends just them.
TEST(MappedFile, TheCensusFindsTheSmallStretchesAndTheReadBackMendsThem) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  const std::vector<uint8_t> bytes = patternBytes(16 * kHugePageBytes + 999, 7);
  testing::writeBytes(path, bytes);
  if (!evictFromPageCache(path))
    GTEST_SKIP() << "this file system keeps the file's pages cached";
  readInSmallPieces(path, {3, 10, 11});
  auto file = MappedFile::open(path);
  const std::optional<FolioCensus> census = file->folioCensus();
  if (!census)
    GTEST_SKIP() << "/proc/self/pagemap cannot be read here";
  EXPECT_EQ(census->stretches, 16u);
  if (census->small.size() == census->stretches)
    GTEST_SKIP() << "this file system reads no huge folios";
  // A CI rehearsal once found two more small in the artifact's twin of this test.
  testing::expectFoundSmall(census->small, {3, 10, 11});
  EXPECT_DOUBLE_EQ(*file->hugePageShare(),
                   double(census->stretches - census->small.size()) / double(census->stretches));
  EXPECT_EQ(contents(*file), bytes) << "the census only reads";

  ThreadPool pool(2);
  const RereadResult mended = file->rereadIntoHugeFolios(&pool, 0, &census->small);
  EXPECT_EQ(mended.bytes, census->small.size() * kHugePageBytes) << "the small stretches only";
  EXPECT_FALSE(mended.slowStorage);
  EXPECT_EQ(file->folioCensus()->small, std::vector<size_t>{});
  EXPECT_EQ(contents(*file), bytes);
  EXPECT_EQ(contents(*MappedFile::open(path)), bytes);
}

TEST(Smaps, AFieldIsReadFromTheMappingThatStartsThere) {
  // Paths that look like hex or hold field names must not confuse the parse.
  const std::string smaps =
      "7f0000000000-7f0000200000 r--p 00000000 fd:00 12 /tmp/deadbeef-cafe.safetensors\n"
      "Size:               2048 kB\n"
      "FilePmdMapped:      2048 kB\n"
      "7f0000400000-7f0000a00000 r--p 00000000 fd:00 13 /work/FilePmdMapped: 9 kB\n"
      "Size:               6144 kB\n"
      "AnonHugePages:         0 kB\n"
      "FilePmdMapped:      4096 kB\n"
      "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]\n"
      "FilePmdMapped:         0 kB";
  EXPECT_EQ(smapsFieldKb(smaps, 0x7f0000000000, "FilePmdMapped"), 2048u);
  EXPECT_EQ(smapsFieldKb(smaps, 0x7f0000400000, "FilePmdMapped"), 4096u);
  EXPECT_EQ(smapsFieldKb(smaps, 0xffffffffff600000, "FilePmdMapped"), 0u);
  EXPECT_EQ(smapsFieldKb(smaps, 0x7f0000200000, "FilePmdMapped"), std::nullopt)
      << "no mapping starts there";
  EXPECT_EQ(smapsFieldKb("", 0x7f0000000000, "FilePmdMapped"), std::nullopt);
  EXPECT_EQ(smapsFieldKb(smaps, 0x7f0000400000, "AnonHugePages"), 0u);
  EXPECT_EQ(smapsFieldKb(smaps, 0x7f0000000000, "AnonHugePages"), std::nullopt) << "no such field";
}

} // namespace
} // namespace q3::runtime
