#include "runtime/vulkan/SpirvCheck.h"
#include "runtime/vulkan/SpirvInstructions.h"

#include <spirv-tools/libspirv.hpp>

#include <algorithm>
#include <cstring>
#include <vector>

namespace q3::runtime::vulkan {
namespace {

constexpr uint32_t kOpEntryPoint = 15;
constexpr uint32_t kExecutionModelGLCompute = 5;

/// The names of the module's GLCompute entry points (the words are valid).
std::vector<std::string> computeEntryPoints(const std::vector<uint32_t> &words) {
  std::vector<std::string> names;
  for (const spirv::Instruction &op :
       spirv::instructions(words).value_or(std::vector<spirv::Instruction>{}))
    if (op.opcode == kOpEntryPoint && op.words > 3 &&
        words[op.at + 1] == kExecutionModelGLCompute) {
      const char *name = reinterpret_cast<const char *>(&words[op.at + 3]);
      names.emplace_back(name, strnlen(name, (op.words - 3) * 4));
    }
  return names;
}

} // namespace

std::string checkSpirv(const uint8_t *bytes, size_t size, const std::string &entryPoint) {
  if (size == 0 || size % 4 != 0)
    return "expected a whole number of 32-bit words, found " + std::to_string(size) + " bytes";
  std::vector<uint32_t> words(size / 4);
  std::memcpy(words.data(), bytes, size);
  if (words.size() < spirv::kHeaderWords || words[0] != spirv::kMagic)
    return "expected the SPIR-V magic number 0x07230203";
  std::string problem;
  spvtools::SpirvTools tools(SPV_ENV_VULKAN_1_1);
  tools.SetMessageConsumer([&](spv_message_level_t, const char *, const spv_position_t &,
                               const char *message) {
    if (problem.empty())
      problem = message;
  });
  if (!tools.Validate(words)) {
    std::replace(problem.begin(), problem.end(), '\n', ' ');
    return "spirv-val: " + (problem.empty() ? std::string("invalid module") : problem);
  }
  std::vector<std::string> entries = computeEntryPoints(words);
  if (std::find(entries.begin(), entries.end(), entryPoint) == entries.end())
    return "no GLCompute entry point named '" + entryPoint + "'";
  return "";
}

} // namespace q3::runtime::vulkan
