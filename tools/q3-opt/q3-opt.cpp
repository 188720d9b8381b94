//===- q3-opt.cpp - parse, verify, transform and print q3 IR --------------===//
//
// The mlir-opt of q3c: reads a .mlir file with q3 and func ops, verifies it,
// runs the requested passes and prints the result. lit tests drive it.
//
//===----------------------------------------------------------------------===//
#include "ir/BuildGraph.h"
#include "backends/cpu/CpuPipeline.h"
#include "backends/vulkan/VulkanPasses.h"
#include "tools/common/LLVMErrors.h"
#include "passes/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  // A fatal LLVM error or a failed allocation is one line and exit code 1.
  q3::tools::installLLVMErrorHandlers("q3-opt");
  mlir::DialectRegistry registry;
  q3::ir::registerQ3Dialects(registry);
  // Generic cleanups (canonicalize, cse, ...) are available on q3 IR too.
  mlir::registerTransformsPasses();
  q3::passes::registerQ3Passes();
  q3::cpu::registerCpuPassesForOpt();
  q3::vulkan::registerVulkanPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "q3 IR optimizer driver\n", registry));
}
