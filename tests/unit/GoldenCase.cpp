//===- GoldenCase.cpp -----------------------------------------------------===//
#include "tests/unit/GoldenCase.h"

#include "backends/reference/CheckpointWeights.h"
#include "frontend/ModelConfig.h"
#include "ir/BuildGraph.h"
#include "ir/Params.h"
#include "runtime/Npy.h"

#include "mlir/IR/MLIRContext.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>

namespace q3::testing {

namespace fs = std::filesystem;

std::vector<std::string> goldenCaseNames() {
  std::vector<std::string> names;
  for (const auto &entry : fs::directory_iterator(Q3_GOLDEN_DIR))
    if (fs::exists(entry.path() / "config.json"))
      names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

static std::vector<int32_t> readIds(const fs::path &path, bool hasPrefix) {
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error(path.string() + ": cannot open");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (hasPrefix) {
    if (text.rfind("ids:", 0) != 0)
      throw std::runtime_error(path.string() + ": expected 'ids: ...'");
    text = text.substr(4);
  }
  std::replace(text.begin(), text.end(), ',', ' ');
  std::istringstream items(text);
  std::vector<int32_t> ids;
  for (int32_t id; items >> id;)
    ids.push_back(id);
  return ids;
}

GoldenCase loadGoldenCase(const std::string &name) {
  GoldenCase golden;
  golden.name = name;
  golden.dir = (fs::path(Q3_GOLDEN_DIR) / name).string();
  golden.prompt = readIds(fs::path(golden.dir) / "tokens.txt", false);
  golden.greedy = readIds(fs::path(golden.dir) / "greedy.txt", true);
  runtime::NpyArray logits = runtime::readNpyF32((fs::path(golden.dir) / "logits.npy").string());
  golden.logitsShape = logits.shape;
  golden.logits = std::move(logits.data);
  return golden;
}

struct GoldenRunner::Impl {
  mlir::MLIRContext context;
  frontend::ModelConfig config;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::unique_ptr<reference::CheckpointWeights> weights;
  std::unique_ptr<reference::Interpreter> interpreter;
};

GoldenRunner::GoldenRunner(const GoldenCase &golden,
                           const std::function<void(mlir::ModuleOp)> &transform)
    : impl(new Impl) {
  std::vector<std::string> warnings;
  impl->config = frontend::loadModelConfig(golden.dir, &warnings);
  impl->module = ir::buildQwen3Graph(impl->context, impl->config);
  if (transform)
    transform(*impl->module);
  impl->weights = std::make_unique<reference::CheckpointWeights>(
      golden.dir, ir::collectParams(*impl->module), impl->config.tieWordEmbeddings, &warnings);
  impl->interpreter = std::make_unique<reference::Interpreter>(
      *impl->module,
      [w = impl->weights.get()](const std::string &name) -> const std::vector<float> & {
        return w->get(name);
      },
      64);
}

GoldenRunner::~GoldenRunner() { delete impl; }

reference::Interpreter &GoldenRunner::interpreter() { return *impl->interpreter; }

mlir::ModuleOp GoldenRunner::module() { return *impl->module; }

double maxAbsDiff(const std::vector<float> &a, const std::vector<float> &b) {
  // NaN, not infinity: "diff <= bound" and "diff > bound" are then both
  // false, so neither a parity check nor a must-differ check can pass.
  // (std::max(worst, NaN) keeps `worst`, which let NaN logits pass before.)
  if (a.size() != b.size())
    return std::nan("");
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i]))
      return std::nan("");
    worst = std::max(worst, std::fabs(double(a[i]) - double(b[i])));
  }
  return worst;
}

} // namespace q3::testing
