//===- AttentionKernel.cpp - causal GQA attention over the KV cache -------===//
//
// Workgroup (t, g) computes query row t for every query head h with
// kv_head_map[h] == g: the G heads of a GQA group read KV head g's keys and
// values in place, each loaded once for all G. Row t sees positions
// [0, start + t] (causal). The workgroup's subgroups take positions
// s = subgroup, subgroup + subgroups, ...; within a subgroup, lane l holds
// elements l, l + S, ... (S the subgroup size) of the G query vectors and of
// G output accumulators. Per position: G partial dot products, G subgroup
// sums (the scores), the shared online-softmax step per head, and the
// value row accumulated with the new weight. At the end each subgroup puts
// its (max, sum, accumulators) in shared memory and the workgroup merges
// them (KernelMath's mergeSoftmax) into the output row.
//
// With decode splits (the one-row variant, decodeSplits > 1), workgroup
// (run, g) covers one run of KernelMath's decodeSplit and writes each query
// head's merged but unnormalized state (max, sum, value sums) to its record
// in the workspace; buildAttentionMerge's dispatch, right after, combines a
// head's runs into the output row.
//
//===----------------------------------------------------------------------===//
#include "backends/common/KernelMath.h"
#include "backends/vulkan/GpuKernelBuilder.h"
#include "backends/vulkan/Kernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <stdexcept>

using namespace mlir;

namespace q3::vulkan {
namespace {

/// The query heads of each KV head, in order.
std::vector<std::vector<int64_t>> headGroups(const AttentionKernel &kernel) {
  std::vector<std::vector<int64_t>> groups(size_t(kernel.kvHeads));
  for (int64_t h = 0; h < kernel.queryHeads; ++h)
    groups.at(size_t(kernel.kvHeadMap.at(size_t(h)))).push_back(h);
  return groups;
}

} // namespace

int64_t attentionGroupSize(const AttentionKernel &kernel) {
  size_t largest = 0;
  for (const auto &group : headGroups(kernel))
    largest = std::max(largest, group.size());
  return int64_t(largest);
}

int64_t attentionSharedBytes(const AttentionKernel &kernel) {
  const int64_t members = kernel.rowsPerWorkgroup * attentionGroupSize(kernel);
  return 4 * kernel.subgroups * members * (kernel.headDim + 2);
}

OwningOpRef<ModuleOp> buildAttention(MLIRContext &context, const AttentionKernel &kernel) {
  const int64_t D = kernel.headDim, Hq = kernel.queryHeads, Hkv = kernel.kvHeads;
  const std::vector<std::vector<int64_t>> groups = headGroups(kernel);
  const int64_t G = attentionGroupSize(kernel);
  const int64_t NS = kernel.subgroups;
  // A workgroup's query vectors ("members"): rows x the group's heads,
  // member m = (row m / G, head m % G).
  const int64_t R = kernel.rowsPerWorkgroup, M = R * G;
  Type f32 = FloatType::getF32(&context);
  Type cached = cacheElementType(context, kernel.cache);
  const bool split = kernel.decodeSplits > 1 && kernel.oneRowVariant;
  if ((split || kernel.oneRowVariant) && R != 1)
    throw std::invalid_argument("the one-row attention variant takes one row per workgroup");
  std::vector<TensorBinding> bindings = {
      {"query", f32}, {"keys", cached}, {"values", cached}, {"out", f32}};
  if (kernel.decodeSplits > 1)
    bindings.push_back({"workspace", f32});
  GpuKernelBuilder k(context, kernel.name, bindings,
                     /*defaultWorkgroupSize=*/int32_t(NS * 32), /*extraPushWords=*/1);
  Value capacity = k.extraPushWord(0);
  Value sharedMax = k.sharedArray(f32, NS * M);
  Value sharedSum = k.sharedArray(f32, NS * M);
  Value sharedAcc = k.sharedArray(f32, NS * M * D);

  // Query head j of group g: a formula for Qwen3's consecutive groups, a
  // table otherwise (a group with fewer than G heads repeats its last one;
  // its results go nowhere).
  bool consecutive = true;
  for (int64_t g = 0; g < Hkv; ++g)
    for (int64_t j = 0; j < G; ++j)
      consecutive &= j < int64_t(groups[size_t(g)].size()) && groups[size_t(g)][size_t(j)] == g * G + j;
  auto headOf = [&](Value g, int64_t j) -> Value {
    if (consecutive)
      return k.add(k.mul(g, k.index(G)), k.index(j));
    std::vector<float> table;
    for (int64_t gg = 0; gg < Hkv; ++gg) {
      const auto &members = groups[size_t(gg)];
      table.push_back(members.empty() ? 0.0f : float(members[size_t(std::min<int64_t>(j, int64_t(members.size()) - 1))]));
    }
    Value asFloat = k.tableLookup(g, table);
    return k.toIndex(k.b.create<arith::FPToSIOp>(k.loc, k.b.getI32Type(), asFloat));
  };
  auto memberValid = [&](Value g, int64_t j) -> Value {
    if (consecutive)
      return Value();
    std::vector<float> sizes;
    for (const auto &members : groups)
      sizes.push_back(float(members.size()));
    Value size = k.toIndex(
        k.b.create<arith::FPToSIOp>(k.loc, k.b.getI32Type(), k.tableLookup(g, sizes)));
    return k.lt(k.index(j), size);
  };

  // Workgroup id = (row block, g): rows t0 .. t0 + R - 1 (those below the
  // dispatch's rows) see positions up to their own; the loop runs to the
  // last one's. With splits (one row) id = (run, g): run r takes positions
  // [from, to) of decodeSplit's runs, if it is active.
  Value id = k.workgroupId();
  Value g = k.rem(id, k.index(Hkv));
  Value t0 = split ? k.index(0) : k.mul(k.div(id, k.index(Hkv)), k.index(R));
  Value lastRow = k.min(k.add(t0, k.index(R - 1)), k.sub(k.rows(), k.index(1)));
  Value visible = k.add(k.add(k.startPosition(), lastRow), k.index(1));
  Value run, from = k.index(0), to = visible, works = k.lt(t0, k.rows());
  if (split) {
    run = k.div(id, k.index(Hkv));
    kernels::DecodeSplit runs =
        kernels::decodeSplit(k.b, k.loc, visible, kernel.decodeSplits, kernel.splitPositions);
    from = k.mul(run, runs.span);
    to = k.min(k.add(from, runs.span), visible);
    works = k.lt(run, runs.active);
  }
  k.ifThen(works, [&] {
    Value lane = k.laneId(), sg = k.subgroupId(), S = k.subgroupSize();
    Value scale = k.f32(kernel.scale);
    // The subgroups' partial states into shared memory, with E elements of
    // head_dim per lane (E >= head_dim / subgroup size).
    auto partialStates = [&](int64_t E) {
      // This lane's elements d_e = lane + e * S (those below D).
      std::vector<Value> dims, inRange;
      for (int64_t e = 0; e < E; ++e) {
        Value d = k.add(lane, k.mul(k.index(e), S));
        inRange.push_back(k.lt(d, k.index(D)));
        dims.push_back(k.min(d, k.index(D - 1))); // an in-bounds index for masked lanes
      }
      // Member m's row (rows past the dispatch's reread the last; unstored)
      // and the positions it sees.
      std::vector<Value> memberRow, memberVisible;
      for (int64_t m = 0; m < M; ++m) {
        memberRow.push_back(k.min(k.add(t0, k.index(m / G)), lastRow));
        memberVisible.push_back(k.add(k.add(k.startPosition(), memberRow.back()), k.index(1)));
      }
      std::vector<std::vector<Value>> q(static_cast<size_t>(M));
      for (int64_t m = 0; m < M; ++m) {
        Value qBase = k.add(
            k.tensorOffset(0),
            k.mul(k.add(k.mul(memberRow[size_t(m)], k.index(Hq)), headOf(g, m % G)), k.index(D)));
        for (int64_t e = 0; e < E; ++e)
          q[size_t(m)].push_back(k.select(
              inRange[size_t(e)], k.load(k.tensor(0), k.add(qBase, dims[size_t(e)])), k.f32(0.0)));
      }
      // Carried per member: max, sum, E accumulators.
      std::vector<Value> init;
      for (int64_t m = 0; m < M; ++m) {
        init.push_back(k.f32(kernels::lowestScore()));
        init.push_back(k.f32(0.0));
        for (int64_t e = 0; e < E; ++e)
          init.push_back(k.f32(0.0));
      }
      const size_t perHead = size_t(2 + E);
      Value headRows = k.mul(g, capacity); // KV head g's first cached row
      std::vector<Value> state = k.forLoop(
          k.add(from, sg), to, k.numSubgroups(), init,
          [&](Value s, const std::vector<Value> &carried) {
            Value row = k.add(headRows, s);
            Value keyBase = k.add(k.tensorOffset(1), k.mul(row, k.index(D)));
            Value valueBase = k.add(k.tensorOffset(2), k.mul(row, k.index(D)));
            std::vector<Value> keys, values;
            for (int64_t e = 0; e < E; ++e) {
              keys.push_back(k.loadAsF32(k.tensor(1), k.add(keyBase, dims[size_t(e)])));
              values.push_back(k.loadAsF32(k.tensor(2), k.add(valueBase, dims[size_t(e)])));
            }
            std::vector<Value> next;
            for (int64_t m = 0; m < M; ++m) {
              Value partial = k.f32(0.0);
              for (int64_t e = 0; e < E; ++e)
                partial = k.fma(q[size_t(m)][size_t(e)], keys[size_t(e)], partial);
              Value score = k.mul(k.subgroupSum(partial), scale);
              const size_t at = size_t(m) * perHead;
              kernels::SoftmaxStep step =
                  kernels::onlineSoftmaxStep(k.b, k.loc, carried[at], carried[at + 1], score);
              std::vector<Value> updated = {step.max, step.sum};
              for (int64_t e = 0; e < E; ++e)
                updated.push_back(k.fma(step.weight, values[size_t(e)],
                                        k.mul(carried[at + 2 + size_t(e)], step.rescale)));
              // A row of the block before this position keeps its state
              // (every row of a one-row block sees every position it loops over).
              Value sees = R > 1 ? k.lt(s, memberVisible[size_t(m)]) : Value();
              for (size_t v = 0; v < updated.size(); ++v)
                next.push_back(sees ? k.select(sees, updated[v], carried[at + v]) : updated[v]);
            }
            return next;
          });

      // Each subgroup's partial state into shared memory.
      for (int64_t m = 0; m < M; ++m) {
        const size_t at = size_t(m) * perHead;
        Value slot = k.add(k.mul(sg, k.index(M)), k.index(m));
        k.ifThen(k.eq(lane, k.index(0)), [&] {
          k.store(state[at], sharedMax, slot);
          k.store(state[at + 1], sharedSum, slot);
        });
        for (int64_t e = 0; e < E; ++e)
          k.ifThen(inRange[size_t(e)], [&] {
            k.store(state[at + 2 + size_t(e)], sharedAcc,
                    k.add(k.mul(slot, k.index(D)), dims[size_t(e)]));
          });
      }
    };
    // E sized for the smallest subgroup the kernel serves would leave
    // three quarters of a 32-wide subgroup's slots masked but computed, so
    // wide subgroups take a path of their own (the subgroup size is a
    // specialization constant: the driver sees which path runs).
    const int64_t wide = kernel.wideSubgroupSize;
    const int64_t narrowE = llvm::divideCeil(D, kernel.minSubgroupSize),
                  wideE = llvm::divideCeil(D, wide);
    if (kernel.minSubgroupSize >= wide || wideE == narrowE) {
      partialStates(narrowE);
    } else {
      k.ifThen(k.ge(S, k.index(wide)), [&] { partialStates(wideE); });
      k.ifThen(k.lt(S, k.index(wide)), [&] { partialStates(narrowE); });
    }
    k.barrier();
    // Merge: invocation i takes outputs (m, d) = (i / D, i % D), ...
    Value subgroups = k.numSubgroups();
    k.forLoop(k.localId(), k.index(M * D), k.workgroupSize(), [&](Value i) {
      Value m = k.div(i, k.index(D)), d = k.rem(i, k.index(D));
      Value j = k.rem(m, k.index(G)), t = k.add(t0, k.div(m, k.index(G)));
      std::vector<Value> merged = k.forLoop(
          k.index(0), subgroups, k.index(1),
          {k.f32(kernels::lowestScore()), k.f32(0.0), k.f32(0.0)},
          [&](Value other, const std::vector<Value> &acc) {
            Value slot = k.add(k.mul(other, k.index(M)), m);
            kernels::SoftmaxMerge m = kernels::mergeSoftmax(
                k.b, k.loc, acc[0], acc[1], k.load(sharedMax, slot), k.load(sharedSum, slot));
            Value value = k.load(sharedAcc, k.add(k.mul(slot, k.index(D)), d));
            return std::vector<Value>{m.max, m.sum,
                                      k.fma(value, m.scaleB, k.mul(acc[2], m.scaleA))};
          });
      // The query head of member j (scf needs a dynamic j: a select over G).
      Value head = headOf(g, 0);
      for (int64_t jj = 1; jj < G; ++jj)
        head = k.select(k.eq(j, k.index(jj)), headOf(g, jj), head);
      Value member = k.b.create<arith::ConstantIntOp>(k.loc, 1, 1);
      for (int64_t jj = 0; jj < G; ++jj)
        if (Value valid = memberValid(g, jj))
          member = k.select(k.eq(j, k.index(jj)), valid, member);
      Value store = k.andI(k.lt(t, k.rows()), member);
      k.ifThen(store, [&] {
        if (split) { // the run's record of this head: max, sum, value sums
          Value record =
              k.add(k.tensorOffset(4),
                    k.mul(k.add(k.mul(head, k.index(kernel.decodeSplits)), run), k.index(D + 2)));
          k.store(merged[2], k.tensor(4), k.add(record, k.add(d, k.index(2))));
          k.ifThen(k.eq(d, k.index(0)), [&] {
            k.store(merged[0], k.tensor(4), record);
            k.store(merged[1], k.tensor(4), k.add(record, k.index(1)));
          });
          return;
        }
        Value result = k.b.create<arith::DivFOp>(k.loc, merged[2], merged[1]);
        Value out = k.add(k.tensorOffset(3),
                          k.add(k.mul(k.add(k.mul(t, k.index(Hq)), head), k.index(D)), d));
        k.store(result, k.tensor(3), out);
      });
    });
  });
  return k.finish();
}

int64_t attentionWorkspaceBytes(const AttentionKernel &kernel) {
  if (kernel.decodeSplits <= 1)
    return 0;
  return 4 * kernel.queryHeads * kernel.decodeSplits * (kernel.headDim + 2);
}

OwningOpRef<ModuleOp> buildAttentionMerge(MLIRContext &context, const AttentionKernel &kernel) {
  const int64_t D = kernel.headDim, S = kernel.decodeSplits;
  Type f32 = FloatType::getF32(&context);
  Type cached = cacheElementType(context, kernel.cache);
  GpuKernelBuilder k(
      context, kernel.name,
      {{"query", f32}, {"keys", cached}, {"values", cached}, {"out", f32}, {"workspace", f32}},
      /*defaultWorkgroupSize=*/64, /*extraPushWords=*/1);
  // Workgroup h merges query head h's runs; invocations take elements d.
  Value head = k.workgroupId();
  k.ifThen(k.lt(head, k.index(kernel.queryHeads)), [&] {
    Value visible = k.add(k.startPosition(), k.index(1)); // one row
    kernels::DecodeSplit runs = kernels::decodeSplit(k.b, k.loc, visible, S, kernel.splitPositions);
    Value firstRecord = k.add(k.tensorOffset(4), k.mul(head, k.index(S * (D + 2))));
    k.forLoop(k.localId(), k.index(D), k.workgroupSize(), [&](Value d) {
      std::vector<Value> merged =
          k.forLoop(k.index(0), runs.active, k.index(1),
                    {k.f32(kernels::lowestScore()), k.f32(0.0), k.f32(0.0)},
                    [&](Value r, const std::vector<Value> &acc) {
                      Value record = k.add(firstRecord, k.mul(r, k.index(D + 2)));
                      kernels::SoftmaxMerge m = kernels::mergeSoftmax(
                          k.b, k.loc, acc[0], acc[1], k.load(k.tensor(4), record),
                          k.load(k.tensor(4), k.add(record, k.index(1))));
                      Value value = k.load(k.tensor(4), k.add(record, k.add(d, k.index(2))));
                      return std::vector<Value>{m.max, m.sum,
                                                k.fma(value, m.scaleB, k.mul(acc[2], m.scaleA))};
                    });
      Value result = k.b.create<arith::DivFOp>(k.loc, merged[2], merged[1]);
      k.store(result, k.tensor(3), k.add(k.tensorOffset(3), k.add(k.mul(head, k.index(D)), d)));
    });
  });
  return k.finish();
}

} // namespace q3::vulkan
