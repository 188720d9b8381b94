//===- ListDevicesCommand.cpp - q3run --list-devices ----------------------===//
//
// One line per Vulkan device: its index (for --device; the default marked
// with *), name, type, driver, API version, device-local memory, subgroup
// size and whether it has 16-bit storage and f16 arithmetic.
//
//===----------------------------------------------------------------------===//
#include "tools/q3run/Commands.h"

#include "runtime/Driver.h"

#include <cstdio>

namespace q3::q3run {

int listDevicesCommand() {
  std::vector<std::string> lines = runtime::listVulkanDevices();
  if (lines.empty())
    std::printf("no Vulkan devices\n");
  for (const std::string &line : lines)
    std::printf("%s\n", line.c_str());
  return 0;
}

} // namespace q3::q3run
