#include "runtime/text/Utf8.h"

namespace q3::text {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD"; // U+FFFD

/// The allowed range of the second byte after lead byte `lead` (Unicode
/// table 3-7: it excludes overlong forms, surrogates and values past
/// U+10FFFF); later continuation bytes are always 80..BF.
bool secondByteOk(uint8_t lead, uint8_t byte) {
  switch (lead) {
  case 0xE0:
    return byte >= 0xA0 && byte <= 0xBF;
  case 0xED:
    return byte >= 0x80 && byte <= 0x9F;
  case 0xF0:
    return byte >= 0x90 && byte <= 0xBF;
  case 0xF4:
    return byte >= 0x80 && byte <= 0x8F;
  default:
    return byte >= 0x80 && byte <= 0xBF;
  }
}

} // namespace

Utf8Sequence readUtf8Sequence(const uint8_t *data, size_t size) {
  const uint8_t lead = data[0];
  if (lead < 0x80)
    return {Utf8Sequence::Kind::Valid, 1, lead};
  size_t length;
  char32_t cp;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    cp = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    cp = lead & 0x0F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    cp = lead & 0x07;
  } else {
    return {Utf8Sequence::Kind::Invalid, 1, 0};
  }
  for (size_t i = 1; i < length; ++i) {
    if (i == size)
      return {Utf8Sequence::Kind::Incomplete, i, 0};
    const uint8_t byte = data[i];
    const bool ok = i == 1 ? secondByteOk(lead, byte) : (byte >= 0x80 && byte <= 0xBF);
    if (!ok)
      return {Utf8Sequence::Kind::Invalid, i, 0};
    cp = (cp << 6) | (byte & 0x3F);
  }
  return {Utf8Sequence::Kind::Valid, length, cp};
}

size_t findInvalidUtf8(std::string_view text) {
  const auto *data = reinterpret_cast<const uint8_t *>(text.data());
  size_t i = 0;
  while (i < text.size()) {
    if (data[i] < 0x80) {
      ++i;
      continue;
    }
    Utf8Sequence sequence = readUtf8Sequence(data + i, text.size() - i);
    if (sequence.kind != Utf8Sequence::Kind::Valid)
      return i;
    i += sequence.length;
  }
  return std::string_view::npos;
}

void appendUtf8(std::string &out, char32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

std::string toValidUtf8(std::string_view bytes) {
  Utf8StreamDecoder decoder;
  std::string out = decoder.push(bytes);
  out += decoder.finish();
  return out;
}

std::string Utf8StreamDecoder::push(std::string_view bytes) {
  pending_.append(bytes);
  const auto *data = reinterpret_cast<const uint8_t *>(pending_.data());
  const size_t size = pending_.size();
  std::string out;
  out.reserve(size);
  size_t i = 0;
  while (i < size) {
    if (data[i] < 0x80) {
      out += char(data[i++]);
      continue;
    }
    Utf8Sequence sequence = readUtf8Sequence(data + i, size - i);
    if (sequence.kind == Utf8Sequence::Kind::Incomplete)
      break;
    if (sequence.kind == Utf8Sequence::Kind::Valid)
      out.append(pending_, i, sequence.length);
    else
      out += kReplacement;
    i += sequence.length;
  }
  pending_.erase(0, i);
  return out;
}

std::string Utf8StreamDecoder::finish() {
  if (pending_.empty())
    return {};
  pending_.clear();
  return std::string(kReplacement);
}

} // namespace q3::text
