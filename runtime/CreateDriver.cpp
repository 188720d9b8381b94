// createDriver: the artifact's manifest "format" picks the driver.
#include "runtime/Artifact.h"
#include "runtime/CpuDriver.h"
#include "runtime/Driver.h"
#include "runtime/LoadError.h"
#include "runtime/Manifest.h"
#include "runtime/vulkan/VulkanDriver.h"
#include "runtime/vulkan/VulkanManifest.h"

namespace q3::runtime {

std::unique_ptr<Driver> createDriver(const Artifact &artifact, const manifest::Manifest &m,
                                     const std::string &path, ThreadPool &pool,
                                     const DriverOptions &options) {
  if (m.format == manifest::kCpuFormat) {
    if (options.device >= 0)
      throw LoadError(path + ": a CPU artifact runs on the CPU; --device selects a Vulkan device "
                             "for artifacts compiled with --target vulkan");
    return std::make_unique<CpuDriver>(artifact, m, path, pool);
  }
  if (m.format == manifest::kVulkanFormat)
    return std::make_unique<vulkan::VulkanDriver>(artifact, path, options);
  throw LoadError(path + ": unknown artifact format '" + printable(m.format) +
                  "'; this runtime has drivers for " + manifest::kCpuFormat + " and " +
                  manifest::kVulkanFormat);
}

} // namespace q3::runtime
