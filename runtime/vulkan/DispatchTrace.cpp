#include "runtime/vulkan/DispatchTrace.h"

#include "runtime/vulkan/VulkanApi.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstring>

namespace q3::runtime::vulkan {
namespace {

void writeTensor(const std::string &file, const std::vector<uint8_t> &bytes) {
  FILE *f = std::fopen(file.c_str(), "wb");
  bool written = f && std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  if (f && std::fclose(f) != 0)
    written = false;
  if (!written)
    throw VulkanError("Q3_VULKAN_TRACE_DIR: cannot write " + file);
}

std::string summarizeFloats(const std::vector<uint8_t> &bytes) {
  double sum = 0, absSum = 0;
  int64_t notFinite = 0;
  for (size_t e = 0; e + 4 <= bytes.size(); e += 4) {
    float v;
    std::memcpy(&v, bytes.data() + e, 4);
    if (!std::isfinite(v)) {
      ++notFinite;
      continue;
    }
    sum += v;
    absSum += std::fabs(v);
  }
  return fmt::format("sum {:.6g} abs {:.6g} nonfinite {}", sum, absSum, notFinite);
}

} // namespace

std::string traceLine(int64_t index, const VulkanKernel &spec, int64_t rows,
                      const std::vector<std::vector<uint8_t>> &tensors, const char *dumpDir) {
  std::string line = fmt::format("q3 trace {} {} rows {}:", index, spec.name, rows);
  const bool halves = spec.split && spec.split->halves;
  for (size_t i = 0; i < tensors.size(); ++i) {
    // A weight in halves has two bindings (VulkanDriver::dispatch).
    const size_t binding = halves && int64_t(i) > spec.split->binding ? i + 1 : i;
    if (dumpDir)
      writeTensor(fmt::format("{}/{}_{}_{}.bin", dumpDir, index, spec.name, i), tensors[i]);
    if (spec.elementBytes.at(binding) != 4)
      line += fmt::format(" [{}] {} B", i, tensors[i].size());
    else
      line += fmt::format(" [{}] {}", i, summarizeFloats(tensors[i]));
  }
  return line;
}

} // namespace q3::runtime::vulkan
