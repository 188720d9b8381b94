// What generation needs from a model: run tokens on the KV cache and give
// the last position's logits. RuntimeLanguageModel adapts runtime::Model (a
// compiled artifact); tests substitute small fakes.
#pragma once

#include <cstdint>
#include <vector>

namespace q3::runtime {
class Model;
}

namespace q3::text {

class LanguageModel {
public:
  virtual ~LanguageModel() = default;
  virtual int64_t vocabSize() const = 0;
  virtual int64_t contextLength() const = 0;
  /// Positions already in the KV cache.
  virtual int64_t position() const = 0;
  /// Runs `tokens` at positions [position(), position() + size) and returns
  /// the logits of the last one (vocabSize() floats, valid until the next call).
  virtual const float *forwardLast(const std::vector<int32_t> &tokens) = 0;
  /// Forgets the cache.
  virtual void reset() = 0;
};

class RuntimeLanguageModel : public LanguageModel {
public:
  explicit RuntimeLanguageModel(runtime::Model &model) : model_(model) {}
  int64_t vocabSize() const override;
  int64_t contextLength() const override;
  int64_t position() const override;
  const float *forwardLast(const std::vector<int32_t> &tokens) override;
  void reset() override;

private:
  runtime::Model &model_;
};

} // namespace q3::text
