// GPT-2's byte-level alphabet: every byte is shown as one printable code
// point, so that BPE vocabularies are strings. Bytes 0x21-0x7E, 0xA1-0xAC and
// 0xAE-0xFF stand for themselves; the other 68 bytes take U+0100, U+0101, ...
// in byte order (space 0x20 is 'Ġ' U+0120, newline 0x0A is 'Ċ' U+010A).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace q3::text {

char32_t byteLevelChar(uint8_t byte);

/// The byte `cp` stands for, or -1 when `cp` is not in the alphabet.
int byteLevelByte(char32_t cp);

/// Raw bytes of a byte-level string (valid UTF-8), or nothing when it holds a
/// character outside the alphabet.
std::optional<std::string> byteLevelDecode(std::string_view text);

/// The byte-level string of raw bytes.
std::string byteLevelEncode(std::string_view bytes);

} // namespace q3::text
