//===- VulkanDispatchTest.cpp - what a device must offer, what a dispatch runs ===//
//
// The driver's load checks and dispatch arithmetic on described devices
// (no Vulkan device needed): a device that lacks a feature is named with
// everything it lacks, the subgroup size is the default where the kernels
// allow it and else one the device can be asked for, a dispatch runs the
// variant its rows fit plus the stages after it, and grids count
// workgroups for rows, tiles, parts and subgroups.
//
//===----------------------------------------------------------------------===//
#include "runtime/vulkan/DeviceRequirements.h"
#include "runtime/vulkan/DispatchGrid.h"
#include "runtime/vulkan/DispatchTrace.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <limits>

namespace q3::testing {
namespace {

using namespace q3::runtime::vulkan;

DeviceInfo gpu() {
  DeviceInfo d;
  d.index = 1;
  d.name = "Test GPU";
  d.hasComputeQueue = true;
  d.subgroupSize = 32;
  d.subgroupArithmetic = d.storageBuffer16BitAccess = d.shaderFloat16 = d.shaderInt16 = true;
  d.limits.maxComputeSharedMemorySize = 49152;
  d.limits.maxStorageBufferRange = 1u << 30;
  d.limits.maxComputeWorkGroupInvocations = 1024;
  return d;
}

VulkanTarget targetNeeding(std::vector<std::string> capabilities) {
  KernelVariant variant;
  variant.entryPoint = "k0";
  variant.capabilities = std::move(capabilities);
  VulkanKernel kernel;
  kernel.name = "k";
  kernel.variants = {variant};
  VulkanTarget target;
  target.kernels = {kernel};
  return target;
}

std::string errorOf(const std::function<void()> &run) {
  try {
    run();
  } catch (const VulkanError &e) {
    return e.what();
  }
  return "";
}

TEST(VulkanDeviceRequirements, EnablesWhatTheModulesDeclare) {
  DeviceFeatures f = requiredFeatures(targetNeeding({"Shader", "Float16"}), gpu());
  EXPECT_TRUE(f.shaderFloat16);
  EXPECT_FALSE(f.storageBuffer16BitAccess);
  EXPECT_FALSE(f.shaderInt16);
}

TEST(VulkanDeviceRequirements, NamesEveryMissingFeatureOnce) {
  DeviceInfo d = gpu();
  d.shaderFloat16 = d.subgroupArithmetic = false;
  d.hasComputeQueue = false;
  std::string error = errorOf([&] {
    requiredFeatures(targetNeeding({"Float16", "GroupNonUniform", "GroupNonUniformArithmetic"}), d);
  });
  EXPECT_EQ(error, "Vulkan device 1 (Test GPU) lacks what the kernels need: shaderFloat16, "
                   "subgroup arithmetic in compute shaders, a compute queue");
}

TEST(VulkanDeviceRequirements, RefusesACapabilityItCannotEnable) {
  EXPECT_EQ(errorOf([] { requiredFeatures(targetNeeding({"Float64"}), gpu()); }),
            "kernel k needs the SPIR-V capability Float64, which this runtime cannot enable");
}

TEST(VulkanDeviceRequirements, SubgroupSizeIsTheDefaultWhereAllowed) {
  VulkanTarget target = targetNeeding({});
  EXPECT_EQ(chooseSubgroupSize(target, gpu()), 32u);
  target.maxSubgroupSize = 16;
  DeviceInfo d = gpu();
  d.subgroupSizeControl = true;
  d.minSubgroupSize = 8;
  d.maxSubgroupSize = 64;
  EXPECT_EQ(chooseSubgroupSize(target, d), 8u); // the first size in the kernels' range
  d.subgroupSizeControl = false;
  EXPECT_EQ(errorOf([&] { chooseSubgroupSize(target, d); }),
            "the kernels need a subgroup size from 4 to 16; Vulkan device 1 (Test GPU) has 32 "
            "and cannot change it");
}

TEST(VulkanDeviceRequirements, LimitsNameTheKernelAndTheLimit) {
  VulkanTarget target = targetNeeding({});
  target.kernels[0].variants[0].sharedBytes = 65536;
  EXPECT_NE(errorOf([&] { checkLimits(target, gpu(), 32); })
                .find("kernel k0 needs 65536 bytes of shared memory; Vulkan device 1 (Test GPU) "
                      "has 49152 (maxComputeSharedMemorySize)"),
            std::string::npos);
  target.kernels[0].variants[0].sharedBytes = 0;
  target.kernels[0].split = WeightSplit{0, 4096, 1 << 20, 2048, false};
  EXPECT_NE(errorOf([&] { checkLimits(target, gpu(), 32); }).find("(maxStorageBufferRange)"),
            std::string::npos);
  target.kernels[0].split->rowsPerPart = 1024;
  EXPECT_EQ(errorOf([&] { checkLimits(target, gpu(), 32); }), "");
}

TEST(VulkanDispatchGrid, RowsPickTheVariantThenItsStages) {
  VulkanKernel spec;
  spec.name = "attention";
  spec.variants.resize(4);
  spec.variants[0].maxRows = 1;          // decode
  spec.variants[1].afterPrevious = true; // decode's merge
  spec.variants[2].minRows = 2;          // prefill
  spec.variants[3].minRows = 2;          // never chosen: 2 takes every row count first
  EXPECT_EQ(stagesFor(spec, 1), (std::vector<size_t>{0, 1}));
  EXPECT_EQ(stagesFor(spec, 7), (std::vector<size_t>{2}));
  spec.variants[2].maxRows = 4;
  spec.variants[3].minRows = 8;
  EXPECT_EQ(errorOf([&] { stagesFor(spec, 5); }), "kernel attention has no variant for 5 rows");
}

TEST(VulkanDispatchGrid, WorkgroupsCoverRowsTilesPartsAndSubgroups) {
  GridSpec grid;
  grid.units = 1000;
  grid.perWorkgroup = 64;
  EXPECT_EQ(workgroupCount(grid, 9, 0, false, 4), 16); // ceil(1000 / 64), rows one
  grid.rows = GridSpec::Rows::Each;
  EXPECT_EQ(workgroupCount(grid, 9, 0, false, 4), 9 * 16);
  grid.rows = GridSpec::Rows::Tiles;
  grid.rowTile = 4;
  EXPECT_EQ(workgroupCount(grid, 9, 0, false, 4), 3 * 16);
  grid.rows = GridSpec::Rows::One;
  grid.partUnits = true;
  EXPECT_EQ(workgroupCount(grid, 9, 100, true, 4), 2);   // a part's 100 units
  EXPECT_EQ(workgroupCount(grid, 9, 100, false, 4), 16); // whole: the grid's units
  grid.perWorkgroup = 1;
  grid.perSubgroup = true;
  grid.subgroupsPerUnit = 2;
  EXPECT_EQ(workgroupCount(grid, 1, 100, true, 8), 25); // 4 units per workgroup
}

TEST(VulkanDispatchTrace, SummarizesFloatTensorsAndSizesTheRest) {
  VulkanKernel spec;
  spec.name = "rmsnorm";
  spec.elementBytes = {4, 2};
  std::vector<uint8_t> floats(12);
  const float values[3] = {1.5f, -2.0f, std::numeric_limits<float>::infinity()};
  std::memcpy(floats.data(), values, 12);
  EXPECT_EQ(traceLine(3, spec, 2, {floats, std::vector<uint8_t>(6)}, nullptr),
            "q3 trace 3 rmsnorm rows 2: [0] sum -0.5 abs 3.5 nonfinite 1 [1] 6 B");
}

} // namespace
} // namespace q3::testing
