#include "backends/vulkan/VulkanPasses.h"

namespace q3::vulkan {

void addVulkanTargetPasses(mlir::OpPassManager &pm) {
  pm.addPass(createMatVecPass());
  pm.addPass(createTileMatMulPass());
  pm.addPass(createSplitWeightsPass());
  pm.addPass(createWorkgroupsPass());
}

void registerVulkanPasses() {
  mlir::registerPass(createMatVecPass);
  mlir::registerPass(createTileMatMulPass);
  mlir::registerPass(createSplitWeightsPass);
  mlir::registerPass(createWorkgroupsPass);
}

} // namespace q3::vulkan
