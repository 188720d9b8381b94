#include "runtime/WeightBinder.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace q3::runtime {

namespace {

constexpr size_t kMaxSuggestions = 3;
constexpr size_t kMaxUnusedWarnings = 5;
constexpr const char *kTiedHeadName = "lm_head.weight";

size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// Closest checkpoint names, for "did you mean" hints; only close-enough ones.
std::vector<std::string> similarNames(const Checkpoint &checkpoint, const std::string &wanted) {
  size_t threshold = std::max<size_t>(2, wanted.size() / 3);
  std::vector<std::pair<size_t, std::string>> candidates;
  for (const std::string &name : checkpoint.tensorNames()) {
    size_t distance = editDistance(wanted, name);
    if (distance <= threshold)
      candidates.emplace_back(distance, name);
  }
  std::sort(candidates.begin(), candidates.end());
  std::vector<std::string> names;
  for (size_t i = 0; i < candidates.size() && i < kMaxSuggestions; ++i)
    names.push_back("'" + printable(candidates[i].second) + "'");
  return names;
}

LoadError missingTensorError(const Checkpoint &checkpoint, const std::string &name) {
  std::string message = fmt::format("{}: tensor '{}' is missing",
                                    printable(checkpoint.description()), printable(name));
  std::vector<std::string> similar = similarNames(checkpoint, name);
  if (!similar.empty())
    message += fmt::format(" (similar: {})", fmt::join(similar, ", "));
  return LoadError(message);
}

void collectUnusedWarnings(const Checkpoint &checkpoint, const std::set<std::string> &wanted,
                           bool tiedEmbeddings, std::vector<std::string> &warnings) {
  size_t unused = 0;
  for (const std::string &name : checkpoint.tensorNames()) {
    if (wanted.count(name) || (tiedEmbeddings && name == kTiedHeadName))
      continue;
    if (++unused <= kMaxUnusedWarnings)
      warnings.push_back(fmt::format("{}: tensor '{}' is not used by the model",
                                     printable(checkpoint.find(name)->file), printable(name)));
  }
  if (unused > kMaxUnusedWarnings)
    warnings.push_back(fmt::format("... and {} more unused tensors", unused - kMaxUnusedWarnings));
}

} // namespace

BoundWeights bindWeights(const Checkpoint &checkpoint, const std::vector<ParamSpec> &params,
                         bool tiedEmbeddings, std::vector<std::string> *warnings) {
  BoundWeights bound;
  std::set<std::string> wanted;
  for (const ParamSpec &param : params) {
    const TensorView *tensor = checkpoint.find(param.name);
    if (!tensor)
      throw missingTensorError(checkpoint, param.name);
    if (tensor->shape != param.shape)
      throw LoadError(fmt::format("{}: tensor '{}': expected shape {}, found {}",
                                  printable(tensor->file), printable(param.name),
                                  formatShape(param.shape), formatShape(tensor->shape)));
    // No dtype check needed: the parser only yields supported dtypes (F32, F16, BF16).
    bound.byName[param.name] = tensor;
    wanted.insert(param.name);
  }
  if (warnings)
    collectUnusedWarnings(checkpoint, wanted, tiedEmbeddings, *warnings);
  return bound;
}

} // namespace q3::runtime
