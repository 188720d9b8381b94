//===- Interpreter.cpp - the reference interpreter of q3 IR ---------------===//
//
// Every SSA value of a run holds one of: an f32 activation tensor, a weight
// (an f32 array that lives as long as the interpreter), or an index scalar.
// Weight transforms (fold_gain, concat_rows, pack_column_blocks) are
// evaluated on first use and kept, as the weight binder of a compiled model
// would; a packed weight holds its values in the packed order, and products
// read it through that layout. A q3.dispatch runs its kernel's body with the
// kernel arguments bound to the dispatch operands, under the kernel's
// lowering config where that changes the arithmetic (the bf16 inputs of a
// prefill's products and attention). The KV cache holds keys and values
// rounded to its element type.
//
//===----------------------------------------------------------------------===//
#include "backends/reference/Interpreter.h"
#include "backends/reference/Kernels.h"
#include "ir/BuildGraph.h"
#include "ir/Q3Ops.h"
#include "runtime/DType.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <map>
#include <string>

using namespace mlir;
using namespace q3::ir;

namespace q3::reference {
namespace {

int64_t product(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

Tensor makeTensor(std::vector<int64_t> shape) {
  Tensor t;
  t.data.assign(product(shape), 0.0f);
  t.shape = std::move(shape);
  return t;
}

/// The static shape of `v` with its leading (sequence) extent set to `rows`.
std::vector<int64_t> shapeWithRows(Value v, int64_t rows) {
  auto type = v.getType().cast<RankedTensorType>();
  std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
  shape[0] = rows;
  return shape;
}

/// Rounds f32 values to the precision of bf16 or f16 `element`s, which is
/// what a tensor stored in that type holds.
template <typename Range> void roundToElement(Range &&values, Type element) {
  if (element.isBF16())
    for (float &v : values)
      v = runtime::bf16ToFloat(runtime::floatToBf16(v));
  else if (element.isF16())
    for (float &v : values)
      v = runtime::f16ToFloat(runtime::floatToF16(v));
}

/// Keys or values as a cache of `element`s holds them: as roundToElement,
/// but an f16 cache clamps to its largest finite value (runtime::kF16Max)
/// first, as the kernels that write it do.
template <typename Range> void roundToCacheElement(Range &&values, Type element) {
  if (!element.isF16())
    return roundToElement(values, element);
  for (float &v : values)
    v = runtime::f16ToFloat(runtime::floatToF16Saturating(v));
}

void roundToElementType(std::vector<float> &values, Type type) {
  roundToElement(values, type.cast<RankedTensorType>().getElementType());
}

/// Whether a product's prefill rounds its activations to bf16 under `lowering`.
bool roundsPrefillActivations(LoweringConfigAttr lowering) {
  return lowering && (lowering.getMatmul() == "avx512bf16" || lowering.getMatmul() == "amx");
}

} // namespace

/// One layer's cache: [capacity, kvHeads, headDim] keys and values.
struct LayerCache {
  std::vector<float> keys, values;
};

struct Interpreter::State {
  ModuleOp module;
  func::FuncOp entry;
  WeightLookup lookupWeight;
  int64_t contextLength = 0;
  int64_t kvRowSize = 0; // kvHeads * headDim
  Type cacheElement;      // f32, bf16 or f16
  std::vector<LayerCache> cache;
  LoweringConfigAttr lowering; // of the kernel being run, if any
  int64_t position = 0;
  std::map<Operation *, std::vector<float>> transformedWeights; // kept across runs
  std::map<std::vector<const std::vector<float> *>, std::vector<float>> concatenations;

  // Per run.
  llvm::DenseMap<Value, Tensor> activations;
  llvm::DenseMap<Value, const std::vector<float> *> weights;
  llvm::DenseMap<Value, int64_t> scalars;

  const Tensor &act(Value v) {
    auto it = activations.find(v);
    if (it == activations.end())
      throw InterpreterError("reference interpreter: value used before it was computed");
    return it->second;
  }
  /// Weight operands may also be f32 activations (IR written by hand).
  const float *weight(Value v) {
    auto it = weights.find(v);
    return it != weights.end() ? it->second->data() : act(v).data.data();
  }
  const std::vector<float> &weightVector(Value v) {
    auto it = weights.find(v);
    if (it == weights.end())
      throw InterpreterError("reference interpreter: weight transform of a non-weight value");
    return *it->second;
  }
  int64_t scalar(Value v) {
    auto it = scalars.find(v);
    if (it == scalars.end())
      throw InterpreterError("reference interpreter: index value used before it was computed");
    return it->second;
  }
  void define(Value v, Tensor t) { activations[v] = std::move(t); }
  /// Makes `to` hold whatever `from` holds (kernel arguments, returns).
  void alias(Value from, Value to) {
    copyEntry(weights, from, to) || copyEntry(scalars, from, to) ||
        copyEntry(activations, from, to);
    // The cache argument holds nothing: the cache is the interpreter's own.
  }
  /// map[to] = map[from] if `from` is there. The value is copied out first:
  /// inserting `to` may grow the DenseMap and move the entry of `from`
  /// (reading it through the old iterator was a use-after-free).
  template <typename Map> static bool copyEntry(Map &map, Value from, Value to) {
    auto it = map.find(from);
    if (it == map.end())
      return false;
    auto value = it->second;
    map[to] = std::move(value);
    return true;
  }

  /// Runs the ops of `block` (not its terminator) and returns the terminator.
  Operation *runBlock(Block &block);
  void execute(Operation *op);
  void runOp(ParamOp op);
  void runOp(FoldGainOp op);
  void runOp(ConcatRowsOp op);
  void runOp(PackColumnBlocksOp op);
  void runOp(EmbeddingOp op);
  void runOp(RMSNormOp op);
  void runOp(LinearOp op);
  void runOp(FusedLinearOp op);
  void runOp(RopeOp op);
  void runOp(KVCacheUpdateOp op);
  void runOp(QKNormRopeCacheOp op);
  void runOp(AttentionOp op);
  void runOp(SplitColumnsOp op);
  void runOp(DispatchOp op);
  void runOp(arith::ConstantOp op);

  /// Writes T rows of keys and values at `startPos` and returns rows [0, startPos + T).
  std::pair<Tensor, Tensor> appendToCache(int64_t layer, const Tensor &k, const Tensor &v,
                                          int64_t startPos);
};

Operation *Interpreter::State::runBlock(Block &block) {
  for (Operation &op : block.without_terminator())
    execute(&op);
  return block.getTerminator();
}

void Interpreter::State::runOp(ParamOp op) {
  weights[op.getResult()] = &lookupWeight(op.getName().str());
}

void Interpreter::State::runOp(FoldGainOp op) {
  auto [it, inserted] = transformedWeights.try_emplace(op.getOperation());
  if (inserted) {
    const std::vector<float> &w = weightVector(op.getWeight());
    const std::vector<float> &gamma = weightVector(op.getGamma());
    const size_t columns = gamma.size();
    it->second.resize(w.size());
    for (size_t i = 0; i < w.size(); ++i)
      it->second[i] = w[i] * gamma[i % columns];
    roundToElementType(it->second, op.getResult().getType());
  }
  weights[op.getResult()] = &it->second;
}

void Interpreter::State::runOp(ConcatRowsOp op) {
  // Keyed by the parts, not the op: a concatenation inside a kernel (see
  // cpu-sink-weight-concat) joins another layer's parts at each dispatch.
  std::vector<const std::vector<float> *> parts;
  for (Value input : op.getInputs())
    parts.push_back(&weightVector(input));
  auto [it, inserted] = concatenations.try_emplace(parts);
  if (inserted)
    for (const std::vector<float> *part : parts)
      it->second.insert(it->second.end(), part->begin(), part->end());
  weights[op.getResult()] = &it->second;
}

void Interpreter::State::runOp(PackColumnBlocksOp op) {
  auto [it, inserted] = transformedWeights.try_emplace(op.getOperation());
  if (inserted) {
    const std::vector<float> &w = weightVector(op.getWeight());
    auto type = op.getWeight().getType().cast<RankedTensorType>();
    const int64_t rows = type.getDimSize(0), columns = type.getDimSize(1);
    it->second.resize(w.size());
    for (int64_t n = 0; n < rows; ++n)
      for (int64_t k = 0; k < columns; ++k)
        it->second[columnBlockIndex(n, k, columns)] = w[n * columns + k];
  }
  weights[op.getResult()] = &it->second;
}

void Interpreter::State::runOp(EmbeddingOp op) {
  const Tensor &tokens = act(op.getTokens());
  auto tableType = op.getTable().getType().cast<RankedTensorType>();
  const int64_t vocab = tableType.getDimSize(0), hidden = tableType.getDimSize(1);
  const float *table = weight(op.getTable());
  Tensor out = makeTensor({tokens.rows(), hidden});
  for (int64_t t = 0; t < tokens.rows(); ++t) {
    auto id = static_cast<int64_t>(tokens.data[t]);
    if (id < 0 || id >= vocab)
      throw InterpreterError("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                             std::to_string(vocab) + ")");
    std::copy_n(table + id * hidden, hidden, out.data.begin() + t * hidden);
  }
  define(op.getResult(), std::move(out));
}

void Interpreter::State::runOp(RMSNormOp op) {
  const Tensor &x = act(op.getInput());
  const int64_t features = x.shape.back();
  Tensor out = makeTensor(x.shape);
  rmsNorm(x.data.data(), weight(op.getGamma()), out.data.data(), product(x.shape) / features,
          features, op.getEps().convertToDouble());
  define(op.getResult(), std::move(out));
}

void Interpreter::State::runOp(LinearOp op) {
  const Tensor &x = act(op.getInput());
  auto weightType = op.getWeight().getType().cast<RankedTensorType>();
  const int64_t out = weightType.getDimSize(0), in = weightType.getDimSize(1);
  Tensor y = makeTensor({x.rows(), out});
  const float *bias = op.getBias() ? weight(op.getBias()) : nullptr;
  linear(x.data.data(), weight(op.getWeight()), bias, y.data.data(), x.rows(), in, out);
  define(op.getResult(), std::move(y));
}

void Interpreter::State::runOp(FusedLinearOp op) {
  const Tensor &x = act(op.getInput());
  const int64_t in = x.shape[1];
  Tensor y = makeTensor(shapeWithRows(op.getResult(), x.rows()));
  const float *residual = op.getResidual() ? act(op.getResidual()).data.data() : nullptr;
  std::optional<double> eps;
  if (auto attr = op.getRmsNormEps())
    eps = attr->convertToDouble();
  ProductExtras extras;
  extras.gain = op.getGain() ? weight(op.getGain()) : nullptr;
  extras.columnBlocks = hasColumnBlocks(op.getWeight().getType());
  extras.bf16Activations = x.rows() > 1 && roundsPrefillActivations(lowering);
  fusedLinear(x.data.data(), weight(op.getWeight()), residual, y.data.data(), x.rows(), in,
              y.shape[1], eps ? &*eps : nullptr, op.getSwiglu(), extras);
  define(op.getResult(), std::move(y));
}

void Interpreter::State::runOp(RopeOp op) {
  Tensor x = act(op.getInput());
  ropeRotateHalf(x.data.data(), x.shape[0], x.shape[1], x.shape[2], scalar(op.getStartPos()),
                 op.getTheta().convertToDouble());
  define(op.getResult(), std::move(x));
}

std::pair<Tensor, Tensor> Interpreter::State::appendToCache(int64_t layerIndex, const Tensor &k,
                                                            const Tensor &v, int64_t startPos) {
  if (layerIndex < 0 || layerIndex >= int64_t(cache.size()))
    throw InterpreterError("cache layer " + std::to_string(layerIndex) + " does not exist");
  LayerCache &layer = cache[layerIndex];
  const int64_t end = startPos + k.rows();
  auto keysAt = layer.keys.begin() + startPos * kvRowSize;
  auto valuesAt = layer.values.begin() + startPos * kvRowSize;
  std::copy(k.data.begin(), k.data.end(), keysAt);
  std::copy(v.data.begin(), v.data.end(), valuesAt);
  roundToCacheElement(llvm::make_range(keysAt, keysAt + int64_t(k.data.size())), cacheElement);
  roundToCacheElement(llvm::make_range(valuesAt, valuesAt + int64_t(v.data.size())), cacheElement);
  std::vector<int64_t> shape = k.shape;
  shape[0] = end;
  return {
      Tensor{shape, std::vector<float>(layer.keys.begin(), layer.keys.begin() + end * kvRowSize)},
      Tensor{shape,
             std::vector<float>(layer.values.begin(), layer.values.begin() + end * kvRowSize)}};
}

void Interpreter::State::runOp(KVCacheUpdateOp op) {
  auto [keys, values] = appendToCache(scalar(op.getLayer()), act(op.getKey()), act(op.getValue()),
                                      scalar(op.getStartPos()));
  define(op.getKeys(), std::move(keys));
  define(op.getValues(), std::move(values));
}

void Interpreter::State::runOp(QKNormRopeCacheOp op) {
  const Tensor &qkv = act(op.getQkv());
  auto queryType = op.getQuery().getType().cast<RankedTensorType>();
  auto cacheType = op.getCache().getType().cast<KVCacheType>();
  const int64_t rows = qkv.rows(), queryHeads = queryType.getDimSize(1);
  const int64_t kvHeads = cacheType.getKvHeads(), headDim = cacheType.getHeadDim();
  const int64_t qWidth = queryHeads * headDim, kvWidth = kvHeads * headDim;
  Tensor q = makeTensor({rows, queryHeads, headDim});
  Tensor k = makeTensor({rows, kvHeads, headDim});
  Tensor v = makeTensor({rows, kvHeads, headDim});
  for (int64_t t = 0; t < rows; ++t) {
    const float *row = qkv.data.data() + t * (qWidth + 2 * kvWidth);
    std::copy_n(row, qWidth, q.data.begin() + t * qWidth);
    std::copy_n(row + qWidth, kvWidth, k.data.begin() + t * kvWidth);
    std::copy_n(row + qWidth + kvWidth, kvWidth, v.data.begin() + t * kvWidth);
  }
  const double eps = op.getEps().convertToDouble(), theta = op.getTheta().convertToDouble();
  const int64_t startPos = scalar(op.getStartPos());
  rmsNorm(q.data.data(), weight(op.getQGain()), q.data.data(), rows * queryHeads, headDim, eps);
  rmsNorm(k.data.data(), weight(op.getKGain()), k.data.data(), rows * kvHeads, headDim, eps);
  ropeRotateHalf(q.data.data(), rows, queryHeads, headDim, startPos, theta);
  ropeRotateHalf(k.data.data(), rows, kvHeads, headDim, startPos, theta);
  auto [keys, values] = appendToCache(scalar(op.getLayer()), k, v, startPos);
  define(op.getQuery(), std::move(q));
  define(op.getKeys(), std::move(keys));
  define(op.getValues(), std::move(values));
}

void Interpreter::State::runOp(AttentionOp op) {
  const Tensor &q = act(op.getQuery()), &keys = act(op.getKeys()), &values = act(op.getValues());
  const int64_t queryHeads = q.shape[1], kvHeads = keys.shape[1], headDim = q.shape[2];
  if (keys.rows() < q.rows())
    throw InterpreterError("q3.attention: fewer key rows than query rows");
  std::vector<int64_t> kvHeadOf(queryHeads);
  for (int64_t h = 0; h < queryHeads; ++h)
    kvHeadOf[h] = op.kvHeadFor(h);
  Tensor out = makeTensor(q.shape);
  // A prefill's attention under matmul = avx512bf16 multiplies bf16 inputs;
  // decode's is f32 whatever the lowering.
  const bool bf16Products = q.rows() > 1 && lowering && lowering.getMatmul() == "avx512bf16";
  causalAttention(q.data.data(), keys.data.data(), values.data.data(), out.data.data(), q.rows(),
                  keys.rows(), queryHeads, kvHeads, headDim, op.getScale().convertToDouble(),
                  kvHeadOf, bf16Products);
  define(op.getResult(), std::move(out));
}

void Interpreter::State::runOp(SplitColumnsOp op) {
  const Tensor &x = act(op.getInput());
  const int64_t width = x.shape[1];
  int64_t offset = 0;
  for (Value result : op.getResults()) {
    const int64_t columns = result.getType().cast<RankedTensorType>().getDimSize(1);
    Tensor piece = makeTensor({x.rows(), columns});
    for (int64_t t = 0; t < x.rows(); ++t)
      std::copy_n(x.data.begin() + t * width + offset, columns, piece.data.begin() + t * columns);
    define(result, std::move(piece));
    offset += columns;
  }
}

void Interpreter::State::runOp(DispatchOp op) {
  auto kernel = module.lookupSymbol<func::FuncOp>(op.getKernel());
  if (!kernel)
    throw InterpreterError("q3.dispatch: no kernel @" + op.getKernel().str());
  Block &body = kernel.getBody().front();
  for (auto [operand, argument] : llvm::zip(op.getOperands(), body.getArguments()))
    alias(operand, argument);
  lowering = kernel->getAttrOfType<LoweringConfigAttr>(kLoweringAttrName);
  Operation *ret = runBlock(body);
  lowering = {};
  for (auto [returned, result] : llvm::zip(ret->getOperands(), op.getResults()))
    alias(returned, result);
}

void Interpreter::State::runOp(arith::ConstantOp op) {
  auto value = op.getValue().dyn_cast<IntegerAttr>();
  if (!value || !op.getType().isIndex())
    throw InterpreterError("reference interpreter: only index constants are supported");
  scalars[op.getResult()] = value.getInt();
}

void Interpreter::State::execute(Operation *op) {
  auto reshape = [&](Value in, Value out) {
    Tensor t = act(in);
    t.shape = shapeWithRows(out, t.rows());
    define(out, std::move(t));
  };
  auto elementwise = [&](Value lhs, Value rhs, Value out, auto combine) {
    Tensor t = act(lhs);
    const Tensor &r = act(rhs);
    for (size_t i = 0; i < t.data.size(); ++i)
      t.data[i] = combine(t.data[i], r.data[i]);
    define(out, std::move(t));
  };
  llvm::TypeSwitch<Operation *>(op)
      .Case<ParamOp, FoldGainOp, ConcatRowsOp, PackColumnBlocksOp, EmbeddingOp, RMSNormOp, LinearOp, FusedLinearOp,
            RopeOp, KVCacheUpdateOp, QKNormRopeCacheOp, AttentionOp, SplitColumnsOp, DispatchOp,
            arith::ConstantOp>([&](auto concrete) { runOp(concrete); })
      .Case<ReshapeHeadsOp, MergeHeadsOp>(
          [&](auto concrete) { reshape(concrete.getInput(), concrete.getResult()); })
      .Case<AddOp>([&](AddOp add) {
        elementwise(add.getLhs(), add.getRhs(), add.getResult(),
                    [](float a, float b) { return a + b; });
      })
      .Case<MulOp>([&](MulOp mul) {
        elementwise(mul.getLhs(), mul.getRhs(), mul.getResult(),
                    [](float a, float b) { return a * b; });
      })
      .Case<SiluOp>([&](SiluOp s) {
        Tensor t = act(s.getInput());
        for (float &x : t.data)
          x = silu(x);
        define(s.getResult(), std::move(t));
      })
      .Default([](Operation *unknown) {
        throw InterpreterError("reference interpreter: unsupported operation '" +
                               unknown->getName().getStringRef().str() + "'");
      });
}

Interpreter::Interpreter(ModuleOp module, WeightLookup weights, int64_t contextLength)
    : state(std::make_unique<State>()) {
  state->module = module;
  state->entry = module.lookupSymbol<func::FuncOp>(ir::kEntryPoint);
  if (!state->entry)
    throw InterpreterError("module has no func.func @" + ir::kEntryPoint.str());
  auto argTypes = state->entry.getFunctionType().getInputs();
  if (argTypes.size() != 3 || !argTypes[2].isa<ir::KVCacheType>())
    throw InterpreterError("@forward must take (tokens, start_pos, cache)");
  auto cacheType = argTypes[2].cast<ir::KVCacheType>();
  state->lookupWeight = std::move(weights);
  state->contextLength = contextLength;
  state->kvRowSize = cacheType.getKvHeads() * cacheType.getHeadDim();
  state->cacheElement = cacheType.getElement();
  state->cache.resize(cacheType.getLayers());
  for (LayerCache &layer : state->cache) {
    layer.keys.assign(contextLength * state->kvRowSize, 0.0f);
    layer.values.assign(contextLength * state->kvRowSize, 0.0f);
  }
}

Interpreter::~Interpreter() = default;

int64_t Interpreter::position() const { return state->position; }

void Interpreter::reset() { state->position = 0; }

Tensor Interpreter::run(const std::vector<int32_t> &tokens) {
  State &s = *state;
  if (tokens.empty())
    throw InterpreterError("no tokens to run");
  if (s.position + int64_t(tokens.size()) > s.contextLength)
    throw InterpreterError("positions " + std::to_string(s.position) + ".." +
                           std::to_string(s.position + tokens.size() - 1) +
                           " exceed the context length " + std::to_string(s.contextLength));
  s.activations.clear();
  s.weights.clear();
  s.scalars.clear();
  Block &body = s.entry.getBody().front();
  s.define(body.getArgument(0),
           Tensor{{int64_t(tokens.size())}, std::vector<float>(tokens.begin(), tokens.end())});
  s.scalars[body.getArgument(1)] = s.position;
  Operation *ret = s.runBlock(body);
  Tensor logits = s.act(ret->getOperand(0));
  s.activations.clear();
  s.position += int64_t(tokens.size());
  return logits;
}

int32_t argmaxRow(const Tensor &logits, int64_t row) {
  const int64_t vocab = logits.shape.back();
  const float *begin = logits.data.data() + row * vocab;
  return int32_t(std::max_element(begin, begin + vocab) - begin);
}

std::vector<int32_t> generateGreedy(Interpreter &interpreter, const std::vector<int32_t> &prompt,
                                    int64_t count) {
  std::vector<int32_t> generated;
  if (count <= 0)
    return generated;
  Tensor logits = interpreter.run(prompt);
  generated.push_back(argmaxRow(logits, logits.rows() - 1));
  while (int64_t(generated.size()) < count) {
    logits = interpreter.run({generated.back()});
    generated.push_back(argmaxRow(logits, 0));
  }
  return generated;
}

} // namespace q3::reference
