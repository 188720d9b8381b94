//===- ExpandGQA.cpp - the explicit query-head -> KV-head map -------------===//
//
// Before:
//   %o = q3.attention %q, %keys, %values {scale = ...} : tensor<?x16x128xf32>, tensor<?x8x128xf32>
// After:
//   %o = q3.attention %q, %keys, %values {kv_head_map = array<i64: 0, 0, 1, 1, ..., 7, 7>, scale =
//   ...} : ...
//
// Query head h reads KV head h / (Hq / Hkv): consecutive query heads share a
// KV head (never h % Hkv). Kernels index the shared head in place; K and V
// are never repeated or copied.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

namespace q3::passes {
#define GEN_PASS_DEF_EXPANDGQA
#include "passes/Passes.h.inc"
} // namespace q3::passes

using namespace mlir;
using namespace q3::ir;

namespace q3::passes {
namespace {

struct ExpandGQAPass : impl::ExpandGQABase<ExpandGQAPass> {
  void runOnOperation() override {
    getOperation().walk([](AttentionOp attention) {
      if (attention.getKvHeadMap())
        return;
      const int64_t queryHeads =
          attention.getQuery().getType().cast<RankedTensorType>().getDimSize(1);
      SmallVector<int64_t> map;
      for (int64_t h = 0; h < queryHeads; ++h)
        map.push_back(attention.kvHeadFor(h));
      attention.setKvHeadMapAttr(DenseI64ArrayAttr::get(attention.getContext(), map));
    });
  }
};

} // namespace

std::unique_ptr<Pass> createExpandGQAPass() { return std::make_unique<ExpandGQAPass>(); }

} // namespace q3::passes
