// The instruction stream of a SPIR-V module (specification 1.6, sections 2.3
// and 3), for the few edits and reads q3c makes on serialized modules: the
// compiler's BuiltIn decoration, the runtime's entry-point check and its
// poisoning of local variables.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace q3::runtime::vulkan::spirv {

constexpr uint32_t kMagic = 0x07230203;
constexpr size_t kHeaderWords = 5;
constexpr size_t kBoundWord = 3; // the header word above every id

struct Instruction {
  size_t at;      // word index
  uint32_t words; // length including the opcode word
  uint32_t opcode;
};

/// The instructions after the header; nullopt unless `words` start with the
/// magic number and divide into instructions of nonzero length.
inline std::optional<std::vector<Instruction>> instructions(const std::vector<uint32_t> &words) {
  if (words.size() < kHeaderWords || words[0] != kMagic)
    return std::nullopt;
  std::vector<Instruction> list;
  for (size_t at = kHeaderWords; at < words.size();) {
    const uint32_t count = words[at] >> 16;
    if (count == 0 || at + count > words.size())
      return std::nullopt;
    list.push_back({at, count, words[at] & 0xFFFF});
    at += count;
  }
  return list;
}

} // namespace q3::runtime::vulkan::spirv
