//===- QKNormRopeKernel.cpp - q/k-norm + RoPE + the KV cache write --------===//
//
// One workgroup per (row, group of head slots); a slot is a query head
// (slots 0 .. Hq-1) or a key head (Hq .. Hq+Hkv-1, which also copies its
// value head into the cache). First the workgroup's invocations compute the
// row's RoPE angles, cos and sin for each of the D/2 rotate-half pairs at
// position start + t, into shared memory (the shared RoPE helper: exact
// integer-split angle, polynomial sine and cosine). Then each subgroup takes
// a slot: its lanes hold pairs (i, i + D/2), Sum x^2 reduces by a subgroup
// sum, and each pair is normalized, times its gains, rotated and stored: a
// query to the query buffer, a key and its value into this layer's cache at
// [kv head][position], rounded to f16 when the cache is f16.
//
//===----------------------------------------------------------------------===//
#include "backends/common/KernelMath.h"
#include "backends/vulkan/GpuKernelBuilder.h"
#include "backends/vulkan/Kernels.h"
#include "backends/vulkan/WeightAccess.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

namespace q3::vulkan {

int64_t qkNormRopeSharedBytes(const QKNormRopeKernel &kernel) {
  return 2 * 4 * (kernel.headDim / 2);
}

OwningOpRef<ModuleOp> buildQKNormRope(MLIRContext &context, const QKNormRopeKernel &kernel) {
  const int64_t D = kernel.headDim, half = D / 2;
  const int64_t slots = kernel.queryHeads + kernel.kvHeads;
  const int64_t width = (kernel.queryHeads + 2 * kernel.kvHeads) * D;
  WeightAccess gains(context, kernel.gains, D, /*maxElementsPerUnit=*/2);
  Type f32 = FloatType::getF32(&context);
  Type cached = cacheElementType(context, kernel.cache);
  GpuKernelBuilder k(context, kernel.name,
                     {{"qkv", f32},
                      {"q_gain", gains.element()},
                      {"k_gain", gains.element()},
                      {"keys", cached},
                      {"values", cached},
                      {"query", f32}},
                     /*defaultWorkgroupSize=*/64, /*extraPushWords=*/1);
  Value capacity = k.extraPushWord(0);
  Value cosTable = k.sharedArray(f32, half), sinTable = k.sharedArray(f32, half);

  // The rotation frequencies as turn words (KernelMath's ropeTurnWords).
  std::vector<float> high, mid, low;
  for (int64_t i = 0; i < half; ++i) {
    auto words = kernels::ropeTurnWords(kernels::ropeFrequency(kernel.theta, D, i));
    high.push_back(words[0]);
    mid.push_back(words[1]);
    low.push_back(words[2]);
  }

  Value groupsPerRow = k.div(k.add(k.index(slots), k.sub(k.numSubgroups(), k.index(1))),
                             k.numSubgroups());
  Value id = k.workgroupId();
  Value t = k.div(id, groupsPerRow), group = k.rem(id, groupsPerRow);
  k.ifThen(k.lt(t, k.rows()), [&] {
    Value position = k.add(k.startPosition(), t);
    Value position32 = k.toI32(position);
    k.forLoop(k.localId(), k.index(half), k.workgroupSize(), [&](Value i) {
      kernels::SinCos angle = kernels::ropeSinCos(k.b, k.loc, position32, k.tableLookup(i, high),
                                                  k.tableLookup(i, mid), k.tableLookup(i, low));
      k.store(angle.cos, cosTable, i);
      k.store(angle.sin, sinTable, i);
    });
    k.barrier();

    Value slot = k.add(k.mul(group, k.numSubgroups()), k.subgroupId());
    k.ifThen(k.lt(slot, k.index(slots)), [&] {
      Value lane = k.laneId(), step = k.subgroupSize();
      Value rowBase = k.add(k.tensorOffset(0), k.mul(t, k.index(width)));
      Value head = k.add(rowBase, k.mul(slot, k.index(D)));
      std::vector<Value> squares = k.forLoop(
          lane, k.index(half), step, {k.f32(0.0)}, [&](Value i, const std::vector<Value> &acc) {
            Value a = k.load(k.tensor(0), k.add(head, i));
            Value b = k.load(k.tensor(0), k.add(head, k.add(i, k.index(half))));
            return std::vector<Value>{k.fma(b, b, k.fma(a, a, acc[0]))};
          });
      Value scale = kernels::inverseRms(k.b, k.loc, k.subgroupSum(squares[0]), D, kernel.eps);
      Value isQuery = k.lt(slot, k.index(kernel.queryHeads));
      Value kvHead = k.sub(slot, k.index(kernel.queryHeads)); // for key slots
      // Where the rotated pair goes: the query buffer [t][head][D], or the
      // keys at [kv head][position][D] of this layer's cache.
      Value queryBase = k.add(k.tensorOffset(5), k.mul(k.add(k.mul(t, k.index(kernel.queryHeads)),
                                                               k.min(slot, k.index(kernel.queryHeads - 1))),
                                                         k.index(D)));
      Value cacheRow = k.mul(k.add(k.mul(k.select(isQuery, k.index(0), kvHead), capacity),
                                   position),
                             k.index(D));
      k.forLoop(lane, k.index(half), step, [&](Value i) {
        Value j = k.add(i, k.index(half));
        Value a = k.load(k.tensor(0), k.add(head, i));
        Value b = k.load(k.tensor(0), k.add(head, j));
        // (x * rms) then the gain, per pair; the query or the key gain.
        Value ga = k.ifElse(
            isQuery, f32, [&] { return gains.loadElement(k, k.tensor(1), k.tensorOffset(1), i); },
            [&] { return gains.loadElement(k, k.tensor(2), k.tensorOffset(2), i); });
        Value gb = k.ifElse(
            isQuery, f32, [&] { return gains.loadElement(k, k.tensor(1), k.tensorOffset(1), j); },
            [&] { return gains.loadElement(k, k.tensor(2), k.tensorOffset(2), j); });
        Value na = k.mul(k.mul(a, scale), ga), nb = k.mul(k.mul(b, scale), gb);
        kernels::SinCos angle{k.load(cosTable, i), k.load(sinTable, i)};
        auto [ra, rb] = kernels::ropeRotate(k.b, k.loc, na, nb, angle);
        k.ifThen(isQuery, [&] {
          k.store(ra, k.tensor(5), k.add(queryBase, i));
          k.store(rb, k.tensor(5), k.add(queryBase, j));
        });
        k.ifThen(k.ge(slot, k.index(kernel.queryHeads)), [&] {
          Value keyAt = k.add(k.tensorOffset(3), cacheRow);
          k.storeFromF32(ra, k.tensor(3), k.add(keyAt, i));
          k.storeFromF32(rb, k.tensor(3), k.add(keyAt, j));
          // The value head of this key head, as it is.
          Value valueHead = k.add(rowBase, k.mul(k.add(slot, k.index(kernel.kvHeads)), k.index(D)));
          Value valueAt = k.add(k.tensorOffset(4), cacheRow);
          k.storeFromF32(k.load(k.tensor(0), k.add(valueHead, i)), k.tensor(4),
                         k.add(valueAt, i));
          k.storeFromF32(k.load(k.tensor(0), k.add(valueHead, j)), k.tensor(4),
                         k.add(valueAt, j));
        });
      });
    });
  });
  return k.finish();
}

} // namespace q3::vulkan
