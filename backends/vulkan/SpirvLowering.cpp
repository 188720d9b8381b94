//===- SpirvLowering.cpp - a kernel's gpu.module -> a SPIR-V binary -------===//
#include "backends/vulkan/SpirvLowering.h"
#include "backends/vulkan/SpirvBinary.h"
#include "runtime/vulkan/VulkanKernelABI.h"

#include "mlir/Conversion/ArithToSPIRV/ArithToSPIRV.h"
#include "mlir/Conversion/FuncToSPIRV/FuncToSPIRV.h"
#include "mlir/Conversion/GPUToSPIRV/GPUToSPIRV.h"
#include "mlir/Conversion/MathToSPIRV/MathToSPIRV.h"
#include "mlir/Conversion/MemRefToSPIRV/MemRefToSPIRV.h"
#include "mlir/Conversion/SCFToSPIRV/SCFToSPIRV.h"
#include "mlir/Conversion/VectorToSPIRV/VectorToSPIRV.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVDialect.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVOps.h"
#include "mlir/Dialect/SPIRV/IR/TargetAndABI.h"
#include "mlir/Dialect/SPIRV/Transforms/Passes.h"
#include "mlir/Dialect/SPIRV/Transforms/SPIRVConversion.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/SPIRV/Serialization.h"
#include "mlir/Transforms/DialectConversion.h"

#include <algorithm>
#include <stdexcept>
#include <string>

using namespace mlir;

namespace q3::vulkan {
namespace {

namespace abi = q3::runtime::vulkan;

constexpr const char *kWorkgroupSizeX = "q3_workgroup_size_x";
constexpr const char *kWorkgroupSizeY = "q3_workgroup_size_y";
constexpr const char *kWorkgroupSizeZ = "q3_workgroup_size_z";
constexpr const char *kWorkgroupSize = "q3_workgroup_size";
constexpr const char *kSubgroupSize = "q3_subgroup_size";

/// What a generated kernel may use; update-vce narrows it to what it does
/// use. Vulkan 1.1 gives SPIR-V 1.3 and subgroup operations.
spirv::TargetEnvAttr targetEnvironment(MLIRContext *context) {
  using C = spirv::Capability;
  auto triple = spirv::VerCapExtAttr::get(
      spirv::Version::V_1_3,
      {C::Shader, C::GroupNonUniform, C::GroupNonUniformArithmetic, C::GroupNonUniformBallot,
       C::GroupNonUniformShuffle, C::StorageBuffer16BitAccess, C::Float16, C::Int16},
      {spirv::Extension::SPV_KHR_storage_buffer_storage_class,
       spirv::Extension::SPV_KHR_16bit_storage},
      context);
  return spirv::TargetEnvAttr::get(triple, spirv::getDefaultResourceLimits(context),
                                   spirv::ClientAPI::Vulkan, spirv::Vendor::Unknown,
                                   spirv::DeviceType::Unknown,
                                   spirv::TargetEnvAttr::kUnknownDeviceID);
}

/// gpu.block_dim: the workgroup size is a specialization constant (x; y and
/// z are 1), so the driver picks it for the device. MLIR's own pattern
/// would fold in the entry point's fixed size; this one has a higher benefit.
struct WorkgroupSizeFromSpecConstant final : OpConversionPattern<gpu::BlockDimOp> {
  WorkgroupSizeFromSpecConstant(TypeConverter &converter, MLIRContext *context)
      : OpConversionPattern(converter, context, /*benefit=*/100) {}
  LogicalResult matchAndRewrite(gpu::BlockDimOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Type type = getTypeConverter()->convertType(op.getType());
    if (op.getDimension() != gpu::Dimension::x) {
      rewriter.replaceOpWithNewOp<spirv::ConstantOp>(op, type, rewriter.getIntegerAttr(type, 1));
      return success();
    }
    rewriter.replaceOpWithNewOp<spirv::ReferenceOfOp>(op, type, kWorkgroupSizeX);
    return success();
  }
};

/// gpu.subgroup_size: the specialization constant the driver sets to the
/// size it requires of the pipeline (so the kernel's compiler can fold it).
struct SubgroupSizeFromSpecConstant final : OpConversionPattern<gpu::SubgroupSizeOp> {
  SubgroupSizeFromSpecConstant(TypeConverter &converter, MLIRContext *context)
      : OpConversionPattern(converter, context, /*benefit=*/100) {}
  LogicalResult matchAndRewrite(gpu::SubgroupSizeOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<spirv::ReferenceOfOp>(
        op, getTypeConverter()->convertType(op.getType()), kSubgroupSize);
    return success();
  }
};

/// gpu.lane_id: the invocation's index within its subgroup, the builtin
/// SubgroupLocalInvocationId (MLIR 16 has no pattern for the op, and its
/// builtin-variable helper does not know this builtin).
struct LaneIdFromBuiltin final : OpConversionPattern<gpu::LaneIdOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(gpu::LaneIdOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    constexpr const char *name = "__builtin_var_SubgroupLocalInvocationId__";
    Type i32 = rewriter.getI32Type();
    Operation *table = SymbolTable::getNearestSymbolTable(op->getParentOp());
    auto variable =
        dyn_cast_or_null<spirv::GlobalVariableOp>(SymbolTable::lookupSymbolIn(table, name));
    if (!variable) {
      OpBuilder builder(op->getContext());
      builder.setInsertionPointToStart(&table->getRegion(0).front());
      variable = builder.create<spirv::GlobalVariableOp>(
          op.getLoc(), spirv::PointerType::get(i32, spirv::StorageClass::Input), name,
          spirv::BuiltIn::SubgroupLocalInvocationId);
    }
    Value pointer = rewriter.create<spirv::AddressOfOp>(op.getLoc(), variable);
    Value lane = rewriter.create<spirv::LoadOp>(op.getLoc(), pointer);
    Type type = getTypeConverter()->convertType(op.getType());
    if (type != i32)
      lane = rewriter.create<spirv::UConvertOp>(op.getLoc(), type, lane);
    rewriter.replaceOp(op, lane);
    return success();
  }
};

std::string diagnosticsOf(const std::vector<std::string> &messages) {
  std::string text;
  for (const std::string &m : messages)
    text += (text.empty() ? "" : "; ") + m;
  return text;
}

/// The spec constants the patterns above refer to, with their defaults.
void addSpecializationConstants(spirv::ModuleOp module, int32_t workgroupSize,
                                int32_t subgroupSize) {
  OpBuilder b(module.getContext());
  b.setInsertionPointToStart(module.getBody());
  Location loc = module.getLoc();
  auto i32 = b.getI32Type();
  auto x = b.create<spirv::SpecConstantOp>(loc, kWorkgroupSizeX, b.getI32IntegerAttr(workgroupSize));
  x->setAttr("spec_id", b.getI32IntegerAttr(abi::kWorkgroupSizeSpecId));
  b.create<spirv::SpecConstantOp>(loc, kWorkgroupSizeY, b.getI32IntegerAttr(1));
  b.create<spirv::SpecConstantOp>(loc, kWorkgroupSizeZ, b.getI32IntegerAttr(1));
  auto sg = b.create<spirv::SpecConstantOp>(loc, kSubgroupSize, b.getI32IntegerAttr(subgroupSize));
  sg->setAttr("spec_id", b.getI32IntegerAttr(abi::kSubgroupSizeSpecId));
  b.create<spirv::SpecConstantCompositeOp>(
      loc, VectorType::get({3}, i32), kWorkgroupSize,
      b.getArrayAttr({SymbolRefAttr::get(b.getContext(), kWorkgroupSizeX),
                      SymbolRefAttr::get(b.getContext(), kWorkgroupSizeY),
                      SymbolRefAttr::get(b.getContext(), kWorkgroupSizeZ)}));
}

/// MLIR 16's scf.for lowering keeps each loop result in a Function variable
/// that only the loop body stores: a loop that runs no iteration (a lane past
/// a short row, a subgroup past the visible positions) loads it
/// uninitialized. lavapipe reads such a variable as zero; NVIDIA's driver
/// reads whatever its register held (measured on an H200: q/k-norm scales and
/// attention merges off). So every result is selected against its initial
/// value when the loop cannot have run.
void guardZeroTripLoopResults(gpu::GPUModuleOp module) {
  module.walk([](scf::ForOp loop) {
    if (loop.getNumResults() == 0)
      return;
    OpBuilder b(loop.getContext());
    b.setInsertionPointAfter(loop);
    Location loc = loop.getLoc();
    Value ran = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, loop.getLowerBound(),
                                        loop.getUpperBound());
    for (auto [result, init] : llvm::zip(loop.getResults(), loop.getInitArgs())) {
      // SPIR-V before 1.4 selects vectors by a vector of conditions.
      Value condition = ran;
      if (auto vector = result.getType().dyn_cast<VectorType>())
        condition = b.create<vector::BroadcastOp>(
            loc, VectorType::get(vector.getShape(), b.getI1Type()), ran);
      auto guarded = b.create<arith::SelectOp>(loc, condition, result, init);
      result.replaceAllUsesExcept(guarded, guarded);
    }
  });
}

/// The entry point's push-constant argument became a global variable with a
/// descriptor set and binding like the buffers; push constants have neither.
void dropPushConstantBindings(spirv::ModuleOp module) {
  module.walk([](spirv::GlobalVariableOp variable) {
    auto pointer = variable.getType().cast<spirv::PointerType>();
    if (pointer.getStorageClass() != spirv::StorageClass::PushConstant)
      return;
    variable->removeAttr("descriptor_set");
    variable->removeAttr("binding");
  });
}

} // namespace

void loadKernelDialects(MLIRContext &context) {
  context.loadDialect<gpu::GPUDialect, scf::SCFDialect, arith::ArithDialect, math::MathDialect,
                      memref::MemRefDialect, func::FuncDialect, vector::VectorDialect,
                      spirv::SPIRVDialect>();
}

SpirvModule lowerToSpirv(gpu::GPUModuleOp kernelModule) {
  MLIRContext *context = kernelModule.getContext();
  std::vector<std::string> messages;
  ScopedDiagnosticHandler handler(context, [&](Diagnostic &d) {
    if (d.getSeverity() == DiagnosticSeverity::Error)
      messages.push_back(d.str());
    return success();
  });
  auto fail = [&](const std::string &what) {
    return std::runtime_error("SPIR-V lowering of '" + kernelModule.getName().str() + "': " +
                              what + (messages.empty() ? "" : ": " + diagnosticsOf(messages)));
  };

  OwningOpRef<ModuleOp> holder = ModuleOp::create(kernelModule.getLoc());
  spirv::TargetEnvAttr target = targetEnvironment(context);
  (*holder)->setAttr(spirv::getTargetEnvAttrName(), target);
  OpBuilder b(context);
  b.setInsertionPointToEnd(holder->getBody());
  auto module = cast<gpu::GPUModuleOp>(b.clone(*kernelModule));

  // The defaults of the specialization constants: the generator's entry
  // point ABI (its workgroup size) and a subgroup size that divides it.
  int32_t workgroupSize = 64;
  module.walk([&](gpu::GPUFuncOp func) {
    if (auto abiAttr = spirv::lookupEntryPointABI(func))
      if (auto size = abiAttr.getWorkgroupSize())
        workgroupSize = size.asArrayRef()[0];
  });

  guardZeroTripLoopResults(module);
  SPIRVConversionOptions options;
  options.emulateLT32BitScalarTypes = false;
  SPIRVTypeConverter converter(target, options);
  RewritePatternSet patterns(context);
  ScfToSPIRVContext scfContext;
  populateGPUToSPIRVPatterns(converter, patterns);
  populateSCFToSPIRVPatterns(converter, scfContext, patterns);
  arith::populateArithToSPIRVPatterns(converter, patterns);
  populateMemRefToSPIRVPatterns(converter, patterns);
  populateMathToSPIRVPatterns(converter, patterns);
  populateFuncToSPIRVPatterns(converter, patterns);
  populateVectorToSPIRVPatterns(converter, patterns);
  patterns.add<WorkgroupSizeFromSpecConstant, SubgroupSizeFromSpecConstant, LaneIdFromBuiltin>(
      converter, context);
  std::unique_ptr<ConversionTarget> legal = SPIRVConversionTarget::get(target);
  legal->addLegalOp<ModuleOp>();
  if (failed(applyFullConversion(module, *legal, std::move(patterns))))
    throw fail("conversion to the spirv dialect failed");

  spirv::ModuleOp spirvModule;
  holder->walk([&](spirv::ModuleOp m) { spirvModule = m; });
  if (!spirvModule)
    throw fail("the conversion produced no spirv.module");
  addSpecializationConstants(spirvModule, workgroupSize, std::min(workgroupSize, 32));

  PassManager pm(context);
  OpPassManager &spirvPasses = pm.nest<spirv::ModuleOp>();
  spirvPasses.addPass(spirv::createSPIRVLowerABIAttributesPass());
  spirvPasses.addPass(spirv::createSPIRVUpdateVCEPass());
  if (failed(pm.run(*holder)))
    throw fail("spirv-lower-abi-attrs / spirv-update-vce failed");
  dropPushConstantBindings(spirvModule);
  if (failed(spirvModule.verify()))
    throw fail("the spirv.module does not verify");

  SmallVector<uint32_t, 0> words;
  spirv::SerializationOptions serialization;
  serialization.emitSymbolName = true;
  if (failed(spirv::serialize(spirvModule, words, serialization)))
    throw fail("serialization failed");
  SpirvModule result;
  result.words.assign(words.begin(), words.end());
  decorateBuiltIn(result.words, kWorkgroupSize, SpirvBuiltIn::WorkgroupSize);
  if (auto triple = spirvModule.getVceTriple())
    for (spirv::Capability capability : triple->getCapabilities())
      result.capabilities.push_back(spirv::stringifyCapability(capability).str());
  return result;
}

} // namespace q3::vulkan
