// Feeds arbitrary bytes, as JSON text, to the typed manifest reader and its
// validation (runtime/Manifest.h), and a Vulkan manifest's "vulkan" part to
// its reader (runtime/vulkan/VulkanManifest.h): the seeds are real manifests,
// so mutations reach every field's checks. A JSON parse error, ManifestError
// or (the Vulkan part, as the driver catches them) a JSON type error or
// std::invalid_argument is the only acceptable failure; anything else
// (another exception, a crash, an ASan or UBSan report) is a bug. What reads
// must survive JSON and back unchanged.
#include "runtime/Manifest.h"
#include "runtime/vulkan/VulkanManifest.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const nlohmann::json json = nlohmann::json::parse(data, data + size, nullptr, false);
  if (json.is_discarded())
    return 0;
  try {
    const q3::manifest::Manifest m = q3::manifest::manifestFromJson(json);
    q3::manifest::validateManifest(m);
    if (q3::manifest::manifestFromJson(q3::manifest::toJson(m)).steps.size() != m.steps.size())
      __builtin_trap();
  } catch (const q3::manifest::ManifestError &) {
  }
  if (json.is_object() && json.contains("vulkan")) {
    try {
      const auto target = json.at("vulkan").get<q3::runtime::vulkan::VulkanTarget>();
      if (nlohmann::json(target).get<q3::runtime::vulkan::VulkanTarget>().kernels.size() !=
          target.kernels.size())
        __builtin_trap();
    } catch (const nlohmann::json::exception &) {
    } catch (const std::invalid_argument &) {
    }
  }
  return 0;
}
