//===- FuseQKNormRope.cpp - q/k-norm, RoPE and the cache write as one op --===//
//
// Before (after merge-sibling-matmuls):
//   %q, %k, %v = q3.split_columns %qkv : tensor<?x4096xf32> -> ...
//   %qh = q3.reshape_heads %q : tensor<?x2048xf32> -> tensor<?x16x128xf32>
//   %kh = q3.reshape_heads %k : ...   %vh = q3.reshape_heads %v : ...
//   %qn = q3.rms_norm %qh, %q_gain {eps = ...}   %qr = q3.rope %qn at %pos {theta = ...}
//   %kn = q3.rms_norm %kh, %k_gain {eps = ...}   %kr = q3.rope %kn at %pos {theta = ...}
//   %keys, %values = q3.kv_cache_update %cache[3], %kr, %vh at %pos
// After:
//   %c3 = arith.constant 3 : index
//   %qr, %keys, %values = q3.qk_norm_rope_cache %qkv, %q_gain, %k_gain, %cache[%c3] at %pos {eps =
//   ..., theta = ...}
//
// One op per head vector: normalize (its own gain: the q/k gains cannot be
// folded into the weights because RoPE mixes features of different gains),
// rotate, and write K and V into the cache. The layer becomes an operand so
// that the kernels of all layers are identical. Every intermediate must have
// no other user; otherwise nothing changes.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/WeightValues.h"

#include "mlir/IR/Builders.h"

namespace q3::passes {
#define GEN_PASS_DEF_FUSEQKNORMROPE
#include "passes/Passes.h.inc"
} // namespace q3::passes

using namespace mlir;
using namespace q3::ir;

namespace q3::passes {
namespace {

/// The ops of one head path: split piece -> reshape_heads -> rms_norm -> rope.
struct HeadPath {
  ReshapeHeadsOp heads;
  RMSNormOp norm;
  RopeOp rope;
};

template <typename OpTy> OpTy soleUserOf(Value value) {
  if (!value.hasOneUse())
    return nullptr;
  return dyn_cast<OpTy>(*value.getUsers().begin());
}

template <typename OpTy> OpTy singleUseProducer(Value value) {
  auto op = value.getDefiningOp<OpTy>();
  return op && value.hasOneUse() ? op : nullptr;
}

/// Walks back from a rotated tensor to the split piece it came from.
std::optional<HeadPath> pathToRope(RopeOp rope) {
  auto norm = singleUseProducer<RMSNormOp>(rope.getInput());
  if (!norm)
    return std::nullopt;
  auto heads = singleUseProducer<ReshapeHeadsOp>(norm.getInput());
  if (!heads || !heads.getInput().hasOneUse())
    return std::nullopt;
  return HeadPath{heads, norm, rope};
}

/// Walks forward from the query piece of the split.
std::optional<HeadPath> pathFromPiece(Value piece) {
  auto heads = soleUserOf<ReshapeHeadsOp>(piece);
  if (!heads)
    return std::nullopt;
  auto norm = soleUserOf<RMSNormOp>(heads.getResult());
  if (!norm || norm.getInput() != heads.getResult())
    return std::nullopt;
  auto rope = soleUserOf<RopeOp>(norm.getResult());
  if (!rope)
    return std::nullopt;
  return HeadPath{heads, norm, rope};
}

void fuse(KVCacheUpdateOp update) {
  auto keyRope = singleUseProducer<RopeOp>(update.getKey());
  if (!keyRope)
    return;
  std::optional<HeadPath> key = pathToRope(keyRope);
  auto valueHeads = singleUseProducer<ReshapeHeadsOp>(update.getValue());
  if (!key || !valueHeads)
    return;
  auto split = key->heads.getInput().getDefiningOp<SplitColumnsOp>();
  if (!split || split.getNumResults() != 3 || key->heads.getInput() != split.getResult(1) ||
      valueHeads.getInput() != split.getResult(2) || !split.getResult(2).hasOneUse())
    return;
  std::optional<HeadPath> query = pathFromPiece(split.getResult(0));
  if (!query)
    return;
  if (query->norm.getEps() != key->norm.getEps() ||
      query->rope.getTheta() != key->rope.getTheta() ||
      query->rope.getStartPos() != update.getStartPos() ||
      key->rope.getStartPos() != update.getStartPos())
    return;

  OpBuilder builder(update);
  Location loc = fusedLocation({split, query->heads, query->norm, query->rope, key->heads,
                                key->norm, key->rope, valueHeads, update});
  auto fused = builder.create<QKNormRopeCacheOp>(
      loc, query->rope.getType(), update.getKeys().getType(), update.getValues().getType(),
      split.getInput(), query->norm.getGamma(), key->norm.getGamma(), update.getCache(), update.getLayer(),
      update.getStartPos(), query->norm.getEpsAttr(), query->rope.getThetaAttr());
  query->rope.replaceAllUsesWith(fused.getQuery());
  update.getKeys().replaceAllUsesWith(fused.getKeys());
  update.getValues().replaceAllUsesWith(fused.getValues());
  for (Operation *dead :
       {update.getOperation(), key->rope.getOperation(), key->norm.getOperation(),
        key->heads.getOperation(), valueHeads.getOperation(), query->rope.getOperation(),
        query->norm.getOperation(), query->heads.getOperation(), split.getOperation()})
    dead->erase();
}

struct FuseQKNormRopePass : impl::FuseQKNormRopeBase<FuseQKNormRopePass> {
  void runOnOperation() override {
    SmallVector<KVCacheUpdateOp> updates;
    getOperation().walk([&](KVCacheUpdateOp update) { updates.push_back(update); });
    for (KVCacheUpdateOp update : updates)
      fuse(update);
  }
};

} // namespace

std::unique_ptr<Pass> createFuseQKNormRopePass() { return std::make_unique<FuseQKNormRopePass>(); }

} // namespace q3::passes
