// The compiled tokenizer: what tokenizer.json says once it has been checked,
// as flat little-endian arrays that load without parsing. Byte layout and
// the checks below: docs/text.md, "The compiled tokenizer". The reader
// trusts nothing: every count is bounded, every id and offset checked, and a
// merge must spell its result, so a corrupt section fails with a message
// instead of tokenizing wrong.
#include "runtime/text/Tokenizer.h"

#include "runtime/LittleEndian.h"
#include "runtime/LoadError.h"
#include "runtime/text/TokenKind.h"
#include "runtime/text/Utf8.h"

#include <fmt/format.h>

#include <cstring>

namespace q3::text {
namespace {

constexpr char kMagic[8] = {'Q', '3', 'T', 'O', 'K', 'E', 'N', '1'};
constexpr size_t kHeaderBytes = 32;
constexpr uint32_t kNfcFlag = 1;          // the normalizer is NFC
constexpr uint32_t kIgnoreMergesFlag = 2; // model.ignore_merges
constexpr uint32_t kAddedSpecial = 1, kAddedNormalized = 2, kAddedLstrip = 4, kAddedRstrip = 8;
constexpr uint64_t kMaxBlobBytes = uint64_t(1) << 32; // token ends are u32

void appendU32(std::string &out, uint32_t value) {
  uint8_t bytes[4];
  runtime::storeLittleEndianU32(bytes, value);
  out.append(reinterpret_cast<const char *>(bytes), sizeof bytes);
}

void appendU64(std::string &out, uint64_t value) {
  uint8_t bytes[8];
  runtime::storeLittleEndianU64(bytes, value);
  out.append(reinterpret_cast<const char *>(bytes), sizeof bytes);
}

/// Little-endian reads at checked offsets of the section.
class Reader {
public:
  Reader(std::string_view bytes, const std::string &displayName)
      : bytes_(bytes), name_(displayName) {}

  [[noreturn]] void fail(const std::string &what) const {
    throw runtime::LoadError(
        fmt::format("{}: compiled tokenizer: {}", runtime::printable(name_), what));
  }
  uint32_t u32(size_t offset) const { return runtime::loadLittleEndianU32(at(offset)); }
  uint64_t u64(size_t offset) const { return runtime::loadLittleEndianU64(at(offset)); }
  int32_t i32(size_t offset) const { return int32_t(u32(offset)); }
  uint8_t u8(size_t offset) const { return uint8_t(bytes_[offset]); }
  std::string_view view(size_t offset, size_t length) const {
    return bytes_.substr(offset, length);
  }

private:
  const uint8_t *at(size_t offset) const {
    return reinterpret_cast<const uint8_t *>(bytes_.data()) + offset;
  }

  std::string_view bytes_;
  const std::string &name_;
};

/// Where each array of a section with these counts starts.
struct Layout {
  uint64_t byteTokens = kHeaderBytes;
  uint64_t tokenEnds = 0, tokenFlags = 0, merges = 0, added = 0, blob = 0, end = 0;

  Layout(uint64_t tokens, uint64_t merges_, uint64_t added_, uint64_t blobBytes) {
    tokenEnds = byteTokens + 256 * 4;
    tokenFlags = tokenEnds + 4 * tokens;
    merges = tokenFlags + tokens;
    added = merges + 12 * merges_;
    blob = added + 8 * added_;
    end = blob + blobBytes;
  }
};

} // namespace

std::string Tokenizer::compile() const {
  const std::vector<BpeMerge> merges = bpe_->mergesInRankOrder();
  const uint64_t blobBytes = tokenText_.size();
  const Layout layout(tokenEnds_.size(), merges.size(), added_.size(), blobBytes);
  std::string out(kMagic, sizeof kMagic);
  out.reserve(size_t(layout.end));
  appendU32(out, (nfc_ ? kNfcFlag : 0) | (bpe_->ignoresMerges() ? kIgnoreMergesFlag : 0));
  appendU32(out, uint32_t(tokenEnds_.size()));
  appendU32(out, uint32_t(merges.size()));
  appendU32(out, uint32_t(added_.size()));
  appendU64(out, blobBytes);
  for (int32_t token : bpe_->byteTokens())
    appendU32(out, uint32_t(token));
  for (uint32_t end : tokenEnds_)
    appendU32(out, end);
  out.append(reinterpret_cast<const char *>(tokenFlags_.data()), tokenFlags_.size());
  for (const BpeMerge &merge : merges)
    for (int32_t id : {merge.left, merge.right, merge.result})
      appendU32(out, uint32_t(id));
  for (const AddedToken &token : added_) {
    appendU32(out, uint32_t(token.id));
    appendU32(out, (token.special ? kAddedSpecial : 0) | (token.normalized ? kAddedNormalized : 0) |
                       (token.lstrip ? kAddedLstrip : 0) | (token.rstrip ? kAddedRstrip : 0));
  }
  out += tokenText_;
  return out;
}

std::unique_ptr<Tokenizer> Tokenizer::fromCompiled(std::string_view bytes,
                                                   const std::string &displayName) {
  const Reader in(bytes, displayName);
  if (bytes.size() < kHeaderBytes + 256 * 4)
    in.fail(
        fmt::format("expected at least {} bytes, found {}", kHeaderBytes + 256 * 4, bytes.size()));
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    in.fail(fmt::format("expected magic \"{}\", found \"{}\"",
                        std::string_view(kMagic, sizeof kMagic),
                        runtime::printable(bytes.substr(0, sizeof kMagic))));
  const uint32_t flags = in.u32(8);
  const uint64_t tokens = in.u32(12), mergeCount = in.u32(16), addedCount = in.u32(20);
  const uint64_t blobBytes = in.u64(24);
  if (flags & ~(kNfcFlag | kIgnoreMergesFlag))
    in.fail(
        fmt::format("flags: expected bits 0 (NFC) and 1 (ignore_merges) only, found {:#x}", flags));
  if (tokens == 0 || tokens > uint64_t(kMaxTokenId) + 1)
    in.fail(fmt::format("token count: expected 1 to {}, found {}", kMaxTokenId + 1, tokens));
  if (blobBytes >= kMaxBlobBytes)
    in.fail(fmt::format("token text: expected under 4 GiB, found {} bytes", blobBytes));
  // The counts need no bound of their own: the section's size below bounds
  // them, and with u32 counts the layout's sums cannot overflow.
  const Layout layout(tokens, mergeCount, addedCount, blobBytes);
  if (layout.end != bytes.size())
    in.fail(fmt::format("expected {} bytes for {} tokens, {} merges, {} added tokens and {} "
                        "bytes of token text, found {}",
                        layout.end, tokens, mergeCount, addedCount, blobBytes, bytes.size()));

  std::unique_ptr<Tokenizer> tokenizer(new Tokenizer());
  Tokenizer &t = *tokenizer;
  t.displayName_ = displayName;
  t.nfc_ = flags & kNfcFlag;
  t.tokenText_ = std::string(in.view(size_t(layout.blob), size_t(blobBytes)));
  t.tokenEnds_.resize(size_t(tokens));
  t.tokenFlags_.resize(size_t(tokens));
  uint32_t start = 0;
  for (size_t id = 0; id < tokens; ++id) {
    const uint32_t end = in.u32(size_t(layout.tokenEnds + 4 * id));
    const uint8_t tokenFlags = in.u8(size_t(layout.tokenFlags + id));
    if (end < start || end > blobBytes)
      in.fail(fmt::format("token {}: expected its bytes to end in [{}, {}], found {}", id, start,
                          blobBytes, end));
    const bool invalid = (tokenFlags & ~kAllTokenFlags) ||
                         ((tokenFlags & kSpecial) && !(tokenFlags & kAdded)) ||
                         ((tokenFlags == 0) != (end == start));
    if (invalid)
      in.fail(fmt::format("token {}: flags {:#x} with {} bytes: expected 0 for no token (no "
                          "bytes), else vocabulary 1, added 2, special 4 (only with added), "
                          "with bytes",
                          id, tokenFlags, end - start));
    t.tokenEnds_[id] = end;
    t.tokenFlags_[id] = tokenFlags;
    start = end;
  }
  if (start != blobBytes)
    in.fail(fmt::format("token bytes: expected the last token to end at {}, found {}", blobBytes,
                        start));
  auto vocabularyToken = [&](int32_t id, const std::string &what) {
    if (id < 0 || uint64_t(id) >= tokens || !(t.tokenFlags_[size_t(id)] & kInVocabulary))
      in.fail(fmt::format("{}: expected a vocabulary token's id, found {}", what, id));
    return id;
  };

  int32_t byteTokens[256];
  for (int b = 0; b < 256; ++b) {
    const std::string what = fmt::format("the token of byte 0x{:02X}", b);
    byteTokens[b] = vocabularyToken(in.i32(size_t(layout.byteTokens) + 4 * size_t(b)), what);
    const std::string_view bytes = t.tokenBytes(byteTokens[b]);
    if (bytes.size() != 1 || uint8_t(bytes[0]) != b)
      in.fail(fmt::format("{}: token {} is '{}', not that byte", what, byteTokens[b],
                          runtime::printable(bytes)));
  }
  std::vector<BpeMerge> merges(static_cast<size_t>(mergeCount));
  for (size_t rank = 0; rank < mergeCount; ++rank) {
    const size_t at = size_t(layout.merges + 12 * rank);
    const std::string what = fmt::format("merge {}", rank);
    BpeMerge &merge = merges[rank];
    merge.left = vocabularyToken(in.i32(at), what);
    merge.right = vocabularyToken(in.i32(at + 4), what);
    merge.result = vocabularyToken(in.i32(at + 8), what);
    const std::string_view left = t.tokenBytes(merge.left), right = t.tokenBytes(merge.right),
                           result = t.tokenBytes(merge.result);
    if (result.size() != left.size() + right.size() || result.substr(0, left.size()) != left ||
        result.substr(left.size()) != right)
      in.fail(fmt::format("{}: tokens {} and {} do not spell token {}", what, merge.left,
                          merge.right, merge.result));
  }
  t.buildBpe(byteTokens, merges, (flags & kIgnoreMergesFlag) != 0);

  std::vector<bool> listed(size_t(tokens), false);
  for (size_t i = 0; i < addedCount; ++i) {
    const size_t at = size_t(layout.added + 8 * i);
    const int32_t id = in.i32(at);
    const uint32_t addedFlags = in.u32(at + 4);
    if (id < 0 || uint64_t(id) >= tokens || !(t.tokenFlags_[size_t(id)] & kAdded))
      in.fail(
          fmt::format("added token {}: expected the id of a token flagged added, found {}", i, id));
    if (addedFlags & ~(kAddedSpecial | kAddedNormalized | kAddedLstrip | kAddedRstrip))
      in.fail(
          fmt::format("added token {}: expected flags in bits 0 to 3, found {:#x}", i, addedFlags));
    AddedToken token{id,
                     std::string(t.tokenBytes(id)),
                     bool(addedFlags & kAddedSpecial),
                     bool(addedFlags & kAddedNormalized),
                     bool(addedFlags & kAddedLstrip),
                     bool(addedFlags & kAddedRstrip)};
    if (findInvalidUtf8(token.content) != std::string_view::npos)
      in.fail(fmt::format("added token {} (id {}): expected UTF-8 text", i, id));
    listed[size_t(id)] = true;
    t.added_.push_back(std::move(token));
  }
  for (size_t id = 0; id < tokens; ++id)
    if ((t.tokenFlags_[id] & kAdded) && !listed[id])
      in.fail(fmt::format("token {}: flagged added but not in the added tokens", id));
  t.buildAddedMatchers();
  return tokenizer;
}

} // namespace q3::text
