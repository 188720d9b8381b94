// The tokenizer's own rules on small hand-made tokenizer.json files: BPE
// merge order, added tokens, decoding, and the one-line errors of the loader.
#include "tests/text/MiniTokenizer.h"
#include "tests/text/TextTestData.h"

#include "runtime/LoadError.h"
#include "runtime/text/TextError.h"
#include "runtime/text/Tokenizer.h"

#include <gtest/gtest.h>

namespace q3::text {
namespace {

using testing::addedToken;
using testing::bl;
using testing::miniTokenizerJson;
using Ids = std::vector<int32_t>;

std::unique_ptr<Tokenizer> load(const nlohmann::ordered_json &json) {
  return Tokenizer::fromJson(json.dump(), "mini.json");
}

std::string loadError(const nlohmann::ordered_json &json) {
  try {
    load(json);
  } catch (const runtime::LoadError &error) {
    return error.what();
  }
  return "(no error)";
}

TEST(Tokenizer, MergesLowestRankFirstLeftmostAmongEquals) {
  // ids: bytes 0-255, then "ab" 256, "bc" 257, "aa" 258.
  auto t = load(miniTokenizerJson({{"b", "c"}, {"a", "b"}, {"a", "a"}}));
  // "abc": (b,c) has the lower rank, so "a" + "bc", although "ab" exists.
  EXPECT_EQ(t->encode("abc"), (Ids{'a', 256}));
  // "aaa": equal pairs merge leftmost first.
  EXPECT_EQ(t->encode("aaa"), (Ids{258, 'a'}));
  EXPECT_EQ(t->encode("aaaa"), (Ids{258, 258}));
  // Pieces never merge across the pre-tokenizer's split.
  EXPECT_EQ(t->encode("a b"), (Ids{'a', ' ', 'b'}));
}

TEST(Tokenizer, AddedTokensAreMatchedWholeLongestFirst) {
  nlohmann::ordered_json added = nlohmann::ordered_json::array();
  added.push_back(addedToken(300, "<|x|>", true));
  added.push_back(addedToken(301, "<|x|>y", false));
  added.push_back(addedToken(302, "<t>", false));
  auto t = load(miniTokenizerJson({}, added));
  EXPECT_EQ(t->encode("a<|x|>b"), (Ids{'a', 300, 'b'}));
  EXPECT_EQ(t->encode("<|x|>y"), (Ids{301}));
  EXPECT_EQ(t->encode("<t><|x|"), (Ids{302, '<', '|', 'x', '|'}));
  EXPECT_EQ(t->encode("a<|x|>b", /*parseAddedTokens=*/false).size(), 7u);
  EXPECT_TRUE(t->isSpecial(300));
  EXPECT_FALSE(t->isSpecial(302));
  EXPECT_EQ(t->decode({'a', 300, 302}), "a<|x|><t>");
  EXPECT_EQ(t->decode({'a', 300, 302}, /*skipSpecial=*/true), "a<t>");
  EXPECT_EQ(t->findToken("<t>"), 302);
  EXPECT_EQ(t->findToken("a"), 'a');
  EXPECT_EQ(t->vocabSize(), 303);
  EXPECT_FALSE(t->isToken(299)); // a gap between the vocabulary and the added tokens
}

TEST(Tokenizer, LstripAndRstripSwallowWhiteSpace) {
  nlohmann::ordered_json token = addedToken(300, "<m>", true);
  token["lstrip"] = true;
  token["rstrip"] = true;
  auto t = load(miniTokenizerJson({}, nlohmann::ordered_json::array({token})));
  EXPECT_EQ(t->encode("a  <m>  b"), (Ids{'a', 300, 'b'}));
}

TEST(Tokenizer, NormalizesToNfcBeforeSplitting) {
  auto t = load(miniTokenizerJson({}));
  // e + U+0301 becomes U+00E9 (bytes C3 A9).
  EXPECT_EQ(t->encode("e\xCC\x81"), (Ids{0xC3, 0xA9}));
}

TEST(Tokenizer, RejectsInvalidUtf8NamingTheByte) {
  auto t = load(miniTokenizerJson({}));
  try {
    t->encode("ok\xC3(");
    FAIL();
  } catch (const TextError &error) {
    EXPECT_STREQ(error.what(), "invalid UTF-8 at byte 2 of the text (0xC3)");
  }
}

TEST(Tokenizer, StreamDecodingHoldsBackPartialCharacters) {
  auto t = load(miniTokenizerJson({}));
  TokenTextStream stream(*t);
  EXPECT_EQ(stream.push(0xE4), "");
  EXPECT_EQ(stream.push(0xBD), "");
  EXPECT_EQ(stream.push(0xA0), "\xE4\xBD\xA0");
  EXPECT_EQ(stream.push(0xF0), "");
  EXPECT_EQ(stream.finish(), "\xEF\xBF\xBD");
}

TEST(TokenizerErrors, FilesThatCannotBeRead) {
  EXPECT_THROW(Tokenizer::fromFile("/nonexistent/tokenizer.json"), runtime::LoadError);
  try {
    Tokenizer::fromFile("/nonexistent/tokenizer.json");
  } catch (const runtime::LoadError &error) {
    EXPECT_STREQ(error.what(), "/nonexistent/tokenizer.json: cannot open: No such file or directory");
  }
  const std::string text = miniTokenizerJson({{"a", "b"}}).dump();
  try {
    Tokenizer::fromJson(text.substr(0, text.size() / 2), "cut.json");
    FAIL();
  } catch (const runtime::LoadError &error) {
    EXPECT_EQ(std::string(error.what()).rfind("cut.json: invalid JSON: ", 0), 0u) << error.what();
    EXPECT_EQ(std::string(error.what()).find('\n'), std::string::npos);
  }
  try {
    Tokenizer::fromJson("[1, 2]", "array.json");
    FAIL();
  } catch (const runtime::LoadError &error) {
    EXPECT_STREQ(error.what(), "array.json: expected a JSON object, found array");
  }
}

TEST(TokenizerErrors, NameTheField) {
  auto json = miniTokenizerJson({{"a", "b"}});
  auto broken = json;
  broken["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\w+";
  EXPECT_EQ(loadError(broken), "mini.json: pre_tokenizer.pretokenizers[0].pattern: expected "
                               "{\"Regex\": <the Qwen2 pattern>}, found {\"Regex\":\"\\\\w+\"}");
  broken = json;
  broken["normalizer"] = {{"type", "Lowercase"}};
  EXPECT_EQ(loadError(broken), "mini.json: normalizer: expected null or NFC (the only normalizer "
                               "supported), found {\"type\":\"Lowercase\"}");
  broken = json;
  broken["model"]["merges"].push_back(bl("x") + " " + bl("zz"));
  EXPECT_EQ(loadError(broken), "mini.json: model.merges[1]: 'zz' is not in model.vocab");
  broken = json;
  broken["model"]["merges"][0] = "ab";
  EXPECT_EQ(loadError(broken), "mini.json: model.merges[0]: expected two tokens separated by one "
                               "space, found 'ab'");
  broken = json;
  broken["model"]["vocab"].erase(bl("\n"));
  EXPECT_EQ(loadError(broken), "mini.json: model.vocab: expected a token for every byte, found "
                               "none for byte 0x0A ('\xC4\x8A')");
  broken = json;
  broken["model"]["vocab"]["with space"] = 999;
  EXPECT_EQ(loadError(broken), "mini.json: model.vocab: token 'with space' (id 999): expected a "
                               "non-empty string of byte-level characters (GPT-2's byte alphabet)");
  broken = json;
  broken["model"]["vocab"][bl("zz")] = 0;
  EXPECT_EQ(loadError(broken), "mini.json: model.vocab: id 0 is given to two tokens, 'Ā' and 'zz'");
  broken = json;
  broken["model"]["vocab"][bl("q")] = "seven";
  EXPECT_EQ(loadError(broken),
            "mini.json: model.vocab: token 'q': expected an integer id, found a string");
  broken = json;
  broken["model"]["byte_fallback"] = true;
  EXPECT_EQ(loadError(broken), "mini.json: model.byte_fallback: expected false (the only setting "
                               "supported), found true");
  broken = json;
  broken["added_tokens"] = {addedToken(5000000, "<x>", true)};
  EXPECT_EQ(loadError(broken),
            "mini.json: added_tokens[0].id: expected an integer in [0, 4194303], found 5000000");
  // An added token on an id the vocabulary already has (the tokenizer
  // fuzzer's find): it would decode as the added token.
  broken = json;
  broken["added_tokens"] = {addedToken(0, "<x>", true)};
  EXPECT_EQ(loadError(broken),
            "mini.json: added_tokens: '<x>' has id 0, which the vocabulary gives to '\\x00'");
  broken = json;
  broken["added_tokens"] = {addedToken(900, "<x>", true), addedToken(900, "<y>", true)};
  EXPECT_EQ(loadError(broken),
            "mini.json: added_tokens: '<y>' has id 900, which another added token gives to '<x>'");
  broken = json;
  broken.erase("decoder");
  EXPECT_EQ(loadError(broken), "mini.json: decoder: expected an object, found null");
}

} // namespace
} // namespace q3::text
