// Token ids as users type them on a command line: "1,2,3".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace q3::runtime {

/// Non-negative int32 ids separated by commas (spaces around items allowed),
/// at least one. Throws std::invalid_argument with a one-line "--tokens: ..."
/// message naming the bad item.
std::vector<int32_t> parseTokenIds(const std::string &text);

} // namespace q3::runtime
