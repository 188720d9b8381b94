// The Qwen3 tokenizer against ids from an independent implementation
// (Hugging Face's JavaScript tokenizer, scripts/tokenizer-reference), on
// tests/text/data/tokenizer_strings.json: every script, emoji sequences,
// code, digits, white space, added tokens inside text, unusual valid UTF-8.
#include "tests/text/TextTestData.h"

#include "runtime/text/Nfc.h"

#include <gtest/gtest.h>

#include <set>

namespace q3::text {
namespace {

using testing::qwen3Tokenizer;
using testing::readJson;
using testing::sourcePath;

const nlohmann::ordered_json &referenceCases() {
  static nlohmann::ordered_json cases =
      readJson(sourcePath("tests/text/data/tokenizer_reference.json"));
  return cases;
}

TEST(TokenizerReference, CoversTheRequiredKindsOfText) {
  const auto &cases = referenceCases();
  EXPECT_GE(cases.size(), 150u);
  std::set<std::string> categories;
  for (const auto &c : cases)
    categories.insert(c.at("category").get<std::string>());
  for (const char *required : {"english", "chinese", "japanese", "korean", "russian", "arabic",
                               "hindi", "emoji", "code", "digits", "contractions", "whitespace",
                               "special-tokens", "unusual-valid-utf8"})
    EXPECT_TRUE(categories.count(required)) << required;
  // The reference file was made from the committed strings, all of them.
  const auto strings = readJson(sourcePath("tests/text/data/tokenizer_strings.json"));
  ASSERT_EQ(strings.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i)
    EXPECT_EQ(strings[i].at("text"), cases[i].at("text")) << i;
}

TEST(TokenizerReference, EncodeGivesTheReferenceIds) {
  const Tokenizer &tokenizer = qwen3Tokenizer();
  int mismatches = 0;
  for (const auto &c : referenceCases()) {
    const std::string text = c.at("text").get<std::string>();
    const std::vector<int32_t> expected = c.at("ids").get<std::vector<int32_t>>();
    const std::vector<int32_t> ids = tokenizer.encode(text);
    if (ids != expected) {
      ++mismatches;
      ADD_FAILURE() << "text " << nlohmann::json(text).dump() << "\n  expected "
                    << nlohmann::json(expected).dump() << "\n  got      "
                    << nlohmann::json(ids).dump();
    }
  }
  EXPECT_EQ(mismatches, 0);
}

// decode(encode(s)) == s, where s is in NFC; otherwise the tokenizer's NFC
// normalizer shows: decode(encode(s)) == NFC(s) (a handful of the strings
// are decomposed on purpose).
TEST(TokenizerReference, DecodeRoundTrips) {
  const Tokenizer &tokenizer = qwen3Tokenizer();
  int notNfc = 0;
  for (const auto &c : referenceCases()) {
    const std::string text = c.at("text").get<std::string>();
    const std::string nfc = toNfc(text);
    notNfc += nfc != text;
    EXPECT_EQ(tokenizer.decode(tokenizer.encode(text)), nfc) << nlohmann::json(text).dump();
    EXPECT_EQ(tokenizer.decode(c.at("ids").get<std::vector<int32_t>>()), nfc);
  }
  EXPECT_LT(notNfc, 10);
}

} // namespace
} // namespace q3::text
