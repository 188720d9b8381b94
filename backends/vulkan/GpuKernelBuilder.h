//===- GpuKernelBuilder.h - the frame every Vulkan kernel is built in -----===//
//
// A Vulkan kernel is a gpu.func in its own gpu.module, with the interface of
// runtime/vulkan/VulkanKernelABI.h: the step parameters (binding 0), the push
// constants, then one storage buffer per tensor. This class creates that
// frame and hands out what the kernel bodies read (tensors, their element
// offsets, rows, ids, sizes) and the few structured constructs they use
// (loops, conditions, subgroup reductions, shared memory, barriers), so a
// kernel generator reads like the kernel it builds.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <functional>
#include <string>
#include <vector>

namespace q3::vulkan {

/// One tensor binding of a kernel, as the kernel views its elements.
struct TensorBinding {
  std::string name;   // names the argument in the dump
  mlir::Type element; // f32, i32 (two bf16), f16, vector<4xi32>, ...
};

class GpuKernelBuilder {
public:
  /// Starts kernel `name` with `tensors` (in dispatch order) and
  /// `extraPushWords` push constants after the tensor offsets; the entry
  /// point's default workgroup size is `defaultWorkgroupSize` (the driver
  /// overrides it).
  GpuKernelBuilder(mlir::MLIRContext &context, const std::string &name,
                   std::vector<TensorBinding> tensors, int32_t defaultWorkgroupSize,
                   int extraPushWords = 0);

  mlir::OpBuilder b;
  mlir::Location loc;

  //===- Interface ---------------------------------------------------------===//
  mlir::Value tensor(size_t i) const { return tensors_.at(i); }
  /// The element offset of tensor i within its binding (a push constant).
  mlir::Value tensorOffset(size_t i);
  mlir::Value rows();          // rows of the dispatch (T)
  mlir::Value partFirstRow();  // the weight part's first row
  mlir::Value partRows();      // the weight part's rows
  mlir::Value startPosition(); // the pass's first position (step parameters)
  mlir::Value extraPushWord(int i);

  //===- Ids and sizes (index) --------------------------------------------===//
  /// The workgroup's index in a 2-D grid (the driver folds large counts
  /// into y because x is limited to 65535 on some devices).
  mlir::Value workgroupId();
  mlir::Value localId();
  mlir::Value workgroupSize(); // the specialization constant
  mlir::Value subgroupSize();  // the specialization constant
  mlir::Value laneId();
  mlir::Value subgroupId();
  mlir::Value numSubgroups();

  //===- Values ------------------------------------------------------------===//
  mlir::Value index(int64_t value);
  mlir::Value f32(double value);
  mlir::Value i32(int64_t value);
  mlir::Value add(mlir::Value a, mlir::Value c); // index, integer or float
  mlir::Value sub(mlir::Value a, mlir::Value c);
  mlir::Value mul(mlir::Value a, mlir::Value c);
  // Index arithmetic is signed (values are below 2^31).
  mlir::Value div(mlir::Value a, mlir::Value c);
  mlir::Value rem(mlir::Value a, mlir::Value c);
  mlir::Value min(mlir::Value a, mlir::Value c);
  mlir::Value lt(mlir::Value a, mlir::Value c);
  mlir::Value ge(mlir::Value a, mlir::Value c);
  mlir::Value eq(mlir::Value a, mlir::Value c);
  mlir::Value andI(mlir::Value a, mlir::Value c);
  mlir::Value fma(mlir::Value a, mlir::Value c, mlir::Value addend);
  mlir::Value toI32(mlir::Value index);
  mlir::Value toIndex(mlir::Value i32);
  mlir::Value extract(mlir::Value vector, int64_t position);
  mlir::Value select(mlir::Value condition, mlir::Value a, mlir::Value c);
  /// values[index] for a compile-time table and an index below its size: a
  /// chain of selects (the kernels' tables are small, and MLIR 16 lowers no
  /// constant global memory to SPIR-V).
  mlir::Value tableLookup(mlir::Value index, const std::vector<float> &values);

  //===- Memory --------------------------------------------------------------===//
  mlir::Value load(mlir::Value memref, mlir::Value index);
  /// An f32, f16 or bf16 (i16 bits) element of `memref`, as f32 (exact).
  mlir::Value loadAsF32(mlir::Value memref, mlir::Value index);
  /// Stores the f32 `value` into an f32, f16 or bf16 (i16 bits) `memref`,
  /// rounded to nearest even (into f16 clamped to its finite range first,
  /// kernels::clampToF16Range).
  void storeFromF32(mlir::Value value, mlir::Value memref, mlir::Value index);
  void store(mlir::Value value, mlir::Value memref, mlir::Value index);
  /// Workgroup (shared) memory of `count` elements.
  mlir::Value sharedArray(mlir::Type element, int64_t count);
  /// Private (function) memory of `count` elements.
  mlir::Value privateArray(mlir::Type element, int64_t count);
  /// Waits for the workgroup and makes its shared-memory writes visible.
  void barrier();

  //===- Control -------------------------------------------------------------===//
  void forLoop(mlir::Value lb, mlir::Value ub, mlir::Value step,
               const std::function<void(mlir::Value)> &body);
  /// A loop carrying `init`; `body(iv, carried)` returns the next values.
  std::vector<mlir::Value>
  forLoop(mlir::Value lb, mlir::Value ub, mlir::Value step, const std::vector<mlir::Value> &init,
          const std::function<std::vector<mlir::Value>(mlir::Value, const std::vector<mlir::Value> &)>
              &body);
  void ifThen(mlir::Value condition, const std::function<void()> &then);
  /// A value chosen by branches that compute it.
  mlir::Value ifElse(mlir::Value condition, mlir::Type type,
                     const std::function<mlir::Value()> &then,
                     const std::function<mlir::Value()> &otherwise);

  //===- Subgroups ---------------------------------------------------------===//
  mlir::Value subgroupSum(mlir::Value value);
  mlir::Value subgroupMax(mlir::Value value);

  /// The finished kernel: a module holding one gpu.module with the gpu.func.
  mlir::OwningOpRef<mlir::ModuleOp> finish();

private:
  mlir::Value push(int word);
  mlir::OwningOpRef<mlir::ModuleOp> holder_;
  mlir::gpu::GPUFuncOp func_;
  mlir::Value stepParams_, pushConstants_;
  std::vector<mlir::Value> tensors_;
  int pushWords_ = 0;
};

/// The memref type a tensor binding of `element` has: a runtime-sized
/// storage buffer.
mlir::MemRefType storageBufferType(mlir::Type element);

} // namespace q3::vulkan
