//===- BuildGraph.cpp - ModelConfig -> q3 graph IR ------------------------===//
//
// Emits Qwen3ForCausalLM exactly as Hugging Face computes it:
//
//   x = embed_tokens[tokens]
//   for each layer:
//     h = input_layernorm(x)
//     q = rope(q_norm(heads(q_proj h))); k = rope(k_norm(heads(k_proj h))); v = heads(v_proj h)
//     keys, values = cache[layer] += (k, v)
//     x = x + o_proj(merge(attention(q, keys, values)))
//     h = post_attention_layernorm(x)
//     x = x + down_proj(silu(gate_proj h) * up_proj h)
//   logits = lm_head(norm(x))          (lm_head = embed_tokens when tied)
//
// Weights are emitted next to their first use so that a dump reads layer by
// layer; a tied embedding is one q3.param used twice.
//
//===----------------------------------------------------------------------===//
#include "ir/BuildGraph.h"
#include "ir/Q3Ops.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Verifier.h"

#include <cmath>
#include <stdexcept>

using namespace mlir;

namespace q3::ir {

void registerQ3Dialects(DialectRegistry &registry) {
  registry.insert<Q3Dialect, func::FuncDialect, arith::ArithDialect>();
}

namespace {

class GraphBuilder {
public:
  GraphBuilder(MLIRContext &context, const frontend::ModelConfig &config)
      : context(context), config(config), builder(&context),
        weightType(weightElementType(context, config.dtype)) {}

  OwningOpRef<ModuleOp> build() {
    OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&context));
    module->getOperation()->setAttr("q3.config", configAttr());
    builder.setInsertionPointToEnd(module->getBody());
    buildForward();
    return module;
  }

private:
  static Type weightElementType(MLIRContext &context, frontend::WeightDType dtype) {
    switch (dtype) {
    case frontend::WeightDType::BF16:
      return BFloat16Type::get(&context);
    case frontend::WeightDType::F16:
      return Float16Type::get(&context);
    case frontend::WeightDType::F32:
      return Float32Type::get(&context);
    }
    llvm_unreachable("unknown weight dtype");
  }

  /// The model's hyperparameters, kept on the module so a dump is self-describing.
  DictionaryAttr configAttr() {
    auto i64 = [&](int64_t v) { return builder.getI64IntegerAttr(v); };
    NamedAttrList attrs;
    attrs.append("hidden_size", i64(config.hiddenSize));
    attrs.append("intermediate_size", i64(config.intermediateSize));
    attrs.append("num_hidden_layers", i64(config.numHiddenLayers));
    attrs.append("num_attention_heads", i64(config.numAttentionHeads));
    attrs.append("num_key_value_heads", i64(config.numKeyValueHeads));
    attrs.append("head_dim", i64(config.headDim));
    attrs.append("vocab_size", i64(config.vocabSize));
    attrs.append("max_position_embeddings", i64(config.maxPositionEmbeddings));
    attrs.append("rope_theta", builder.getF64FloatAttr(config.ropeTheta));
    attrs.append("rms_norm_eps", builder.getF64FloatAttr(config.rmsNormEps));
    attrs.append("tie_word_embeddings", builder.getBoolAttr(config.tieWordEmbeddings));
    attrs.append("torch_dtype", builder.getStringAttr(frontend::dtypeName(config.dtype)));
    return attrs.getDictionary(&context);
  }

  RankedTensorType activation(ArrayRef<int64_t> featureDims) {
    SmallVector<int64_t> shape{ShapedType::kDynamic};
    shape.append(featureDims.begin(), featureDims.end());
    return RankedTensorType::get(shape, builder.getF32Type());
  }

  Value param(StringRef name, ArrayRef<int64_t> shape) {
    auto type = RankedTensorType::get(shape, weightType);
    return builder.create<ParamOp>(loc, type, builder.getStringAttr(name));
  }

  Value rmsNorm(Value x, Value gamma) {
    return builder.create<RMSNormOp>(loc, x.getType(), x, gamma,
                                     builder.getF64FloatAttr(config.rmsNormEps));
  }

  Value linear(Value x, StringRef weightName, int64_t outFeatures, int64_t inFeatures) {
    Value weight = param(weightName, {outFeatures, inFeatures});
    return linear(x, weight);
  }

  Value linear(Value x, Value weight) {
    int64_t outFeatures = weight.getType().cast<RankedTensorType>().getDimSize(0);
    return builder.create<LinearOp>(loc, activation({outFeatures}), x, weight, Value());
  }

  Value toHeads(Value x, int64_t heads) {
    return builder.create<ReshapeHeadsOp>(loc, activation({heads, config.headDim}), x);
  }

  Value rope(Value x) {
    return builder.create<RopeOp>(loc, x, startPos, builder.getF64FloatAttr(config.ropeTheta));
  }

  Value attentionBlock(int64_t layer, Value x) {
    std::string prefix = "model.layers." + std::to_string(layer) + ".";
    std::string attn = prefix + "self_attn.";
    loc = NameLoc::get(builder.getStringAttr(prefix + "self_attn"));
    const int64_t hidden = config.hiddenSize;
    Value h = rmsNorm(x, param(prefix + "input_layernorm.weight", {hidden}));
    Value q =
        toHeads(linear(h, attn + "q_proj.weight", config.qDim(), hidden), config.numAttentionHeads);
    Value k =
        toHeads(linear(h, attn + "k_proj.weight", config.kvDim(), hidden), config.numKeyValueHeads);
    Value v =
        toHeads(linear(h, attn + "v_proj.weight", config.kvDim(), hidden), config.numKeyValueHeads);
    q = rope(rmsNorm(q, param(attn + "q_norm.weight", {config.headDim})));
    k = rope(rmsNorm(k, param(attn + "k_norm.weight", {config.headDim})));
    Value layerIndex = builder.create<arith::ConstantIndexOp>(loc, layer);
    auto update = builder.create<KVCacheUpdateOp>(loc, k.getType(), k.getType(), cache, layerIndex,
                                                  k, v, startPos);
    double scale = 1.0 / std::sqrt(static_cast<double>(config.headDim));
    Value o = builder.create<AttentionOp>(loc, q.getType(), q, update.getKeys(), update.getValues(),
                                          builder.getF64FloatAttr(scale), DenseI64ArrayAttr());
    o = builder.create<MergeHeadsOp>(loc, activation({config.qDim()}), o);
    o = linear(o, attn + "o_proj.weight", hidden, config.qDim());
    return builder.create<AddOp>(loc, x, o);
  }

  Value mlpBlock(int64_t layer, Value x) {
    std::string prefix = "model.layers." + std::to_string(layer) + ".";
    loc = NameLoc::get(builder.getStringAttr(prefix + "mlp"));
    const int64_t hidden = config.hiddenSize, inter = config.intermediateSize;
    Value h = rmsNorm(x, param(prefix + "post_attention_layernorm.weight", {hidden}));
    Value gate = linear(h, prefix + "mlp.gate_proj.weight", inter, hidden);
    Value up = linear(h, prefix + "mlp.up_proj.weight", inter, hidden);
    Value act = builder.create<MulOp>(loc, builder.create<SiluOp>(loc, gate), up);
    Value down = linear(act, prefix + "mlp.down_proj.weight", hidden, inter);
    return builder.create<AddOp>(loc, x, down);
  }

  void buildForward() {
    auto tokensType = RankedTensorType::get({ShapedType::kDynamic}, builder.getI32Type());
    auto cacheType =
        KVCacheType::get(&context, config.numHiddenLayers, config.numKeyValueHeads, config.headDim);
    auto logitsType = activation({config.vocabSize});
    auto funcType =
        builder.getFunctionType({tokensType, builder.getIndexType(), cacheType}, {logitsType});
    auto func = builder.create<func::FuncOp>(loc, kEntryPoint, funcType);
    Block *entry = func.addEntryBlock();
    builder.setInsertionPointToStart(entry);
    Value tokens = entry->getArgument(0);
    startPos = entry->getArgument(1);
    cache = entry->getArgument(2);

    loc = NameLoc::get(builder.getStringAttr("model.embed_tokens"));
    Value embedTable = param("model.embed_tokens.weight", {config.vocabSize, config.hiddenSize});
    Value x = builder.create<EmbeddingOp>(loc, activation({config.hiddenSize}), embedTable, tokens);
    for (int64_t layer = 0; layer < config.numHiddenLayers; ++layer)
      x = mlpBlock(layer, attentionBlock(layer, x));

    loc = NameLoc::get(builder.getStringAttr("model.norm"));
    x = rmsNorm(x, param("model.norm.weight", {config.hiddenSize}));
    loc = NameLoc::get(builder.getStringAttr("lm_head"));
    Value lmHead = config.tieWordEmbeddings
                       ? embedTable
                       : param("lm_head.weight", {config.vocabSize, config.hiddenSize});
    Value logits = linear(x, lmHead);
    builder.create<func::ReturnOp>(loc, logits);
  }

  MLIRContext &context;
  const frontend::ModelConfig &config;
  OpBuilder builder;
  Type weightType;
  Location loc = UnknownLoc::get(&context);
  Value startPos, cache;
};

} // namespace

OwningOpRef<ModuleOp> buildQwen3Graph(MLIRContext &context, const frontend::ModelConfig &config) {
  DialectRegistry registry;
  registerQ3Dialects(registry);
  context.appendDialectRegistry(registry);
  context.loadAllAvailableDialects();
  OwningOpRef<ModuleOp> module = GraphBuilder(context, config).build();
  if (failed(verify(*module)))
    throw std::logic_error("internal error: the Qwen3 graph built from " + config.source +
                           " does not verify");
  return module;
}

} // namespace q3::ir
