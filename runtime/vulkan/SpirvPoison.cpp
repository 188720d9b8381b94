#include "runtime/vulkan/SpirvPoison.h"
#include "runtime/vulkan/SpirvInstructions.h"

#include <map>
#include <set>

namespace q3::runtime::vulkan {
namespace {

constexpr uint32_t kOpTypeInt = 21, kOpTypeFloat = 22, kOpTypeVector = 23, kOpTypePointer = 32,
                   kOpConstant = 43, kOpConstantComposite = 44, kOpFunction = 54, kOpVariable = 59,
                   kStorageClassFunction = 7;
constexpr uint32_t kPoisonBits = 0x7FC00000;

uint32_t instruction(uint32_t opcode, uint32_t words) { return (words << 16) | opcode; }

struct Rewriter {
  std::vector<uint32_t> constants;          // new instructions, before the first function
  std::set<uint32_t> scalarTypes;           // the 32-bit int and float types
  std::map<uint32_t, uint32_t> vectorTypes; // vector type -> component type
  std::map<uint32_t, uint32_t> vectorSizes; // vector type -> component count
  std::map<uint32_t, uint32_t> pointees;    // Function pointer type -> pointee
  std::map<uint32_t, uint32_t> poisons;     // type -> its poison constant
  uint32_t bound = 0;

  /// The poison constant of `type`, made on first use; 0 for other types.
  uint32_t poisonOf(uint32_t type) {
    if (auto it = poisons.find(type); it != poisons.end())
      return it->second;
    uint32_t id = 0;
    if (scalarTypes.count(type)) {
      id = bound++;
      constants.insert(constants.end(), {instruction(kOpConstant, 4), type, id, kPoisonBits});
    } else if (auto it = vectorTypes.find(type); it != vectorTypes.end()) {
      const uint32_t component = poisonOf(it->second);
      if (component == 0)
        return 0;
      const uint32_t count = vectorSizes[type];
      id = bound++;
      constants.insert(constants.end(), {instruction(kOpConstantComposite, 3 + count), type, id});
      constants.insert(constants.end(), count, component);
    }
    poisons[type] = id;
    return id;
  }
};

} // namespace

std::vector<uint32_t> poisonFunctionVariables(const std::vector<uint32_t> &words) {
  const std::optional<std::vector<spirv::Instruction>> ops = spirv::instructions(words);
  if (!ops)
    return words; // not a valid module: leave it to the validator
  Rewriter rewriter;
  rewriter.bound = words[spirv::kBoundWord];
  std::vector<uint32_t> body; // everything from the first function on, rewritten
  size_t firstFunction = words.size();
  for (const spirv::Instruction &op : *ops) {
    const uint32_t *w = &words[op.at];
    if (op.opcode == kOpTypeInt || op.opcode == kOpTypeFloat) {
      if (w[2] == 32)
        rewriter.scalarTypes.insert(w[1]);
    } else if (op.opcode == kOpTypeVector) {
      rewriter.vectorTypes[w[1]] = w[2];
      rewriter.vectorSizes[w[1]] = w[3];
    } else if (op.opcode == kOpTypePointer && w[2] == kStorageClassFunction) {
      rewriter.pointees[w[1]] = w[3];
    } else if (op.opcode == kOpFunction && firstFunction == words.size()) {
      firstFunction = op.at;
    }
    const bool local = op.opcode == kOpVariable && op.words == 4 && w[3] == kStorageClassFunction;
    const uint32_t poison = local ? rewriter.poisonOf(rewriter.pointees[w[1]]) : 0;
    if (op.at >= firstFunction) {
      if (poison != 0)
        body.insert(body.end(), {instruction(kOpVariable, 5), w[1], w[2], w[3], poison});
      else
        body.insert(body.end(), w, w + op.words);
    }
  }
  std::vector<uint32_t> result(words.begin(), words.begin() + long(firstFunction));
  result[spirv::kBoundWord] = rewriter.bound;
  result.insert(result.end(), rewriter.constants.begin(), rewriter.constants.end());
  result.insert(result.end(), body.begin(), body.end());
  return result;
}

} // namespace q3::runtime::vulkan
