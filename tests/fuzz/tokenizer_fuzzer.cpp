// Fuzzes the tokenizer's two readers, tokenizer.json and the compiled form
// (an input starting with its magic, "Q3TOKEN1"): any input must either load
// or raise LoadError with a one-line message (never crash, hang, or throw
// anything else). A tokenizer that loads must encode text, including the
// input itself when it is UTF-8, into ids it can decode back to valid UTF-8;
// and the decode of what it encodes must be the normalized text again (NFC,
// or the text as given when the file has no normalizer), since byte-level
// BPE loses nothing. A JSON one that loads must compile to a form that loads
// and encodes the same.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "runtime/LoadError.h"
#include "runtime/text/Nfc.h"
#include "runtime/text/Tokenizer.h"
#include "runtime/text/Utf8.h"

using q3::runtime::LoadError;
using q3::text::Tokenizer;

static void check(bool condition, const char *what) {
  if (!condition) {
    std::fprintf(stderr, "check failed: %s\n", what);
    std::abort();
  }
}

static void roundTrip(const Tokenizer &tokenizer, std::string_view text) {
  const std::vector<int32_t> ids = tokenizer.encode(text, /*parseAddedTokens=*/false);
  for (int32_t id : ids)
    check(tokenizer.isToken(id), "encode gave an id that is no token");
  const std::string normalized =
      tokenizer.normalizesToNfc() ? q3::text::toNfc(text) : std::string(text);
  check(tokenizer.decode(ids) == normalized, "decode(encode(text)) != normalized text");
  const std::string withAdded = tokenizer.decode(tokenizer.encode(text));
  check(q3::text::findInvalidUtf8(withAdded) == std::string::npos, "decode gave invalid UTF-8");
}

static constexpr std::string_view kSample =
    "Hello, world! 'tis 2024\r\n\t  caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD "
    "e\xCC\x81 \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD <|im_end|>";

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string_view input(reinterpret_cast<const char *>(data), size);
  const bool compiled = input.substr(0, 8) == "Q3TOKEN1";
  std::unique_ptr<Tokenizer> tokenizer;
  try {
    tokenizer = compiled ? Tokenizer::fromCompiled(input, "fuzz.compiled")
                         : Tokenizer::fromJson(input, "fuzz.json");
  } catch (const LoadError &error) {
    check(std::string_view(error.what()).find('\n') == std::string_view::npos,
          "a LoadError message spans lines");
    return 0;
  }
  roundTrip(*tokenizer, kSample);
  if (q3::text::findInvalidUtf8(input) == std::string_view::npos && size < 4096)
    roundTrip(*tokenizer, input);
  if (!compiled) {
    const std::unique_ptr<Tokenizer> again =
        Tokenizer::fromCompiled(tokenizer->compile(), "fuzz.compiled");
    check(again->encode(kSample) == tokenizer->encode(kSample), "the compiled form encodes "
                                                                "differently");
  }
  return 0;
}
