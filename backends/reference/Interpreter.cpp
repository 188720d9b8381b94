//===- Interpreter.cpp - the reference interpreter of q3 IR ---------------===//
#include "backends/reference/Interpreter.h"
#include "backends/reference/Kernels.h"
#include "ir/BuildGraph.h"
#include "ir/Q3Ops.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <string>

using namespace mlir;
using namespace q3::ir;

namespace q3::reference {
namespace {

std::vector<int64_t> staticFeatureShape(Value v, int64_t rows) {
  auto type = v.getType().cast<RankedTensorType>();
  std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
  shape[0] = rows;
  return shape;
}

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

} // namespace

/// One layer's cache: [capacity, kvHeads, headDim] keys and values.
struct LayerCache {
  std::vector<float> keys, values;
};

struct Interpreter::State {
  func::FuncOp entry;
  WeightLookup weights;
  int64_t contextLength;
  int64_t kvRowSize = 0;  // kvHeads * headDim
  std::vector<LayerCache> cache;
  int64_t position = 0;

  // Per run: activations by SSA value, weights by SSA value, the scalar start_pos.
  llvm::DenseMap<Value, Tensor> activations;
  llvm::DenseMap<Value, const std::vector<float> *> params;
  int64_t startPos = 0;

  const Tensor &act(Value v) {
    auto it = activations.find(v);
    if (it == activations.end())
      throw InterpreterError("reference interpreter: value used before it was computed");
    return it->second;
  }
  const float *weight(Value v) {
    auto it = params.find(v);
    if (it == params.end())
      throw InterpreterError("reference interpreter: weight operand is not a q3.param");
    return it->second->data();
  }
  /// Weight operands may also be f32 activations (IR written by hand).
  const float *weightOrActivation(Value v) {
    auto it = params.find(v);
    return it != params.end() ? it->second->data() : act(v).data.data();
  }
  void define(Value v, Tensor t) { activations[v] = std::move(t); }

  void execute(Operation *op);
  void runOp(ParamOp op);
  void runOp(EmbeddingOp op);
  void runOp(RMSNormOp op);
  void runOp(LinearOp op);
  void runOp(RopeOp op);
  void runOp(KVCacheUpdateOp op);
  void runOp(AttentionOp op);
};

void Interpreter::State::runOp(ParamOp op) { params[op.getResult()] = &weights(op.getName().str()); }

void Interpreter::State::runOp(EmbeddingOp op) {
  const Tensor &tokens = act(op.getTokens());
  auto tableType = op.getTable().getType().cast<RankedTensorType>();
  const int64_t vocab = tableType.getDimSize(0), hidden = tableType.getDimSize(1);
  const float *table = weight(op.getTable());
  Tensor out = makeTensor({tokens.rows(), hidden});
  for (int64_t t = 0; t < tokens.rows(); ++t) {
    auto id = static_cast<int64_t>(tokens.data[t]);
    if (id < 0 || id >= vocab)
      throw InterpreterError("token id " + std::to_string(id) +
                             " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    std::copy_n(table + id * hidden, hidden, out.data.begin() + t * hidden);
  }
  define(op.getResult(), std::move(out));
}

void Interpreter::State::runOp(RMSNormOp op) {
  const Tensor &x = act(op.getInput());
  const int64_t features = x.shape.back();
  Tensor out = makeTensor(x.shape);
  rmsNorm(x.data.data(), weightOrActivation(op.getGamma()), out.data.data(),
          product(x.shape) / features, features, op.getEps().convertToDouble());
  define(op.getResult(), std::move(out));
}

void Interpreter::State::runOp(LinearOp op) {
  const Tensor &x = act(op.getInput());
  auto weightType = op.getWeight().getType().cast<RankedTensorType>();
  const int64_t out = weightType.getDimSize(0), in = weightType.getDimSize(1);
  Tensor y = makeTensor({x.rows(), out});
  const float *bias = op.getBias() ? weightOrActivation(op.getBias()) : nullptr;
  linear(x.data.data(), weightOrActivation(op.getWeight()), bias, y.data.data(), x.rows(), in,
         out);
  define(op.getResult(), std::move(y));
}

void Interpreter::State::runOp(RopeOp op) {
  Tensor x = act(op.getInput());
  ropeRotateHalf(x.data.data(), x.shape[0], x.shape[1], x.shape[2], startPos,
                 op.getTheta().convertToDouble());
  define(op.getResult(), std::move(x));
}

void Interpreter::State::runOp(KVCacheUpdateOp op) {
  const Tensor &k = act(op.getKey()), &v = act(op.getValue());
  LayerCache &layer = cache.at(op.getLayer());
  const int64_t rows = k.rows(), end = startPos + rows;
  std::copy(k.data.begin(), k.data.end(), layer.keys.begin() + startPos * kvRowSize);
  std::copy(v.data.begin(), v.data.end(), layer.values.begin() + startPos * kvRowSize);
  std::vector<int64_t> shape = k.shape;
  shape[0] = end;
  Tensor keys{shape, std::vector<float>(layer.keys.begin(), layer.keys.begin() + end * kvRowSize)};
  Tensor values{shape,
                std::vector<float>(layer.values.begin(), layer.values.begin() + end * kvRowSize)};
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
  causalAttention(q.data.data(), keys.data.data(), values.data.data(), out.data.data(), q.rows(),
                  keys.rows(), queryHeads, kvHeads, headDim, op.getScale().convertToDouble(),
                  kvHeadOf);
  define(op.getResult(), std::move(out));
}

void Interpreter::State::execute(Operation *op) {
  auto reshape = [&](Value in, Value out) {
    Tensor t = act(in);
    t.shape = staticFeatureShape(out, t.rows());
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
      .Case<ParamOp, EmbeddingOp, RMSNormOp, LinearOp, RopeOp, KVCacheUpdateOp, AttentionOp>(
          [&](auto concrete) { runOp(concrete); })
      .Case<ReshapeHeadsOp, MergeHeadsOp>(
          [&](auto concrete) { reshape(concrete.getInput(), concrete.getResult()); })
      .Case<AddOp>([&](AddOp add) {
        elementwise(add.getLhs(), add.getRhs(), add.getResult(), [](float a, float b) { return a + b; });
      })
      .Case<MulOp>([&](MulOp mul) {
        elementwise(mul.getLhs(), mul.getRhs(), mul.getResult(), [](float a, float b) { return a * b; });
      })
      .Case<SiluOp>([&](SiluOp s) {
        Tensor t = act(s.getInput());
        for (float &x : t.data)
          x = silu(x);
        define(s.getResult(), std::move(t));
      })
      .Case<func::ReturnOp>([](func::ReturnOp) {})
      .Default([](Operation *unknown) {
        throw InterpreterError("reference interpreter: unsupported operation '" +
                               unknown->getName().getStringRef().str() + "'");
      });
}

Interpreter::Interpreter(ModuleOp module, WeightLookup weights, int64_t contextLength)
    : state(std::make_unique<State>()) {
  state->entry = module.lookupSymbol<func::FuncOp>(ir::kEntryPoint);
  if (!state->entry)
    throw InterpreterError("module has no func.func @" + ir::kEntryPoint.str());
  auto argTypes = state->entry.getFunctionType().getInputs();
  if (argTypes.size() != 3 || !argTypes[2].isa<ir::KVCacheType>())
    throw InterpreterError("@forward must take (tokens, start_pos, cache)");
  auto cacheType = argTypes[2].cast<ir::KVCacheType>();
  state->weights = std::move(weights);
  state->contextLength = contextLength;
  state->kvRowSize = cacheType.getKvHeads() * cacheType.getHeadDim();
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
  s.params.clear();
  s.startPos = s.position;
  Block &body = s.entry.getBody().front();
  s.define(body.getArgument(0),
           Tensor{{int64_t(tokens.size())}, std::vector<float>(tokens.begin(), tokens.end())});
  for (Operation &op : body)
    s.execute(&op);
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  Tensor logits = s.act(ret.getOperand(0));
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
