#include "runtime/TokenList.h"

#include <charconv>
#include <limits>
#include <stdexcept>

namespace q3::runtime {
namespace {

std::string trim(const std::string &text) {
  const size_t first = text.find_first_not_of(" \t");
  if (first == std::string::npos)
    return "";
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

} // namespace

std::vector<int32_t> parseTokenIds(const std::string &text) {
  if (trim(text).empty())
    throw std::invalid_argument("--tokens: expected at least one token id, as in --tokens 1,2,3");
  std::vector<int32_t> tokens;
  for (size_t begin = 0; begin <= text.size();) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos)
      end = text.size();
    const std::string item = trim(text.substr(begin, end - begin));
    int64_t value = -1;
    auto [last, error] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || error != std::errc() || last != item.data() + item.size() || value < 0 ||
        value > std::numeric_limits<int32_t>::max())
      throw std::invalid_argument("--tokens: '" + item +
                                  "' is not a token id (expected non-negative integers "
                                  "separated by commas)");
    tokens.push_back(int32_t(value));
    begin = end + 1;
  }
  return tokens;
}

} // namespace q3::runtime
