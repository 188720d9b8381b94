#include "runtime/text/Utf8.h"

#include <gtest/gtest.h>

namespace q3::text {
namespace {

const std::string kReplacement = "\xEF\xBF\xBD";

TEST(Utf8, FindsTheFirstIllFormedByte) {
  EXPECT_EQ(findInvalidUtf8("plain"), std::string::npos);
  EXPECT_EQ(findInvalidUtf8("\xE4\xBD\xA0\xF0\x9F\x98\x80"), std::string::npos);
  EXPECT_EQ(findInvalidUtf8("ab\xFF"), 2u);
  EXPECT_EQ(findInvalidUtf8("ab\xC0\xAF"), 2u);         // overlong '/'
  EXPECT_EQ(findInvalidUtf8("\xED\xA0\x80"), 0u);       // a surrogate
  EXPECT_EQ(findInvalidUtf8("\xF4\x90\x80\x80"), 0u);   // past U+10FFFF
  EXPECT_EQ(findInvalidUtf8("ok\xE4\xBD"), 2u);         // truncated at the end
  EXPECT_EQ(findInvalidUtf8("\xEF\xBF\xBF\xF4\x8F\xBF\xBF"), std::string::npos); // U+FFFF U+10FFFF
}

TEST(Utf8, ReplacesMaximalSubparts) {
  // Unicode 15 section 3.9, table 3-8.
  EXPECT_EQ(toValidUtf8("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"),
            "a" + kReplacement + kReplacement + kReplacement + "b" + kReplacement + "c" +
                kReplacement + kReplacement + "d");
  EXPECT_EQ(toValidUtf8("\xE0\x80\x80"), kReplacement + kReplacement + kReplacement);
  EXPECT_EQ(toValidUtf8("\xF0\x9F\x98"), kReplacement);
}

TEST(Utf8, StreamNeverSplitsACharacterAndMatchesTheWholeDecode) {
  const std::string text = "a\xE4\xBD\xA0\xF0\x9F\x98\x80z\xFF\xE4\xBDq\xF0\x9F";
  const std::string whole = toValidUtf8(text);
  for (size_t chunk = 1; chunk <= 4; ++chunk) {
    Utf8StreamDecoder decoder;
    std::string streamed;
    for (size_t i = 0; i < text.size(); i += chunk) {
      std::string piece = decoder.push(text.substr(i, chunk));
      EXPECT_EQ(findInvalidUtf8(piece), std::string::npos);
      streamed += piece;
    }
    streamed += decoder.finish();
    EXPECT_EQ(streamed, whole) << "chunk " << chunk;
  }
  Utf8StreamDecoder decoder;
  EXPECT_EQ(decoder.push("\xF0\x9F"), "");
  EXPECT_EQ(decoder.pendingBytes(), 2u);
  EXPECT_EQ(decoder.push("\x98"), "");
  EXPECT_EQ(decoder.push("\x80!"), "\xF0\x9F\x98\x80!");
}

} // namespace
} // namespace q3::text
