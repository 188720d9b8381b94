//===- SpirvBinary.cpp - edits to a serialized SPIR-V module --------------===//
#include "backends/vulkan/SpirvBinary.h"
#include "runtime/vulkan/SpirvInstructions.h"

#include <cstring>
#include <optional>
#include <stdexcept>

namespace q3::vulkan {
namespace {

// From the SPIR-V specification (1.6), section 3.
constexpr uint32_t kOpName = 5;
constexpr uint32_t kOpDecorate = 71;
constexpr uint32_t kOpMemberDecorate = 72;
constexpr uint32_t kOpFunction = 54;
constexpr uint32_t kDecorationBuiltIn = 11;

using runtime::vulkan::spirv::Instruction;

std::vector<Instruction> instructions(const std::vector<uint32_t> &binary) {
  std::optional<std::vector<Instruction>> list = runtime::vulkan::spirv::instructions(binary);
  if (!list)
    throw std::runtime_error("not a well-formed SPIR-V module");
  return *list;
}

/// The literal string of an OpName (operand words after the target id).
std::string nameOf(const std::vector<uint32_t> &binary, const Instruction &op) {
  const char *bytes = reinterpret_cast<const char *>(&binary[op.at + 2]);
  size_t capacity = (op.words - 2) * 4;
  return std::string(bytes, strnlen(bytes, capacity));
}

} // namespace

void decorateBuiltIn(std::vector<uint32_t> &binary, const std::string &name, SpirvBuiltIn builtin) {
  std::optional<uint32_t> id;
  size_t insertAt = 0;
  for (const Instruction &op : instructions(binary)) {
    if (op.opcode == kOpFunction)
      break;
    if (op.opcode == kOpName && op.words > 2 && nameOf(binary, op) == name)
      id = binary[op.at + 1];
    if (op.opcode == kOpDecorate || op.opcode == kOpMemberDecorate)
      insertAt = op.at + op.words;
  }
  if (!id)
    throw std::runtime_error("SPIR-V module: no id named '" + name + "' to decorate");
  if (insertAt == 0)
    throw std::runtime_error("SPIR-V module: no annotation section to add a decoration to");
  const uint32_t decoration[] = {(4u << 16) | kOpDecorate, *id, kDecorationBuiltIn,
                                 uint32_t(builtin)};
  binary.insert(binary.begin() + std::ptrdiff_t(insertAt), std::begin(decoration),
                std::end(decoration));
}

} // namespace q3::vulkan
