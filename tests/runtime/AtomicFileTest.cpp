// AtomicFile: what was at an output path survives every failure, special
// files are written in place and never removed, and an output that is one of
// the run's inputs is refused.
#include "TestFiles.h"

#include "runtime/AtomicFile.h"
#include "runtime/Npy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <thread>

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

namespace q3::runtime {
namespace {

using testing::TempDir;
using testing::writeText;

std::string readText(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// Names in `dir` (the temporary files start with a dot).
std::vector<std::string> entries(const TempDir &dir) {
  std::vector<std::string> names;
  for (const auto &entry : std::filesystem::directory_iterator(dir.path()))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string errorOf(const std::function<void()> &run) {
  try {
    run();
  } catch (const OutputError &error) {
    return error.what();
  }
  return "";
}

#define EXPECT_CONTAINS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

TEST(AtomicFile, CreatesTheFileOnlyOnCommit) {
  TempDir dir;
  const std::string path = dir.file("out.bin");
  {
    AtomicFile file(path);
    file.write("hello ");
    EXPECT_FALSE(std::filesystem::exists(path)) << "visible before commit";
    file.write("world");
    file.commit();
  }
  EXPECT_EQ(readText(path), "hello world");
  EXPECT_EQ(entries(dir), std::vector<std::string>{"out.bin"});
  struct stat info;
  ASSERT_EQ(::stat(path.c_str(), &info), 0);
  mode_t mask = ::umask(0);
  ::umask(mask);
  EXPECT_EQ(info.st_mode & 0777, 0666 & ~mask);
}

// Writes reach the file in 2 MB-aligned chunks (for the page cache's huge
// folios); whatever the sizes of the writes, the bytes are the same.
TEST(AtomicFile, WritesOfEverySizeKeepTheirBytesInOrder) {
  TempDir dir;
  const std::string path = dir.file("out.bin");
  const size_t mb = size_t(1) << 20;
  std::string expected;
  {
    AtomicFile file(path);
    uint32_t next = 1;
    for (size_t size : {size_t(56), 3 * mb + 7, size_t(1), 2 * mb, mb - 57, 2 * mb - 1, size_t(0),
                        5 * mb, size_t(4096), 2 * mb + 1}) {
      std::string piece(size, '\0');
      for (char &c : piece)
        c = char((next = next * 1103515245u + 12345u) >> 24);
      file.write(piece);
      expected += piece;
    }
    file.commit();
  }
  const std::string written = readText(path);
  ASSERT_EQ(written.size(), expected.size());
  EXPECT_TRUE(written == expected) << "the bytes differ"; // not printed: 20 MB
}

TEST(AtomicFile, AnAbandonedWriteLeavesTheOldFileAndNoTemporary) {
  TempDir dir;
  const std::string path = dir.file("model.q3");
  writeText(path, "the good artifact");
  {
    AtomicFile file(path);
    file.write(std::string(3u << 20, 'x')); // past the buffer: bytes reach the disk
  }
  EXPECT_EQ(readText(path), "the good artifact");
  EXPECT_EQ(entries(dir), std::vector<std::string>{"model.q3"});
}

TEST(AtomicFile, AReplacedFileKeepsItsMode) {
  TempDir dir;
  const std::string path = dir.file("out.npy");
  writeText(path, "old");
  ASSERT_EQ(::chmod(path.c_str(), 0640), 0);
  writeFileAtomically(path, "new");
  struct stat info;
  ASSERT_EQ(::stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0640u);
  EXPECT_EQ(readText(path), "new");
}

TEST(AtomicFile, ReplacesTheTargetOfASymbolicLinkAndKeepsTheLink) {
  TempDir dir;
  writeText(dir.file("real"), "old");
  std::filesystem::create_symlink(dir.file("real"), dir.file("link"));
  writeFileAtomically(dir.file("link"), "new");
  EXPECT_TRUE(std::filesystem::is_symlink(dir.file("link")));
  EXPECT_EQ(readText(dir.file("real")), "new");
}

// A full file system (here: a file size limit) fails the run, and the file
// that was there is intact.
TEST(AtomicFile, AWriteErrorNamesThePathAndKeepsTheOldFile) {
  TempDir dir;
  const std::string path = dir.file("model.q3");
  writeText(path, "the good artifact");
  struct rlimit old;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto oldHandler = std::signal(SIGXFSZ, SIG_IGN); // EFBIG instead of a kill
  struct rlimit small = old;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string message = errorOf([&] { writeFileAtomically(path, std::string(1 << 21, 'x')); });
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, oldHandler);
  EXPECT_EQ(message, path + ": cannot write: File too large");
  EXPECT_EQ(readText(path), "the good artifact");
  EXPECT_EQ(entries(dir), std::vector<std::string>{"model.q3"});
}

TEST(AtomicFile, SpecialFilesAreWrittenInPlaceAndNeverRemoved) {
  writeFileAtomically("/dev/null", "discarded");
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/null"));
  const std::string message = errorOf([] { writeFileAtomically("/dev/full", "x"); });
  EXPECT_EQ(message, "/dev/full: cannot write: No space left on device");
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/full"));
}

TEST(AtomicFile, APipeIsWrittenDirectly) {
  TempDir dir;
  const std::string fifo = dir.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string received;
  std::thread reader([&] { received = readText(fifo); });
  writeFileAtomically(fifo, "through the pipe");
  reader.join();
  EXPECT_EQ(received, "through the pipe");
  EXPECT_EQ(entries(dir), std::vector<std::string>{"pipe"});
}

TEST(AtomicFile, AFolderIsNotAnOutputFile) {
  TempDir dir;
  EXPECT_EQ(errorOf([&] { writeFileAtomically(dir.path(), "x"); }),
            dir.path() + ": is a folder, expected a file name");
}

TEST(AtomicFile, NpyAndSafeTensorsWritersAreAtomic) {
  TempDir dir;
  const std::string path = dir.file("logits.npy");
  writeText(path, "old");
  struct rlimit old;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto oldHandler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string npy =
      errorOf([&] { writeNpyF32(path, {1 << 20}, std::vector<float>(1 << 20, 1.0f)); });
  const std::string safetensors = errorOf([&] {
    writeSafeTensors(path, {testing::f32Tensor("w", {1 << 20})});
  });
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, oldHandler);
  EXPECT_EQ(npy, path + ": cannot write: File too large");
  EXPECT_EQ(safetensors, path + ": cannot write: File too large");
  EXPECT_EQ(readText(path), "old");
}

TEST(AtomicFile, RemoveTemporaryOutputsDeletesUnfinishedFiles) {
  TempDir dir;
  AtomicFile file(dir.file("out"));
  file.write(std::string(2u << 20, 'x'));
  ASSERT_EQ(entries(dir).size(), 1u); // the temporary
  removeTemporaryOutputs();           // what a signal handler does
  EXPECT_TRUE(entries(dir).empty());
}

TEST(RefuseOutputThatIsInput, SameFileLinkOrCheckpointFileOfAnInputFolder) {
  TempDir dir;
  std::filesystem::create_directory(dir.file("model"));
  writeText(dir.file("model/config.json"), "{}");
  writeText(dir.file("model/model.safetensors"), "");
  writeText(dir.file("model/notes.txt"), "");
  writeText(dir.file("model.q3"), "");
  std::filesystem::create_hard_link(dir.file("model.q3"), dir.file("alias.q3"));
  const std::vector<std::string> inputs = {dir.file("model.q3"), dir.file("model")};

  EXPECT_EQ(errorOf([&] { refuseOutputThatIsInput("--logits", dir.file("alias.q3"), inputs); }),
            dir.file("alias.q3") + ": --logits would overwrite the input " + dir.file("model.q3") +
                " of this run; choose another path");
  for (const char *name : {"model/config.json", "model/model.safetensors"})
    EXPECT_CONTAINS(errorOf([&] { refuseOutputThatIsInput("-o", dir.file(name), inputs); }),
                    "-o would overwrite a file of the input folder " + dir.file("model"));
  // A file of another kind in the folder, and a path with nothing there, are outputs.
  EXPECT_EQ(errorOf([&] { refuseOutputThatIsInput("-o", dir.file("model/notes.txt"), inputs); }),
            "");
  EXPECT_EQ(errorOf([&] { refuseOutputThatIsInput("-o", dir.file("model/new.json"), inputs); }),
            "");
  EXPECT_EQ(errorOf([&] { refuseOutputThatIsInput("-o", "-", inputs); }), "");
}

} // namespace
} // namespace q3::runtime
