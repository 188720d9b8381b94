//===- KernelSelectionTest.cpp - code generation reads the lowering -------===//
//
// Each decision of the CPU target passes reaches the generated kernel only
// through q3.lowering: the prefetch distance it names is the one the decode
// loops use, and a streaming kernel without one is refused, not given a
// silent default.
//
//===----------------------------------------------------------------------===//
#include "tests/unit/GoldenCase.h"

#include "backends/cpu/CpuPipeline.h"
#include "backends/cpu/KernelSelection.h"
#include "backends/cpu/passes/CpuPasses.h"
#include "passes/Pipeline.h"

#include <gtest/gtest.h>

#include <map>

namespace q3::testing {
namespace {

/// Runs the CPU target stage with `cpuOptions` on `module`.
void runTargetStage(mlir::ModuleOp module, const cpu::CpuPipelineOptions &cpuOptions) {
  passes::PipelineOptions options;
  options.stage = passes::Stage::Target;
  options.target = cpu::cpuTargetPipeline(cpuOptions);
  ASSERT_TRUE(mlir::succeeded(passes::runPipeline(module, options)));
}

/// Code generation refuses `kernel` with an error that contains `message`.
void expectRefused(mlir::ModuleOp module, mlir::func::FuncOp kernel, const std::string &message) {
  try {
    cpu::cpuKernelSource(module, kernel);
    ADD_FAILURE() << "no error for " << kernel.getSymName().str() << " (expected: " << message
                  << ")";
  } catch (const std::runtime_error &error) {
    EXPECT_NE(std::string(error.what()).find(message), std::string::npos) << error.what();
  }
}

/// Runs the CPU target stage (x86-64-v3) with `prefetchBytes` and hands
/// each product or attention kernel to `check` (a bf16 golden with head_dim
/// 32, so attention takes the vector template).
void forStreamingKernels(int64_t prefetchBytes,
                         const std::function<void(mlir::ModuleOp, mlir::func::FuncOp)> &check) {
  GoldenRunner runner(loadGoldenCase("sharded_gqa2_bf16"), [&](mlir::ModuleOp module) {
    cpu::CpuPipelineOptions cpuOptions;
    cpuOptions.cpu = "x86-64-v3";
    cpuOptions.prefetchBytes = prefetchBytes;
    runTargetStage(module, cpuOptions);
    for (mlir::func::FuncOp kernel : cpu::kernelsOf(module))
      if (mlir::isa_and_nonnull<ir::FusedLinearOp, ir::AttentionOp>(ir::kernelComputeOp(kernel)))
        check(module, kernel);
  });
}

TEST(KernelSelection, ScalarAttentionHasNoPrefetchDistance) {
  // head_dim 8: the scalar attention template, which prefetches nothing.
  int attention = 0;
  GoldenRunner runner(loadGoldenCase("gqa4_tied_bf16"), [&](mlir::ModuleOp module) {
    runTargetStage(module, {});
    for (mlir::func::FuncOp kernel : cpu::kernelsOf(module))
      if (mlir::isa_and_nonnull<ir::AttentionOp>(ir::kernelComputeOp(kernel))) {
        EXPECT_EQ(ir::loweringOf(kernel).getPrefetchBytes(), 0);
        EXPECT_NO_THROW(cpu::cpuKernelSource(module, kernel));
        ++attention;
      }
  });
  EXPECT_EQ(attention, 1);
}

TEST(KernelSelection, DecodeLoopsPrefetchTheLoweringsDistance) {
  int kernels = 0;
  forStreamingKernels(256, [&](mlir::ModuleOp module, mlir::func::FuncOp kernel) {
    EXPECT_EQ(ir::loweringOf(kernel).getPrefetchBytes(), 256);
    const std::string source = cpu::cpuKernelSource(module, kernel);
    EXPECT_NE(source.find("memref.prefetch"), std::string::npos) << kernel.getSymName().str();
    ++kernels;
  });
  EXPECT_GE(kernels, 3);
  // Another distance (within these small weights) gives other kernels.
  std::vector<std::string> near, far, names;
  forStreamingKernels(256, [&](mlir::ModuleOp module, mlir::func::FuncOp kernel) {
    near.push_back(cpu::cpuKernelSource(module, kernel));
    names.push_back(kernel.getSymName().str());
  });
  forStreamingKernels(1024, [&](mlir::ModuleOp module, mlir::func::FuncOp kernel) {
    far.push_back(cpu::cpuKernelSource(module, kernel));
  });
  ASSERT_EQ(near.size(), far.size());
  for (size_t i = 0; i < near.size(); ++i)
    EXPECT_TRUE(near[i] != far[i]) << names[i] << " does not depend on prefetch_bytes";
}

// prefetch_bytes = none: the products' decode loops (and attention's, when
// asked) issue no prefetch.
TEST(KernelSelection, DecodeLoopsWithoutAPrefetchDistanceIssueNone) {
  int kernels = 0;
  forStreamingKernels(cpu::kNoPrefetch, [&](mlir::ModuleOp module, mlir::func::FuncOp kernel) {
    EXPECT_EQ(ir::loweringOf(kernel).getPrefetchBytes(), ir::LoweringConfigAttr::kNoPrefetch);
    const std::string source = cpu::cpuKernelSource(module, kernel);
    const std::string name = kernel.getSymName().str();
    for (const std::string &function :
         {name + "_dot(", name + "_dot_streams(", name + "_decode("}) {
      const size_t at = source.find("@" + function);
      if (at == std::string::npos)
        continue;
      EXPECT_EQ(source.substr(at, source.find("func.func", at) - at).find("memref.prefetch"),
                std::string::npos)
          << function;
    }
    ++kernels;
  });
  EXPECT_GE(kernels, 3);
}

// decode_streams is what the generated decode reads side by side: the
// kernels follow it (the SwiGLU product reads at least its gate and up rows,
// so one stream and two are the same kernel there).
TEST(KernelSelection, DecodeLoopsReadTheLoweringsStreams) {
  std::map<int64_t, std::vector<std::string>> sources;
  std::vector<std::string> names;
  for (int64_t streams : {1, 2, 4})
    forStreamingKernels(256, [&](mlir::ModuleOp module, mlir::func::FuncOp kernel) {
      ir::setLowering(kernel, ir::loweringOf(kernel).withDecodeStreams(streams));
      sources[streams].push_back(cpu::cpuKernelSource(module, kernel));
      if (streams == 1)
        names.push_back(kernel.getSymName().str());
    });
  ASSERT_GE(names.size(), 3u);
  for (size_t i = 0; i < names.size(); ++i) {
    const bool swiglu = names[i].find("swiglu") != std::string::npos;
    EXPECT_EQ(sources[1][i] != sources[2][i], !swiglu) << names[i];
    EXPECT_NE(sources[2][i], sources[4][i]) << names[i] << " does not depend on decode_streams";
  }
}

TEST(KernelSelection, RefusesAStreamingKernelWithoutDecodeStreams) {
  forStreamingKernels(256, [&](mlir::ModuleOp module, mlir::func::FuncOp kernel) {
    ir::setLowering(kernel, ir::loweringOf(kernel).withDecodeStreams(0));
    expectRefused(module, kernel, "has no decode_streams in its q3.lowering");
  });
}

TEST(KernelSelection, RefusesAStreamingKernelWithoutAPrefetchDistance) {
  forStreamingKernels(0, [&](mlir::ModuleOp module, mlir::func::FuncOp kernel) {
    ir::setLowering(kernel, ir::loweringOf(kernel).withPrefetchBytes(0));
    expectRefused(module, kernel, "has no prefetch_bytes in its q3.lowering");
    expectRefused(module, kernel, kernel.getSymName().str());
  });
}

// vdpbf16ps and the tile unit read bf16 pairs: an f16 product's lowering
// that asks for them (edited by hand; cpu-select-matmul never does) is
// refused with the weight's dtype, not compiled into garbage.
TEST(KernelSelection, RefusesBf16InstructionsForAnF16Weight) {
  int products = 0;
  GoldenRunner runner(loadGoldenCase("gqa2_hdsmaller_tied_f16"), [&](mlir::ModuleOp module) {
    cpu::CpuPipelineOptions cpuOptions;
    cpuOptions.cpu = "x86-64-v4";
    cpuOptions.matmul = "f32";
    runTargetStage(module, cpuOptions);
    for (mlir::func::FuncOp kernel : cpu::kernelsOf(module)) {
      if (!cpu::tiledProductDepth(kernel))
        continue;
      ++products;
      EXPECT_NO_THROW(cpu::cpuKernelSource(module, kernel));
      ir::setLowering(kernel, ir::loweringOf(kernel).withMatmul("avx512bf16"));
      expectRefused(module, kernel, "matmul avx512bf16 multiplies bf16 weights, not f16");
    }
  });
  EXPECT_GE(products, 3);
}

// A product's third tile entry is how many prefill rows it reads in place:
// the kernel takes it, and a product that cannot (f32 prefill, here; also a
// weight packed at load) refuses a count above 1, as it does more than 7.
TEST(KernelSelection, ProductsReadTheLoweringsInPlaceRows) {
  int products = 0;
  GoldenRunner runner(loadGoldenCase("sharded_gqa2_bf16"), [&](mlir::ModuleOp module) {
    cpu::CpuPipelineOptions cpuOptions;
    cpuOptions.cpu = "x86-64-v4";
    cpuOptions.matmul = "f32";
    cpuOptions.weightPacking = "per-call";
    runTargetStage(module, cpuOptions);
    for (mlir::func::FuncOp kernel : cpu::kernelsOf(module)) {
      if (!cpu::tiledProductDepth(kernel))
        continue;
      ++products;
      const ir::LoweringConfigAttr lowering = ir::loweringOf(kernel);
      ASSERT_EQ(lowering.getTile().size(), 2u);
      const int64_t rows = lowering.getTile()[0];
      ir::setLowering(kernel, lowering.withTile({rows, 2, 1}));
      EXPECT_NO_THROW(cpu::cpuKernelSource(module, kernel));
      ir::setLowering(kernel, lowering.withTile({rows, 2, 4}));
      expectRefused(module, kernel, "reads prefill rows in place, which only a bf16 weight");
      ir::setLowering(kernel, lowering.withTile({rows, 2, 8}));
      expectRefused(module, kernel, "reads 8 prefill rows in place; at most 7");
    }
  });
  EXPECT_GE(products, 3);
}

// Attention's tile names the blocks of rows one workgroup runs (the bf16
// flash kernel's sets, which share each key block's rounded copies): the
// kernel runs as many as the lowering says, and an f32 prefill, which runs
// one, refuses more.
TEST(KernelSelection, AttentionRunsTheLoweringsRowSets) {
  int attention = 0;
  GoldenRunner runner(loadGoldenCase("sharded_gqa2_bf16"), [&](mlir::ModuleOp module) {
    cpu::CpuPipelineOptions cpuOptions;
    cpuOptions.cpu = "znver4";
    cpuOptions.attentionMatmul = "avx512bf16";
    runTargetStage(module, cpuOptions);
    for (mlir::func::FuncOp kernel : cpu::kernelsOf(module)) {
      if (!mlir::isa_and_nonnull<ir::AttentionOp>(ir::kernelComputeOp(kernel)))
        continue;
      ++attention;
      const ir::LoweringConfigAttr lowering = ir::loweringOf(kernel);
      ASSERT_EQ(lowering.getTile().size(), 4u);
      EXPECT_EQ(lowering.getTile()[2], cpu::AttentionKernel::kBf16PrefillRowSets);
      auto setsIn = [](const std::string &source) {
        int sets = 0;
        while (source.find("%cOffset" + std::to_string(sets) + " =") != std::string::npos)
          ++sets;
        return sets;
      };
      const std::vector<int64_t> tile(lowering.getTile().begin(), lowering.getTile().end());
      for (int64_t sets : {1, 3}) {
        ir::setLowering(kernel, lowering.withTile({tile[0], tile[1], sets, tile[3]}));
        EXPECT_EQ(setsIn(cpu::cpuKernelSource(module, kernel)), sets);
      }
      ir::setLowering(kernel, lowering.withMatmul("f32").withTile({tile[0], tile[1], 2, tile[3]}));
      expectRefused(module, kernel,
                    "attention's f32 prefill runs one block of rows per workgroup, not 2");
    }
  });
  EXPECT_EQ(attention, 1);
}

// Decode splits come from the tile's fourth entry (cpu-split-decode-attention):
// the source merges partial results only with more than one, the grid and
// workspace must be the ones the splits need, and only attention has a workspace.
TEST(KernelSelection, AttentionRunsTheLoweringsDecodeSplits) {
  int attention = 0;
  GoldenRunner runner(loadGoldenCase("sharded_gqa2_bf16"), [&](mlir::ModuleOp module) {
    cpu::CpuPipelineOptions cpuOptions;
    cpuOptions.cpu = "x86-64-v3";
    cpuOptions.decodeSplits = 1;
    runTargetStage(module, cpuOptions);
    for (mlir::func::FuncOp kernel : cpu::kernelsOf(module)) {
      const ir::LoweringConfigAttr lowering = ir::loweringOf(kernel);
      if (!mlir::isa_and_nonnull<ir::AttentionOp>(ir::kernelComputeOp(kernel))) {
        ir::setLowering(kernel, lowering.withWorkspaceBytes(64));
        expectRefused(module, kernel,
                      "has workspace_bytes in its q3.lowering, which only attention's decode "
                      "splits use");
        ir::setLowering(kernel, lowering);
        continue;
      }
      ++attention;
      const std::vector<int64_t> tile(lowering.getTile().begin(), lowering.getTile().end());
      ASSERT_EQ(tile, (std::vector<int64_t>{2, 8, 1, 1}));
      EXPECT_EQ(lowering.getWorkspaceBytes(), 0);
      EXPECT_EQ(cpu::cpuKernelSource(module, kernel).find("_merge("), std::string::npos);
      cpu::AttentionKernel shape =
          cpu::attentionKernelShape(mlir::cast<ir::AttentionOp>(ir::kernelComputeOp(kernel)));
      shape.decodeSplits = 3;
      const ir::LoweringConfigAttr split = lowering.withTile({2, 8, 1, 3})
                                               .withGrid("per_row", shape.workgroupsPerRow())
                                               .withWorkspaceBytes(shape.workspaceBytes());
      ir::setLowering(kernel, split);
      EXPECT_NE(cpu::cpuKernelSource(module, kernel).find("_merge("), std::string::npos);
      ir::setLowering(kernel, split.withWorkspaceBytes(64));
      expectRefused(module, kernel,
                    "attention with 3 decode splits needs workspace_bytes = " +
                        std::to_string(shape.workspaceBytes()) + ", not 64");
      ir::setLowering(kernel, split.withTile({2, 8, 1, 17}));
      expectRefused(module, kernel, "decode splits: 1 to 16, 1 when left out)");
      ir::setLowering(kernel, split.withGrid("per_row", 2));
      expectRefused(module, kernel, "per_row 6");
    }
  });
  EXPECT_EQ(attention, 1);
}

// Code generation takes the thread scratch cpu-plan-thread-scratch planned
// (a product's panel, gain-scaled and rounded rows; none for the rest) and
// refuses a plan that is not its template's: a kernel must never reach past
// the region the runtime sized from the plan.
TEST(KernelSelection, KernelsRunOnTheThreadScratchTheirLoweringPlans) {
  int products = 0, attentions = 0;
  GoldenRunner runner(loadGoldenCase("sharded_gqa2_bf16"), [&](mlir::ModuleOp module) {
    cpu::CpuPipelineOptions cpuOptions;
    cpuOptions.cpu = "znver4"; // AVX512-BF16, whatever this host is
    cpuOptions.matmul = "avx512bf16";
    cpuOptions.attentionMatmul = "avx512bf16";
    runTargetStage(module, cpuOptions);
    for (mlir::func::FuncOp kernel : cpu::kernelsOf(module)) {
      const ir::LoweringConfigAttr lowering = ir::loweringOf(kernel);
      mlir::Operation *compute = ir::kernelComputeOp(kernel);
      const bool product = mlir::isa_and_nonnull<ir::FusedLinearOp, ir::LinearOp>(compute);
      const bool attention = mlir::isa_and_nonnull<ir::AttentionOp>(compute);
      if (!product && !attention) {
        EXPECT_EQ(lowering.getThreadScratchBytes() + lowering.getThreadScratchRowBytes(), 0);
        ir::setLowering(kernel, lowering.withThreadScratch(64, 0));
        expectRefused(module, kernel,
                      "has thread_scratch in its q3.lowering, which only the products and "
                      "attention take");
        ir::setLowering(kernel, lowering);
        continue;
      }
      const cpu::ThreadScratch planned = cpu::cpuKernelThreadScratch(kernel, lowering);
      EXPECT_EQ(lowering.getThreadScratchBytes(), planned.fixedBytes);
      EXPECT_EQ(lowering.getThreadScratchRowBytes(), planned.rowBytes);
      if (product) {
        ++products;
        // vdpbf16ps rounds every row: at least 2 bytes per k per row.
        if (lowering.getMatmul() == "avx512bf16") {
          EXPECT_GE(planned.rowBytes,
                    2 * mlir::cast<mlir::RankedTensorType>(kernel.getFunctionType().getInput(0))
                            .getDimSize(1));
        }
      } else {
        ++attentions;
        // The bf16 flash prefill's rounded key and value rows, whatever the
        // prompt's length: a fixed 512 KiB, on the thread scratch, not the stack.
        EXPECT_EQ(lowering.getMatmul(), "avx512bf16");
        EXPECT_EQ(planned.fixedBytes, 512 * 1024);
        EXPECT_EQ(planned.rowBytes, 0);
      }
      const std::string source = cpu::cpuKernelSource(module, kernel);
      EXPECT_NE(source.find("%scratch: memref<?xi8>"), std::string::npos);
      EXPECT_EQ(source.find("memref.alloca(%roundedBytes)"), std::string::npos);
      ir::setLowering(kernel,
                      product ? lowering.withThreadScratch(planned.fixedBytes, planned.rowBytes - 2)
                              : lowering.withThreadScratch(planned.fixedBytes - 64, 0));
      expectRefused(module, kernel, "is not the template's");
      ir::setLowering(kernel, lowering);
    }
  });
  EXPECT_GT(products, 0);
  EXPECT_GT(attentions, 0);
}

} // namespace
} // namespace q3::testing
