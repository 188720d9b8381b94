#include "runtime/text/LanguageModel.h"

#include "runtime/Model.h"

namespace q3::text {

int64_t RuntimeLanguageModel::vocabSize() const { return model_.vocabSize(); }
int64_t RuntimeLanguageModel::contextLength() const { return model_.contextLength(); }
int64_t RuntimeLanguageModel::position() const { return model_.position(); }
const float *RuntimeLanguageModel::forwardLast(const std::vector<int32_t> &tokens) {
  return model_.forward(tokens, runtime::Model::Logits::Last).data();
}
void RuntimeLanguageModel::reset() { model_.reset(); }

} // namespace q3::text
