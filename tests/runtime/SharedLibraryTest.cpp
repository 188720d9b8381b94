#include "TestFiles.h"

#include "runtime/LoadError.h"
#include "runtime/SharedLibrary.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace q3::runtime {
namespace {

using testing::testKernelBytes;

TEST(SharedLibrary, LoadsFromMemoryAndCallsAFunction) {
  std::vector<uint8_t> bytes = testKernelBytes();
  auto library = SharedLibrary::loadFromMemory("kernels.so", bytes.data(), bytes.size());
  auto add = reinterpret_cast<int (*)(int, int)>(library->symbol("q3_test_add"));
  EXPECT_EQ(add(2, 3), 1005);
}

TEST(SharedLibrary, TwoCopiesLoadIndependently) {
  std::vector<uint8_t> bytes = testKernelBytes();
  auto first = SharedLibrary::loadFromMemory("first", bytes.data(), bytes.size());
  auto second = SharedLibrary::loadFromMemory("second", bytes.data(), bytes.size());
  EXPECT_NE(first->symbol("q3_test_add"), second->symbol("q3_test_add"));
  first.reset();
  EXPECT_EQ(reinterpret_cast<int (*)(int, int)>(second->symbol("q3_test_add"))(1, 1), 1002);
}

TEST(SharedLibrary, MissingSymbolIsALoadError) {
  std::vector<uint8_t> bytes = testKernelBytes();
  auto library = SharedLibrary::loadFromMemory("kernels.so", bytes.data(), bytes.size());
  EXPECT_LOAD_ERROR(library->symbol("q3_missing"), "kernels.so: no symbol 'q3_missing'");
}

TEST(SharedLibrary, GarbageBytesAreALoadError) {
  std::vector<uint8_t> garbage(4096, 0x5a);
  EXPECT_LOAD_ERROR(SharedLibrary::loadFromMemory("garbage.so", garbage.data(), garbage.size()),
                    "garbage.so: cannot load the shared object: ");
  EXPECT_LOAD_ERROR(SharedLibrary::loadFromMemory("empty.so", nullptr, 0), "empty.so: ");
}

} // namespace
} // namespace q3::runtime
