//===- Interpreter.h - the reference interpreter of q3 IR -----------------===//
//
// Executes the entry function of a q3 module with plain float32 C++: the
// ground truth for every pass and backend. It keeps its own KV cache, so a
// prompt can be run in one call (prefill) and continued one token at a time
// (decode).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace q3::reference {

class InterpreterError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// A dense row-major f32 tensor.
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
  int64_t rows() const { return shape.empty() ? 1 : shape.front(); }
};

/// Returns the f32 contents of the named weight (already shape-checked). The
/// reference stays valid for the interpreter's lifetime.
using WeightLookup = std::function<const std::vector<float> &(const std::string &name)>;

class Interpreter {
public:
  /// `contextLength` is the KV cache capacity: positions [0, contextLength).
  Interpreter(mlir::ModuleOp module, WeightLookup weights, int64_t contextLength);
  ~Interpreter();

  /// Runs `tokens` at positions [position(), position() + T), extends the
  /// cache, and returns the logits [T, vocab].
  Tensor run(const std::vector<int32_t> &tokens);

  /// Number of positions already in the cache.
  int64_t position() const;
  /// Forgets the cache.
  void reset();

private:
  struct State;
  std::unique_ptr<State> state;
};

/// Greedy generation: prefill `prompt`, then `count` decode steps, each taking
/// the argmax of the previous logits. Returns the generated ids.
std::vector<int32_t> generateGreedy(Interpreter &interpreter, const std::vector<int32_t> &prompt,
                                    int64_t count);

/// Index of the largest value of row `row` of a [T, V] tensor (first on ties).
int32_t argmaxRow(const Tensor &logits, int64_t row);

} // namespace q3::reference
