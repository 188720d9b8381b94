#include "runtime/text/ByteLevel.h"

#include "runtime/text/Utf8.h"

namespace q3::text {
namespace {

struct ByteLevelTables {
  char32_t toChar[256];
  int16_t toByte[324]; // code points up to U+0143 (256 + 68 - 1 is the largest)
  constexpr ByteLevelTables() : toChar(), toByte() {
    for (int16_t &b : toByte)
      b = -1;
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      toChar[b] = printable ? char32_t(b) : next++;
      toByte[toChar[b]] = int16_t(b);
    }
  }
};
constexpr ByteLevelTables kTables;

} // namespace

char32_t byteLevelChar(uint8_t byte) { return kTables.toChar[byte]; }

int byteLevelByte(char32_t cp) { return cp < 324 ? kTables.toByte[cp] : -1; }

std::optional<std::string> byteLevelDecode(std::string_view text) {
  std::string bytes;
  bytes.reserve(text.size());
  const char *p = text.data();
  const char *end = p + text.size();
  while (p < end) {
    const int byte = byteLevelByte(decodeValidUtf8(&p));
    if (byte < 0)
      return std::nullopt;
    bytes += char(byte);
  }
  return bytes;
}

std::string byteLevelEncode(std::string_view bytes) {
  std::string text;
  text.reserve(bytes.size() * 2);
  for (char c : bytes)
    appendUtf8(text, byteLevelChar(uint8_t(c)));
  return text;
}

} // namespace q3::text
