//===- GpuKernelBuilder.cpp - the frame every Vulkan kernel is built in ---===//
#include "backends/vulkan/GpuKernelBuilder.h"
#include "backends/common/KernelMath.h"
#include "runtime/vulkan/VulkanKernelABI.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVAttributes.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVEnums.h"
#include "mlir/Dialect/SPIRV/IR/TargetAndABI.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;

namespace q3::vulkan {
namespace abi = q3::runtime::vulkan;

namespace {

Attribute storageClass(MLIRContext *context, spirv::StorageClass storage) {
  return spirv::StorageClassAttr::get(context, storage);
}

bool isFloatLike(Type type) { return getElementTypeOrSelf(type).isa<FloatType>(); }

} // namespace

MemRefType storageBufferType(Type element) {
  return MemRefType::get({ShapedType::kDynamic}, element, MemRefLayoutAttrInterface(),
                         storageClass(element.getContext(), spirv::StorageClass::StorageBuffer));
}

GpuKernelBuilder::GpuKernelBuilder(MLIRContext &context, const std::string &name,
                                   std::vector<TensorBinding> tensors,
                                   int32_t defaultWorkgroupSize, int extraPushWords)
    : b(&context), loc(NameLoc::get(b.getStringAttr(name))) {
  holder_ = ModuleOp::create(loc);
  b.setInsertionPointToEnd(holder_->getBody());
  auto module = b.create<gpu::GPUModuleOp>(loc, name);
  b.setInsertionPointToStart(&module.getBodyRegion().front());

  pushWords_ = int(abi::kPushFirstTensorOffset + tensors.size()) + extraPushWords;
  if (pushWords_ > int(abi::kMaxPushWords))
    throw std::runtime_error("kernel " + name + " needs more push constants than Vulkan guarantees");
  std::vector<Type> arguments = {
      MemRefType::get({abi::kStepParamsWords}, b.getI32Type(), MemRefLayoutAttrInterface(),
                      storageClass(&context, spirv::StorageClass::StorageBuffer)),
      MemRefType::get({pushWords_}, b.getI32Type(), MemRefLayoutAttrInterface(),
                      storageClass(&context, spirv::StorageClass::PushConstant))};
  for (const TensorBinding &t : tensors)
    arguments.push_back(storageBufferType(t.element));
  func_ = b.create<gpu::GPUFuncOp>(loc, name, b.getFunctionType(arguments, {}));
  func_->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  func_->setAttr(spirv::getEntryPointABIAttrName(),
                 spirv::getEntryPointABIAttr(&context, {defaultWorkgroupSize, 1, 1}));
  // Binding 0 the step parameters, the tensors from binding 1; the push
  // constants' binding is dropped after lowering (SpirvLowering.cpp).
  func_.setArgAttr(0, spirv::getInterfaceVarABIAttrName(),
                   spirv::getInterfaceVarABIAttr(0, abi::kStepParamsBinding, std::nullopt, &context));
  func_.setArgAttr(1, spirv::getInterfaceVarABIAttrName(),
                   spirv::getInterfaceVarABIAttr(1, 0, std::nullopt, &context));
  for (size_t i = 0; i < tensors.size(); ++i)
    func_.setArgAttr(unsigned(i + 2), spirv::getInterfaceVarABIAttrName(),
                     spirv::getInterfaceVarABIAttr(0, unsigned(abi::kFirstTensorBinding + i),
                                                   std::nullopt, &context));
  Block &entry = func_.getBody().front();
  stepParams_ = entry.getArgument(0);
  pushConstants_ = entry.getArgument(1);
  for (size_t i = 0; i < tensors.size(); ++i)
    tensors_.push_back(entry.getArgument(unsigned(i + 2)));
  b.setInsertionPointToStart(&entry);
}

OwningOpRef<ModuleOp> GpuKernelBuilder::finish() {
  b.create<gpu::ReturnOp>(loc);
  return std::move(holder_);
}

//===- Interface -----------------------------------------------------------===//

Value GpuKernelBuilder::push(int word) {
  return toIndex(load(pushConstants_, index(word)));
}
Value GpuKernelBuilder::tensorOffset(size_t i) {
  return push(int(abi::kPushFirstTensorOffset + i));
}
Value GpuKernelBuilder::rows() { return push(abi::kPushRows); }
Value GpuKernelBuilder::partFirstRow() { return push(abi::kPushPartFirstRow); }
Value GpuKernelBuilder::partRows() { return push(abi::kPushPartRows); }
Value GpuKernelBuilder::extraPushWord(int i) {
  return push(int(abi::kPushFirstTensorOffset + tensors_.size()) + i);
}
Value GpuKernelBuilder::startPosition() {
  return toIndex(load(stepParams_, index(abi::kStepStartPosition)));
}

//===- Ids and sizes ---------------------------------------------------------===//

Value GpuKernelBuilder::workgroupId() {
  Value x = b.create<gpu::BlockIdOp>(loc, gpu::Dimension::x);
  Value y = b.create<gpu::BlockIdOp>(loc, gpu::Dimension::y);
  Value width = b.create<gpu::GridDimOp>(loc, gpu::Dimension::x);
  return add(mul(y, width), x);
}
Value GpuKernelBuilder::localId() { return b.create<gpu::ThreadIdOp>(loc, gpu::Dimension::x); }
Value GpuKernelBuilder::workgroupSize() {
  return b.create<gpu::BlockDimOp>(loc, gpu::Dimension::x);
}
Value GpuKernelBuilder::subgroupSize() {
  return b.create<gpu::SubgroupSizeOp>(loc, b.getIndexType());
}
Value GpuKernelBuilder::laneId() { return b.create<gpu::LaneIdOp>(loc); }
Value GpuKernelBuilder::subgroupId() {
  return b.create<gpu::SubgroupIdOp>(loc, b.getIndexType());
}
Value GpuKernelBuilder::numSubgroups() {
  return b.create<gpu::NumSubgroupsOp>(loc, b.getIndexType());
}

//===- Values ------------------------------------------------------------------===//

Value GpuKernelBuilder::index(int64_t value) {
  return b.create<arith::ConstantIndexOp>(loc, value);
}
Value GpuKernelBuilder::f32(double value) {
  return b.create<arith::ConstantOp>(loc, b.getF32Type(), b.getF32FloatAttr(float(value)));
}
Value GpuKernelBuilder::i32(int64_t value) {
  return b.create<arith::ConstantOp>(loc, b.getI32Type(), b.getI32IntegerAttr(int32_t(value)));
}
Value GpuKernelBuilder::add(Value a, Value c) {
  if (isFloatLike(a.getType()))
    return b.create<arith::AddFOp>(loc, a, c);
  return b.create<arith::AddIOp>(loc, a, c);
}
Value GpuKernelBuilder::sub(Value a, Value c) {
  if (isFloatLike(a.getType()))
    return b.create<arith::SubFOp>(loc, a, c);
  return b.create<arith::SubIOp>(loc, a, c);
}
Value GpuKernelBuilder::mul(Value a, Value c) {
  if (isFloatLike(a.getType()))
    return b.create<arith::MulFOp>(loc, a, c);
  return b.create<arith::MulIOp>(loc, a, c);
}
// Signed operations on indices (all non-negative and below 2^31): MLIR 16
// lowers an unsigned op on `index` (i64 narrowed to i32) only for some ops.
Value GpuKernelBuilder::div(Value a, Value c) { return b.create<arith::DivSIOp>(loc, a, c); }
Value GpuKernelBuilder::rem(Value a, Value c) { return b.create<arith::RemSIOp>(loc, a, c); }
Value GpuKernelBuilder::min(Value a, Value c) { return b.create<arith::MinSIOp>(loc, a, c); }
Value GpuKernelBuilder::lt(Value a, Value c) {
  return b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, a, c);
}
Value GpuKernelBuilder::ge(Value a, Value c) {
  return b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sge, a, c);
}
Value GpuKernelBuilder::eq(Value a, Value c) {
  return b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, a, c);
}
Value GpuKernelBuilder::andI(Value a, Value c) { return b.create<arith::AndIOp>(loc, a, c); }
Value GpuKernelBuilder::fma(Value a, Value c, Value addend) {
  // A multiply and an add, which the device's compiler may fuse: GLSL's
  // fma (math.fma) must be fused, which a device without FMA units (or
  // lavapipe, through a libm call) emulates slowly.
  return b.create<arith::AddFOp>(loc, b.create<arith::MulFOp>(loc, a, c), addend);
}
Value GpuKernelBuilder::toI32(Value value) {
  return b.create<arith::IndexCastOp>(loc, b.getI32Type(), value);
}
Value GpuKernelBuilder::toIndex(Value value) {
  return b.create<arith::IndexCastOp>(loc, b.getIndexType(), value);
}
Value GpuKernelBuilder::extract(Value vector, int64_t position) {
  return b.create<vector::ExtractOp>(loc, vector, ArrayRef<int64_t>{position});
}

Value GpuKernelBuilder::select(Value condition, Value a, Value c) {
  return b.create<arith::SelectOp>(loc, condition, a, c);
}
Value GpuKernelBuilder::tableLookup(Value at, const std::vector<float> &values) {
  Value chosen = f32(values.back());
  for (size_t i = values.size() - 1; i-- > 0;)
    chosen = select(eq(at, index(int64_t(i))), f32(values[i]), chosen);
  return chosen;
}

//===- Memory ------------------------------------------------------------------===//

Value GpuKernelBuilder::load(Value memref, Value at) {
  return b.create<memref::LoadOp>(loc, memref, ValueRange{at});
}
void GpuKernelBuilder::store(Value value, Value memref, Value at) {
  b.create<memref::StoreOp>(loc, value, memref, ValueRange{at});
}
Value GpuKernelBuilder::loadAsF32(Value memref, Value at) {
  Value value = load(memref, at);
  if (value.getType().isF32())
    return value;
  if (value.getType().isInteger(16)) // bf16 bits
    return kernels::widenBf16Low(b, loc, b.create<arith::ExtUIOp>(loc, b.getI32Type(), value));
  return b.create<arith::ExtFOp>(loc, b.getF32Type(), value);
}
void GpuKernelBuilder::storeFromF32(Value value, Value memref, Value at) {
  Type element = memref.getType().cast<MemRefType>().getElementType();
  if (element.isInteger(16))
    value = b.create<arith::TruncIOp>(loc, element, kernels::roundToBf16Bits(b, loc, value));
  else if (element.isF16())
    value = b.create<arith::TruncFOp>(loc, element, kernels::clampToF16Range(b, loc, value));
  else if (element != value.getType())
    value = b.create<arith::TruncFOp>(loc, element, value);
  store(value, memref, at);
}
Value GpuKernelBuilder::sharedArray(Type element, int64_t count) {
  auto type = MemRefType::get({count}, element, MemRefLayoutAttrInterface(),
                              storageClass(b.getContext(), spirv::StorageClass::Workgroup));
  // Shared memory lives for the whole kernel: allocated at its entry.
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&func_.getBody().front());
  return b.create<memref::AllocOp>(loc, type);
}
Value GpuKernelBuilder::privateArray(Type element, int64_t count) {
  auto type = MemRefType::get({count}, element, MemRefLayoutAttrInterface(),
                              storageClass(b.getContext(), spirv::StorageClass::Function));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&func_.getBody().front());
  return b.create<memref::AllocaOp>(loc, type);
}
void GpuKernelBuilder::barrier() { b.create<gpu::BarrierOp>(loc); }

//===- Control -----------------------------------------------------------------===//

void GpuKernelBuilder::forLoop(Value lb, Value ub, Value step,
                               const std::function<void(Value)> &body) {
  auto loop = b.create<scf::ForOp>(loc, lb, ub, step);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(loop.getBody()->getTerminator());
  body(loop.getInductionVar());
}

std::vector<Value> GpuKernelBuilder::forLoop(
    Value lb, Value ub, Value step, const std::vector<Value> &init,
    const std::function<std::vector<Value>(Value, const std::vector<Value> &)> &body) {
  auto loop = b.create<scf::ForOp>(loc, lb, ub, step, init);
  {
    OpBuilder::InsertionGuard guard(b);
    Block *block = loop.getBody();
    if (!block->empty())
      block->getTerminator()->erase();
    b.setInsertionPointToEnd(block);
    std::vector<Value> carried(loop.getRegionIterArgs().begin(), loop.getRegionIterArgs().end());
    std::vector<Value> next = body(loop.getInductionVar(), carried);
    b.create<scf::YieldOp>(loc, next);
  }
  return std::vector<Value>(loop.getResults().begin(), loop.getResults().end());
}

void GpuKernelBuilder::ifThen(Value condition, const std::function<void()> &then) {
  auto branch = b.create<scf::IfOp>(loc, condition, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(branch.thenBlock()->getTerminator());
  then();
}

Value GpuKernelBuilder::ifElse(Value condition, Type type, const std::function<Value()> &then,
                               const std::function<Value()> &otherwise) {
  auto branch = b.create<scf::IfOp>(loc, TypeRange{type}, condition, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(branch.thenBlock());
  b.create<scf::YieldOp>(loc, then());
  b.setInsertionPointToEnd(branch.elseBlock());
  b.create<scf::YieldOp>(loc, otherwise());
  return branch.getResult(0);
}

//===- Subgroups ---------------------------------------------------------------===//

Value GpuKernelBuilder::subgroupSum(Value value) {
  return b.create<gpu::SubgroupReduceOp>(loc, value, gpu::AllReduceOperation::ADD);
}
Value GpuKernelBuilder::subgroupMax(Value value) {
  return b.create<gpu::SubgroupReduceOp>(loc, value, gpu::AllReduceOperation::MAX);
}

} // namespace q3::vulkan
