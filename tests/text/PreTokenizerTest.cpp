// The Qwen2 split, piece by piece, on cases that exercise each alternative of
// the regex and the places where the regex backtracks.
#include "runtime/text/PreTokenizer.h"
#include "runtime/text/Unicode.h"

#include <gtest/gtest.h>

namespace q3::text {
namespace {

std::vector<std::string> split(std::string_view text) {
  std::vector<std::string_view> pieces;
  splitQwen2(text, pieces);
  return std::vector<std::string>(pieces.begin(), pieces.end());
}

using Pieces = std::vector<std::string>;

TEST(PreTokenizer, WordsTakeOneLeadingNonLetter) {
  EXPECT_EQ(split("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(split("(foo) bar"), (Pieces{"(foo", ")", " bar"}));
  EXPECT_EQ(split("\tx"), (Pieces{"\tx"}));
  EXPECT_EQ(split("\nx"), (Pieces{"\n", "x"})); // a line break never leads a word
}

TEST(PreTokenizer, DigitsAreSingle) {
  EXPECT_EQ(split("x2024"), (Pieces{"x", "2", "0", "2", "4"}));
  EXPECT_EQ(split(" 12"), (Pieces{" ", "1", "2"}));
}

TEST(PreTokenizer, ContractionsFoldCase) {
  EXPECT_EQ(split("I'M"), (Pieces{"I", "'M"}));
  EXPECT_EQ(split("we'LL"), (Pieces{"we", "'LL"}));
  EXPECT_EQ(split("it's"), (Pieces{"it", "'s"}));
  EXPECT_EQ(split("x'steve"), (Pieces{"x", "'s", "teve"}));
  EXPECT_EQ(split("a'\xC5\xBF"), (Pieces{"a", "'\xC5\xBF"})); // U+017F folds to s
  EXPECT_EQ(split("it\xE2\x80\x99s"), (Pieces{"it", "\xE2\x80\x99s"})); // U+2019 is no apostrophe
}

TEST(PreTokenizer, PunctuationRunsTakeOneSpaceAndTrailingLineBreaks) {
  EXPECT_EQ(split("a !!!\n\nb"), (Pieces{"a", " !!!\n\n", "b"}));
  EXPECT_EQ(split("x  ..."), (Pieces{"x", " ", " ..."}));
}

TEST(PreTokenizer, WhiteSpaceRuns) {
  // \s+(?!\S) leaves the last space to the word that follows.
  EXPECT_EQ(split("a   b"), (Pieces{"a", "  ", " b"}));
  // At the end of the text the whole run is one piece.
  EXPECT_EQ(split("a   "), (Pieces{"a", "   "}));
  // \s*[\r\n]+ ends at the last line break of the run.
  EXPECT_EQ(split("a \n \n  b"), (Pieces{"a", " \n \n", " ", " b"}));
  EXPECT_EQ(split("a\r\n\r\nb"), (Pieces{"a", "\r\n\r\n", "b"}));
  // A single space before a non-letter, non-space: \s+.
  EXPECT_EQ(split("a 1"), (Pieces{"a", " ", "1"}));
  // White space beyond ASCII (U+3000) counts, as Oniguruma's \s does.
  EXPECT_EQ(split("a\xE3\x80\x80\xE3\x80\x80" "b"), (Pieces{"a", "\xE3\x80\x80", "\xE3\x80\x80" "b"}));
}

TEST(PreTokenizer, UnicodeClasses) {
  EXPECT_EQ(charClass(U'a'), CharClass::Letter);
  EXPECT_EQ(charClass(U'\u4F60'), CharClass::Letter);  // 你
  EXPECT_EQ(charClass(U'\u0663'), CharClass::Number);  // Arabic-Indic 3
  EXPECT_EQ(charClass(U'\u2163'), CharClass::Number);  // Roman numeral four (Nl)
  EXPECT_EQ(charClass(U'\u00BD'), CharClass::Number);  // ½ (No)
  EXPECT_EQ(charClass(U'\u0085'), CharClass::Space);   // NEL is White_Space
  EXPECT_EQ(charClass(U'\uFEFF'), CharClass::Other);   // BOM is not
  EXPECT_EQ(charClass(U'\u0301'), CharClass::Other);   // a mark is neither L nor N
  EXPECT_EQ(charClass(U'\U0001F600'), CharClass::Other);
  EXPECT_EQ(charClass(U'\U00013460'), CharClass::Other); // unassigned in Unicode 15.0
}

TEST(PreTokenizer, PiecesCoverTheText) {
  const std::string text = "Mixed: 日本語, 123 and  emoji 👍🏽!\r\n\tEnd  ";
  std::string joined;
  for (const std::string &piece : split(text))
    joined += piece;
  EXPECT_EQ(joined, text);
}

} // namespace
} // namespace q3::text
