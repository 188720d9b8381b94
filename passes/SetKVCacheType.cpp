//===- SetKVCacheType.cpp - the element type the KV cache stores ----------===//
//
// The cache is only ever a block argument: of @forward, and of the kernels
// that form-dispatches outlined around the cache ops. Retyping those
// arguments (and the functions' types) retypes every use.
//
// Before:
//   func.func @forward(%tokens: tensor<?xi32>, %pos: index,
//                      %cache: !q3.kv_cache<layers = 28, kv_heads = 8, head_dim = 128>)
// After (element=bf16):
//   func.func @forward(%tokens: tensor<?xi32>, %pos: index,
//                      %cache: !q3.kv_cache<layers = 28, kv_heads = 8, head_dim = 128,
//                                           element = bf16>)
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

namespace q3::passes {
#define GEN_PASS_DEF_SETKVCACHETYPE
#include "passes/Passes.h.inc"
} // namespace q3::passes

using namespace mlir;
using namespace q3::ir;

namespace q3::passes {
namespace {

std::optional<Type> parseElement(MLIRContext *context, StringRef name) {
  Builder builder(context);
  if (name == "f32")
    return builder.getF32Type();
  if (name == "bf16")
    return builder.getBF16Type();
  if (name == "f16")
    return builder.getF16Type();
  return std::nullopt;
}

void retypeCacheArguments(func::FuncOp function, Type element) {
  if (function.isExternal())
    return;
  for (BlockArgument argument : function.getArguments())
    if (auto cache = argument.getType().dyn_cast<KVCacheType>())
      argument.setType(KVCacheType::get(cache.getContext(), cache.getLayers(),
                                        cache.getKvHeads(), cache.getHeadDim(), element));
  function.setType(FunctionType::get(function.getContext(),
                                     function.getBody().front().getArgumentTypes(),
                                     function.getFunctionType().getResults()));
}

struct SetKVCacheTypePass : impl::SetKVCacheTypeBase<SetKVCacheTypePass> {
  using SetKVCacheTypeBase::SetKVCacheTypeBase;
  void runOnOperation() override {
    std::optional<Type> type = parseElement(&getContext(), element);
    if (!type) {
      getOperation().emitError() << "set-kv-cache-type: element must be f32, bf16 or f16, got '"
                                 << element << "'";
      return signalPassFailure();
    }
    getOperation().walk([&](func::FuncOp function) { retypeCacheArguments(function, *type); });
  }
};

} // namespace

std::unique_ptr<Pass> createSetKVCacheTypePass() {
  return std::make_unique<SetKVCacheTypePass>();
}

std::unique_ptr<Pass> createSetKVCacheTypePass(const std::string &element) {
  SetKVCacheTypeOptions options;
  options.element = element;
  return std::make_unique<SetKVCacheTypePass>(options);
}

} // namespace q3::passes
