// createDriver: the artifact's manifest "format" picks the driver.
#include "runtime/Artifact.h"
#include "runtime/CpuDriver.h"
#include "runtime/Driver.h"
#include "runtime/LoadError.h"
#include "runtime/vulkan/VulkanDriver.h"
#include "runtime/vulkan/VulkanManifest.h"

namespace q3::runtime {

std::unique_ptr<Driver> createDriver(const Artifact &artifact, const std::string &path,
                                     ThreadPool &pool, const DriverOptions &options) {
  const std::string format = artifact.manifest().value("format", "");
  if (format == "q3c-cpu") {
    if (options.device >= 0)
      throw LoadError(path + ": a CPU artifact runs on the CPU; --device selects a Vulkan device "
                             "for artifacts compiled with --target vulkan");
    return std::make_unique<CpuDriver>(artifact, path, pool);
  }
  if (format == vulkan::kVulkanFormat)
    return std::make_unique<vulkan::VulkanDriver>(artifact, path, options);
  throw LoadError(path + ": unknown artifact format '" + printable(format) +
                  "'; this runtime has drivers for q3c-cpu and " + vulkan::kVulkanFormat);
}

} // namespace q3::runtime
