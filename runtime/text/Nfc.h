// Unicode Normalization Form C (UAX #15), the normalizer Qwen3's
// tokenizer.json declares. Text that passes the quick check (all of ASCII,
// and most text in practice) is returned unchanged without copying work.
#pragma once

#include <string>
#include <string_view>

namespace q3::text {

/// True when `utf8` (valid UTF-8) is certainly in NFC by the quick check
/// (NFC_Quick_Check and combining-class order); false means "maybe not".
bool isNfcQuick(std::string_view utf8);

/// The NFC form of `utf8`, which must be valid UTF-8.
std::string toNfc(std::string_view utf8);

} // namespace q3::text
