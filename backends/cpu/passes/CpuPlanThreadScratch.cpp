//===- CpuPlanThreadScratch.cpp - the memory a kernel call takes per thread ===//
//
// After (a per-call bf16 product with its RMSNorm gain, K = 1024):
//   @fused_linear_rms_norm_0 ... q3.lowering = #q3.lowering<...,
//       thread_scratch = 69632 + 2048 * rows>,
//       q3.variants = [#q3.lowering<..., matmul = f32, ...,
//                                   thread_scratch = 65536 + 4096 * rows>, ...]
//
// A product call needs memory beside its operands: the panel a per-call
// prefill packs its weight blocks into, the activations scaled by the gain
// (an f32 prefill's rows; decode's row where the prefill rounds, since it
// scales as it rounds), the activations rounded to bf16 for vdpbf16ps or
// AMX; the bf16 flash attention prefill, the key and value rows a call
// keeps rounded. How much follows from the decisions the passes before
// made (weight packing, gain, prefill instructions), so it is planned here,
// last, for the kernel and for each of its variants, and the runtime gives
// every thread one region of the largest at the planned prefill chunk
// (runtime/KernelABI.h) instead of the kernels allocating per call. Code
// generation checks that the plan is the one its template takes.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/KernelSelection.h"
#include "backends/cpu/passes/CpuPasses.h"

namespace q3::cpu {
#define GEN_PASS_DEF_CPUPLANTHREADSCRATCH
#include "backends/cpu/passes/CpuPasses.h.inc"
} // namespace q3::cpu

using namespace mlir;
using namespace q3::ir;

namespace q3::cpu {
namespace {

LoweringConfigAttr withScratchOf(func::FuncOp kernel, LoweringConfigAttr lowering) {
  const ThreadScratch scratch = cpuKernelThreadScratch(kernel, lowering);
  return lowering.withThreadScratch(scratch.fixedBytes, scratch.rowBytes);
}

struct CpuPlanThreadScratchPass : impl::CpuPlanThreadScratchBase<CpuPlanThreadScratchPass> {
  void runOnOperation() override {
    for (func::FuncOp kernel : kernelsOf(getOperation())) {
      try {
        updateLoweringAndVariants(
            kernel, [&](LoweringConfigAttr lowering) { return withScratchOf(kernel, lowering); });
      } catch (const std::exception &e) {
        kernel.emitError() << "cpu-plan-thread-scratch: " << e.what();
        return signalPassFailure();
      }
    }
  }
};

} // namespace

std::unique_ptr<mlir::Pass> createCpuPlanThreadScratchPass() {
  return std::make_unique<CpuPlanThreadScratchPass>();
}

} // namespace q3::cpu
