#include "runtime/text/Bpe.h"

#include "runtime/HostBuffer.h"

#include <algorithm>
#include <cstring>

namespace q3::text {

/// (left, right) -> (rank, result) in an open-addressing table: the merge
/// lookup is the inner loop of BPE. At most 2/3 full (linear probing stays
/// short), on huge pages: Qwen3's 4 MB filled page by page were a third of
/// the compiled tokenizer's load.
struct BpeModel::MergeTable {
  static constexpr uint64_t kEmpty = ~uint64_t(0);
  struct Slot {
    uint64_t key;   // pairKey, or kEmpty
    uint64_t value; // rank << 32 | result
  };
  runtime::HostBuffer memory;
  Slot *slots = nullptr;
  size_t capacity = 16;
  uint64_t mask = 0;

  explicit MergeTable(const std::vector<BpeMerge> &merges) {
    while (capacity < merges.size() * 3 / 2)
      capacity *= 2;
    memory = runtime::HostBuffer(capacity * sizeof(Slot), runtime::HostBuffer::Pages::Huge);
    slots = reinterpret_cast<Slot *>(memory.data());
    std::fill(slots, slots + capacity, Slot{kEmpty, 0});
    mask = capacity - 1;
    for (size_t rank = 0; rank < merges.size(); ++rank) {
      const BpeMerge &m = merges[rank];
      const uint64_t key = pairKey(m.left, m.right);
      size_t slot = hash(key) & mask;
      while (slots[slot].key != kEmpty && slots[slot].key != key)
        slot = (slot + 1) & mask;
      // A repeated pair takes its last rank, as in Hugging Face's merge map.
      slots[slot] = Slot{key, uint64_t(rank) << 32 | uint32_t(m.result)};
    }
  }
  static uint64_t pairKey(int32_t left, int32_t right) {
    return uint64_t(uint32_t(left)) << 32 | uint32_t(right);
  }
  static uint64_t hash(uint64_t key) {
    key ^= key >> 31;
    key *= 0x9E3779B97F4A7C15ull;
    return key ^ (key >> 29);
  }
  /// rank << 32 | result, or kEmpty.
  uint64_t find(int32_t left, int32_t right) const {
    const uint64_t key = pairKey(left, right);
    size_t slot = hash(key) & mask;
    while (true) {
      if (slots[slot].key == key)
        return slots[slot].value;
      if (slots[slot].key == kEmpty)
        return kEmpty;
      slot = (slot + 1) & mask;
    }
  }
};

/// Tokens of recently seen pieces. Text repeats its words, and a lookup costs
/// far less than merging. Open addressing over a fixed number of slots; when
/// half of them are used the cache starts over.
struct BpeModel::Cache {
  static constexpr size_t kMaxPieceBytes = 64;
  static constexpr size_t kSlots = size_t(1) << 17;
  struct Slot {
    uint64_t hash = 0; // 0: empty
    uint32_t keyOffset = 0;
    uint32_t tokenOffset = 0;
    uint16_t keyBytes = 0;
    uint16_t tokenCount = 0;
  };
  // Zero-filled by the kernel as its pages are first touched: no pass clears
  // it at load, and a short text makes a few of its 3 MB resident (fresh
  // memory costs most of a load in a VM).
  runtime::HostBuffer memory{kSlots * sizeof(Slot)};
  Slot *slots = reinterpret_cast<Slot *>(memory.data());
  size_t used = 0;
  std::string keys;
  std::vector<int32_t> tokens;

  static uint64_t hashOf(std::string_view piece) {
    uint64_t h = 0xcbf29ce484222325ull; // FNV-1a, then a final mix
    for (char c : piece)
      h = (h ^ uint8_t(c)) * 0x100000001b3ull;
    h ^= h >> 32;
    return h | 1; // never 0
  }
  /// The slot holding `piece`, or the empty slot where it would go.
  Slot &find(std::string_view piece, uint64_t hash) {
    size_t index = size_t(hash) & (kSlots - 1);
    while (true) {
      Slot &slot = slots[index];
      if (slot.hash == 0 || (slot.hash == hash && slot.keyBytes == piece.size() &&
                             std::memcmp(keys.data() + slot.keyOffset, piece.data(),
                                         piece.size()) == 0))
        return slot;
      index = (index + 1) & (kSlots - 1);
    }
  }
  void clear() {
    std::fill(slots, slots + kSlots, Slot());
    used = 0;
    keys.clear();
    tokens.clear();
  }
};

BpeModel::BpeModel(const int32_t (&byteTokens)[256], const std::vector<BpeMerge> &merges,
                   bool ignoreMerges, std::unordered_map<std::string, int32_t> wholeTokens)
    : merges_(std::make_unique<MergeTable>(merges)), ignoreMerges_(ignoreMerges),
      wholeTokens_(std::move(wholeTokens)), cache_(std::make_unique<Cache>()) {
  std::memcpy(byteTokens_, byteTokens, sizeof(byteTokens_));
}

BpeModel::~BpeModel() = default;

std::vector<BpeMerge> BpeModel::mergesInRankOrder() const {
  std::vector<std::pair<uint32_t, BpeMerge>> ranked;
  for (size_t slot = 0; slot < merges_->capacity; ++slot) {
    const uint64_t key = merges_->slots[slot].key;
    if (key == MergeTable::kEmpty)
      continue;
    const uint64_t value = merges_->slots[slot].value;
    ranked.push_back(
        {uint32_t(value >> 32),
         BpeMerge{int32_t(uint32_t(key >> 32)), int32_t(uint32_t(key)), int32_t(uint32_t(value))}});
  }
  std::sort(ranked.begin(), ranked.end(),
            [](const auto &a, const auto &b) { return a.first < b.first; });
  std::vector<BpeMerge> merges;
  merges.reserve(ranked.size());
  for (const auto &entry : ranked)
    merges.push_back(entry.second);
  return merges;
}

void BpeModel::encode(std::string_view text, size_t (*pieceLength)(std::string_view),
                      std::vector<int32_t> &out) const {
  std::lock_guard<std::mutex> lock(cacheMutex_);
  while (!text.empty()) {
    const size_t length = pieceLength(text);
    encodePiece(text.substr(0, length), out);
    text.remove_prefix(length);
  }
}

void BpeModel::encodePiece(std::string_view piece, std::vector<int32_t> &out) const {
  if (piece.size() == 1) {
    out.push_back(byteTokens_[uint8_t(piece[0])]);
    return;
  }
  if (ignoreMerges_) {
    auto whole = wholeTokens_.find(std::string(piece));
    if (whole != wholeTokens_.end()) {
      out.push_back(whole->second);
      return;
    }
  }
  if (piece.size() > Cache::kMaxPieceBytes) {
    merge(piece, out);
    return;
  }
  Cache &cache = *cache_;
  const uint64_t hash = Cache::hashOf(piece);
  Cache::Slot *slot = &cache.find(piece, hash);
  if (slot->hash != 0) {
    const int32_t *begin = cache.tokens.data() + slot->tokenOffset;
    out.insert(out.end(), begin, begin + slot->tokenCount);
    return;
  }
  const size_t start = out.size();
  merge(piece, out);
  if (cache.used >= Cache::kSlots / 2) {
    cache.clear();
    slot = &cache.find(piece, hash);
  }
  slot->hash = hash;
  slot->keyOffset = uint32_t(cache.keys.size());
  slot->keyBytes = uint16_t(piece.size());
  slot->tokenOffset = uint32_t(cache.tokens.size());
  slot->tokenCount = uint16_t(out.size() - start);
  cache.keys.append(piece);
  cache.tokens.insert(cache.tokens.end(), out.begin() + long(start), out.end());
  ++cache.used;
}

void BpeModel::merge(std::string_view piece, std::vector<int32_t> &out) const {
  // Symbols in a doubly linked list (merged symbols are unlinked) and a
  // min-heap of candidate merges ordered by (rank, position): the order the
  // Hugging Face implementation merges in. Stale candidates are skipped.
  struct Symbol {
    int32_t token;
    int32_t prev;
    int32_t next;
  };
  struct Candidate {
    uint32_t rank;
    int32_t position;
    int32_t result;
    bool operator>(const Candidate &other) const {
      return rank != other.rank ? rank > other.rank : position > other.position;
    }
  };
  const int32_t n = int32_t(piece.size());
  std::vector<Symbol> symbols(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i)
    symbols[size_t(i)] = {byteTokens_[uint8_t(piece[size_t(i)])], i - 1, i + 1 < n ? i + 1 : -1};
  std::vector<Candidate> heap;
  auto consider = [&](int32_t position) {
    const Symbol &left = symbols[size_t(position)];
    if (left.next < 0)
      return;
    const uint64_t found = merges_->find(left.token, symbols[size_t(left.next)].token);
    if (found == MergeTable::kEmpty)
      return;
    heap.push_back({uint32_t(found >> 32), position, int32_t(uint32_t(found))});
    std::push_heap(heap.begin(), heap.end(), std::greater<Candidate>());
  };
  for (int32_t i = 0; i + 1 < n; ++i)
    consider(i);
  std::vector<bool> removed(static_cast<size_t>(n), false);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<Candidate>());
    const Candidate top = heap.back();
    heap.pop_back();
    Symbol &left = symbols[size_t(top.position)];
    if (removed[size_t(top.position)] || left.next < 0)
      continue;
    const uint64_t current = merges_->find(left.token, symbols[size_t(left.next)].token);
    if (current == MergeTable::kEmpty || int32_t(uint32_t(current)) != top.result ||
        uint32_t(current >> 32) != top.rank)
      continue;
    const int32_t rightIndex = left.next;
    left.token = top.result;
    removed[size_t(rightIndex)] = true;
    left.next = symbols[size_t(rightIndex)].next;
    if (left.next >= 0)
      symbols[size_t(left.next)].prev = top.position;
    if (left.prev >= 0)
      consider(left.prev);
    consider(top.position);
  }
  for (int32_t i = 0; i >= 0; i = symbols[size_t(i)].next)
    out.push_back(symbols[size_t(i)].token);
}

} // namespace q3::text
