// The compiled tokenizer (what q3c embeds in an artifact) tokenizes exactly
// as the tokenizer.json it came from, and its reader refuses a damaged one
// with a message rather than crashing or tokenizing wrong.
#include "tests/text/MiniTokenizer.h"
#include "tests/text/TextTestData.h"

#include "runtime/LoadError.h"
#include "runtime/text/Tokenizer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace q3::text {
namespace {

using testing::addedToken;
using testing::miniTokenizerJson;
using testing::qwen3Tokenizer;
using testing::readJson;
using testing::sourcePath;
using Ids = std::vector<int32_t>;

std::unique_ptr<Tokenizer> roundTrip(const Tokenizer &tokenizer) {
  return Tokenizer::fromCompiled(tokenizer.compile(), "mini.compiled");
}

/// Everything a caller can see of a tokenizer's ids, and its encodings of
/// `texts`, equal in both.
void expectSameTokenizer(const Tokenizer &expected, const Tokenizer &actual,
                         const std::vector<std::string> &texts) {
  ASSERT_EQ(actual.vocabSize(), expected.vocabSize());
  for (int32_t id = 0; id < expected.vocabSize(); ++id) {
    ASSERT_EQ(actual.tokenBytes(id), expected.tokenBytes(id)) << id;
    ASSERT_EQ(actual.isToken(id), expected.isToken(id)) << id;
    ASSERT_EQ(actual.isSpecial(id), expected.isSpecial(id)) << id;
  }
  ASSERT_EQ(actual.addedTokens().size(), expected.addedTokens().size());
  for (size_t i = 0; i < expected.addedTokens().size(); ++i) {
    const AddedToken &a = expected.addedTokens()[i], &b = actual.addedTokens()[i];
    EXPECT_EQ(std::tie(a.id, a.content, a.special, a.normalized, a.lstrip, a.rstrip),
              std::tie(b.id, b.content, b.special, b.normalized, b.lstrip, b.rstrip));
  }
  EXPECT_EQ(actual.normalizesToNfc(), expected.normalizesToNfc());
  for (const std::string &text : texts) {
    EXPECT_EQ(actual.encode(text), expected.encode(text)) << text;
    EXPECT_EQ(actual.encode(text, /*parseAddedTokens=*/false),
              expected.encode(text, /*parseAddedTokens=*/false))
        << text;
  }
}

TEST(CompiledTokenizer, Qwen3EncodesAsItsJson) {
  const Tokenizer &json = qwen3Tokenizer();
  const std::string compiled = json.compile();
  std::unique_ptr<Tokenizer> loaded = Tokenizer::fromCompiled(compiled, "qwen3.compiled");
  std::vector<std::string> texts;
  for (const auto &entry : readJson(sourcePath("tests/text/data/tokenizer_strings.json")))
    texts.push_back(entry["text"].get<std::string>());
  ASSERT_GT(texts.size(), 100u);
  expectSameTokenizer(json, *loaded, texts);
  // Compiling what was loaded gives the same bytes: nothing was lost.
  EXPECT_EQ(loaded->compile(), compiled);
  // A third of the JSON's size.
  EXPECT_LT(compiled.size(), size_t(4) << 20);
}

TEST(CompiledTokenizer, KeepsAddedTokenOptionsAndIgnoreMerges) {
  nlohmann::ordered_json added = nlohmann::ordered_json::array();
  added.push_back(addedToken(300, "<|x|>", true));
  nlohmann::ordered_json stripped = addedToken(301, "<t>", false);
  stripped["lstrip"] = true;
  stripped["rstrip"] = true;
  added.push_back(stripped);
  nlohmann::ordered_json normalized = addedToken(302, "caf\xC3\xA9", false);
  normalized["normalized"] = true;
  added.push_back(normalized);
  added.push_back(addedToken(256, "ab", false)); // also a vocabulary token
  nlohmann::ordered_json json = miniTokenizerJson({{"a", "b"}, {"b", "c"}, {"ab", "c"}}, added);
  const std::vector<std::string> texts = {"abc ab <t> x <|x|>abc", "cafe\xCC\x81 abcab",
                                          "  <t>  abcc<|x|>"};
  for (bool ignoreMerges : {false, true}) {
    json["model"]["ignore_merges"] = ignoreMerges;
    std::unique_ptr<Tokenizer> fromJson = Tokenizer::fromJson(json.dump(), "mini.json");
    expectSameTokenizer(*fromJson, *roundTrip(*fromJson), texts);
  }
}

TEST(CompiledTokenizer, KeepsAnAddedTokenListedMoreTimesThanThereAreIds) {
  // tokenizer.json may repeat an entry; the compiled form keeps the list.
  nlohmann::ordered_json added = nlohmann::ordered_json::array();
  for (int i = 0; i < 300; ++i)
    added.push_back(addedToken(256, "<|x|>", i % 2 == 0));
  std::unique_ptr<Tokenizer> fromJson =
      Tokenizer::fromJson(miniTokenizerJson({}, added).dump(), "mini.json");
  ASSERT_EQ(fromJson->vocabSize(), 257);
  expectSameTokenizer(*fromJson, *roundTrip(*fromJson), {"a<|x|>b"});
}

/// A small compiled tokenizer and the offsets of its parts, to damage.
struct Compiled {
  std::string bytes;
  size_t tokenEnds = 32 + 1024, tokenFlags, merges, added;
  explicit Compiled(const Tokenizer &tokenizer) : bytes(tokenizer.compile()) {
    tokenFlags = tokenEnds + 4 * size_t(tokenizer.vocabSize());
    merges = tokenFlags + size_t(tokenizer.vocabSize());
  }
  void putU32(size_t offset, uint32_t value) { std::memcpy(&bytes[offset], &value, 4); }
};

std::string loadError(const std::string &bytes) {
  try {
    Tokenizer::fromCompiled(bytes, "bad.compiled");
  } catch (const runtime::LoadError &error) {
    return error.what();
  }
  return "(no error)";
}

TEST(CompiledTokenizer, RefusesDamageNamingWhatIsWrong) {
  // ids: bytes 0-255, "ab" 256, "bc" 257; added "<|x|>" 258.
  nlohmann::ordered_json added = nlohmann::ordered_json::array();
  added.push_back(addedToken(258, "<|x|>", true));
  std::unique_ptr<Tokenizer> tokenizer =
      Tokenizer::fromJson(miniTokenizerJson({{"a", "b"}, {"b", "c"}}, added).dump(), "mini.json");
  const Compiled good(*tokenizer);
  ASSERT_EQ(loadError(good.bytes), "(no error)");
  auto damaged = [&](auto change) {
    Compiled copy = good;
    change(copy);
    return loadError(copy.bytes);
  };
  auto has = [](const std::string &message, const std::string &part) {
    return message.find(part) != std::string::npos && message.find('\n') == std::string::npos &&
           message.rfind("bad.compiled: compiled tokenizer: ", 0) == 0;
  };
  EXPECT_PRED2(has, loadError(good.bytes.substr(0, 100)), "expected at least 1056 bytes");
  EXPECT_PRED2(has, loadError(good.bytes.substr(0, good.bytes.size() - 1)), "expected ");
  EXPECT_PRED2(has, damaged([](Compiled &c) { c.bytes[0] = 'X'; }), "expected magic");
  EXPECT_PRED2(has, damaged([](Compiled &c) { c.putU32(8, 8); }), "flags");
  EXPECT_PRED2(has, damaged([](Compiled &c) { c.putU32(12, 0); }), "token count");
  EXPECT_PRED2(has, damaged([](Compiled &c) { c.putU32(16, 1u << 30); }), "1073741824 merges");
  EXPECT_PRED2(has, damaged([](Compiled &c) { c.putU32(28, 1); }), "token text: expected under");
  // Byte 'a' points at the token of 'b'.
  EXPECT_PRED2(has, damaged([](Compiled &c) { c.putU32(32 + 4 * 'a', 'b'); }),
               "the token of byte 0x61: token 98 is 'b', not that byte");
  // Token 256 ("ab") ends before token 255 does.
  EXPECT_PRED2(has, damaged([](Compiled &c) { c.putU32(c.tokenEnds + 4 * 256, 3); }),
               "token 256: expected its bytes to end in");
  EXPECT_PRED2(has, damaged([](Compiled &c) { c.bytes[c.tokenFlags + 5] = char(8); }),
               "token 5: flags 0x8");
  EXPECT_PRED2(has, damaged([](Compiled &c) { c.bytes[c.tokenFlags + 5] = char(4); }),
               "token 5: flags 0x4");
  // Merge 0 ("a" + "b" -> 256) made to claim "bc".
  EXPECT_PRED2(has, damaged([](Compiled &c) { c.putU32(c.merges + 8, 257); }),
               "merge 0: tokens 97 and 98 do not spell token 257");
  EXPECT_PRED2(has, damaged([](Compiled &c) { c.putU32(c.merges + 4, 1u << 31); }),
               "merge 0: expected a vocabulary token's id, found -2147483648");
  // The added token's id points at a vocabulary token.
  EXPECT_PRED2(has, damaged([](Compiled &c) { c.putU32(c.merges + 24, 256); }),
               "added token 0: expected the id of a token flagged added, found 256");
  EXPECT_PRED2(has, damaged([](Compiled &c) { c.putU32(c.merges + 28, 16); }),
               "added token 0: expected flags in bits 0 to 3");
}

TEST(CompiledTokenizer, RandomDamageLoadsOrFailsCleanly) {
  // The fuzzer explores this further (tests/fuzz/tokenizer_fuzzer.cpp); here
  // every byte of a small one is changed in turn, and what loads still
  // round-trips text through its bytes.
  nlohmann::ordered_json added = nlohmann::ordered_json::array();
  added.push_back(addedToken(258, "<|x|>", true));
  std::unique_ptr<Tokenizer> tokenizer =
      Tokenizer::fromJson(miniTokenizerJson({{"a", "b"}, {"b", "c"}}, added).dump(), "mini.json");
  const std::string good = tokenizer->compile();
  std::mt19937 random(7);
  int loaded = 0;
  for (size_t offset = 0; offset < good.size(); ++offset) {
    std::string bytes = good;
    bytes[offset] = char(random());
    std::unique_ptr<Tokenizer> damaged;
    try {
      damaged = Tokenizer::fromCompiled(bytes, "bad.compiled");
    } catch (const runtime::LoadError &) {
      continue;
    }
    ++loaded;
    const std::string text = "abc <|x|> bca";
    EXPECT_EQ(damaged->decode(damaged->encode(text, /*parseAddedTokens=*/false)), text) << offset;
  }
  EXPECT_GT(loaded, 0); // the blob's bytes of tokens no merge spells, say
}

} // namespace
} // namespace q3::text
