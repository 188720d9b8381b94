#include "runtime/LoadError.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace q3::runtime {

namespace {

// Generous enough for any real path; only bounds pathological untrusted text.
constexpr size_t kMaxPrintableBytes = 4096;

} // namespace

size_t utf8SequenceLength(std::string_view text, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  unsigned char lead = byte(i);
  size_t length;
  unsigned char low = 0x80, high = 0xbf; // allowed range of the first continuation byte
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    if (lead == 0xe0)
      low = 0xa0; // overlong
    if (lead == 0xed)
      high = 0x9f; // surrogates
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    if (lead == 0xf0)
      low = 0x90; // overlong
    if (lead == 0xf4)
      high = 0x8f; // above U+10FFFF
  } else {
    return 0;
  }
  if (i + length > text.size())
    return 0;
  if (byte(i + 1) < low || byte(i + 1) > high)
    return 0;
  for (size_t k = 2; k < length; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xbf)
      return 0;
  return length;
}

std::string printable(std::string_view text) {
  std::string out;
  size_t i = 0;
  while (i < text.size() && out.size() < kMaxPrintableBytes) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c >= 0x20 && c < 0x7f) {
      out += char(c);
    } else if (size_t length = c >= 0x80 ? utf8SequenceLength(text, i) : 0) {
      out.append(text.substr(i, length));
      i += length;
      continue;
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
    ++i;
  }
  if (i < text.size())
    out += "...";
  return out;
}

std::string formatShape(const std::vector<int64_t> &shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

std::string describeJsonError(const std::exception &error) {
  std::string_view message = error.what();
  if (!message.empty() && message.front() == '[') {
    size_t close = message.find("] ");
    if (close != std::string_view::npos)
      message.remove_prefix(close + 2);
  }
  return printable(message);
}

} // namespace q3::runtime
