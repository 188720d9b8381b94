// NFC against the Unicode conformance file NormalizationTest.txt (Debian's
// unicode-data; decompressed at build time): c2 == toNFC(c1..c3) and
// c4 == toNFC(c4, c5) for every line of Part 0-3, and toNFC(X) == X for every
// other code point (Part 1's complement).
#include "runtime/text/Nfc.h"
#include "runtime/text/Utf8.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

namespace q3::text {
namespace {

std::string utf8Of(const std::string &hexList) {
  std::istringstream in(hexList);
  std::string out, hex;
  while (in >> hex)
    appendUtf8(out, char32_t(std::stoul(hex, nullptr, 16)));
  return out;
}

TEST(Nfc, ConformanceFile) {
  const std::string path = Q3_NORMALIZATION_TEST;
  std::ifstream in(path);
  if (path.empty() || !in)
    GTEST_SKIP() << "NormalizationTest.txt not available (install Debian's unicode-data)";
  std::string line;
  int checked = 0, failures = 0;
  std::set<char32_t> part1;
  bool inPart1 = false;
  while (std::getline(in, line)) {
    if (line.rfind("@Part", 0) == 0) {
      inPart1 = line.rfind("@Part1", 0) == 0;
      continue;
    }
    if (line.empty() || line[0] == '#')
      continue;
    std::vector<std::string> columns;
    std::istringstream fields(line);
    std::string field;
    while (columns.size() < 5 && std::getline(fields, field, ';'))
      columns.push_back(utf8Of(field));
    ASSERT_EQ(columns.size(), 5u) << line;
    if (inPart1) {
      const char *p = columns[0].data();
      part1.insert(decodeValidUtf8(&p));
    }
    const std::string &c2 = columns[1], &c4 = columns[3];
    for (int i : {0, 1, 2})
      if (toNfc(columns[size_t(i)]) != c2 && ++failures <= 10)
        ADD_FAILURE() << "toNFC(c" << i + 1 << ") != c2 on line: " << line;
    for (int i : {3, 4})
      if (toNfc(columns[size_t(i)]) != c4 && ++failures <= 10)
        ADD_FAILURE() << "toNFC(c" << i + 1 << ") != c4 on line: " << line;
    ++checked;
  }
  EXPECT_GT(checked, 18000);
  for (char32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if ((cp >= 0xD800 && cp <= 0xDFFF) || part1.count(cp))
      continue;
    std::string text;
    appendUtf8(text, cp);
    if (toNfc(text) != text && ++failures <= 10)
      ADD_FAILURE() << "toNFC(U+" << std::hex << uint32_t(cp) << ") changed it";
  }
  EXPECT_EQ(failures, 0);
}

TEST(Nfc, QuickCheckKeepsCommonTextAsIs) {
  EXPECT_TRUE(isNfcQuick("plain ASCII text"));
  EXPECT_TRUE(isNfcQuick("caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD \xEC\x95\x88")); // café 你好 안
  EXPECT_FALSE(isNfcQuick("cafe\xCC\x81"));                                  // e + U+0301
  EXPECT_EQ(toNfc("cafe\xCC\x81"), "caf\xC3\xA9");
  EXPECT_EQ(toNfc("\xE1\x84\x80\xE1\x85\xA1"), "\xEA\xB0\x80"); // conjoining jamo -> 가
}

} // namespace
} // namespace q3::text
