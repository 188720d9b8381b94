// A mapped file truncated while in use: the next read of a lost page raises
// SIGBUS, which must become one line naming the file and exit code 1.
#include "TestFiles.h"

#include "runtime/FatalSignals.h"
#include "runtime/MappedFile.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <stdexcept>
#include <thread>

namespace q3::runtime {
namespace {

using testing::TempDir;

TEST(FatalSignalsDeathTest, ABusErrorInAMappedFileNamesTheFile) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  testing::writeBytes(path, std::vector<uint8_t>(64 * 1024, 7));
  EXPECT_EXIT(
      {
        installFatalSignalHandlers("q3run");
        auto mapped = MappedFile::open(path);
        if (::truncate(path.c_str(), 0) != 0)
          ::_exit(3);
        volatile uint8_t byte = mapped->data()[5000]; // SIGBUS: the page is gone
        (void)byte;
        ::_exit(2);
      },
      ::testing::ExitedWithCode(1),
      "^q3run: error: .*model.safetensors: cannot read byte 5000 of the mapped file: it was "
      "truncated, or its storage failed, while in use\n$");
}

TEST(FatalSignalsDeathTest, OtherBusErrorsStayCrashes) {
  EXPECT_EXIT(
      {
        installFatalSignalHandlers("q3run");
        ::raise(SIGBUS);
        ::_exit(2);
      },
      ::testing::KilledBySignal(SIGBUS), "");
}

// An exception that escapes a thread would call std::terminate and abort.
TEST(FatalSignalsDeathTest, AnUncaughtExceptionIsOneLineNotAnAbort) {
  EXPECT_EXIT(
      {
        installFatalSignalHandlers("q3run");
        std::thread([] { throw std::runtime_error("escaped\nwith a newline"); }).join();
        ::_exit(2);
      },
      ::testing::ExitedWithCode(1),
      "^q3run: error: internal error: escaped\\\\nwith a newline\n$");
}

} // namespace
} // namespace q3::runtime
