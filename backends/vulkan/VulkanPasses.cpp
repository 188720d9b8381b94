#include "backends/vulkan/VulkanPasses.h"

namespace q3::vulkan {

void addVulkanTargetPasses(mlir::OpPassManager &pm, const VulkanTargetOptions &options) {
  pm.addPass(createMatVecPass(options.decodeColumnSubgroups));
  pm.addPass(createTileMatMulPass(options.prefillTile));
  pm.addPass(createSplitWeightsPass());
  pm.addPass(createWorkgroupsPass());
  pm.addPass(createSplitDecodeAttentionPass(options.decodeSplits));
}

void registerVulkanPasses() {
  mlir::registerPass([] { return createMatVecPass(); });
  mlir::registerPass([] { return createTileMatMulPass(); });
  mlir::registerPass(createSplitWeightsPass);
  mlir::registerPass(createWorkgroupsPass);
  mlir::registerPass([] { return createSplitDecodeAttentionPass(); });
}

} // namespace q3::vulkan
