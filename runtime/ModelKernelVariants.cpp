// Model::State's choice of the build each kernel runs: for kernels with
// variants this CPU can run, the fastest on a short dispatch timed at load,
// or the one the user named (--kernel-build); attention follows the
// products' choice.
#include "runtime/ModelState.h"

#include "runtime/LoadError.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <set>

namespace q3::runtime {

// Rows of the dispatch that times each variant: enough for the prefill tiles
// (and AMX's 16-row minimum) to show their rate; the logits product of a
// 152K vocabulary stays a few milliseconds per build.
constexpr int64_t kVariantProbeRows = 32;

void Model::State::chooseKernelVariants(const std::string &asked) {
  const int64_t rows = std::min(chunkRows, kVariantProbeRows);
  std::set<int64_t> chosen;
  std::vector<size_t> followers;        // steps whose kernel follows the products
  std::set<std::string> productMatmuls; // what the timed kernels' chosen builds run
  bool askedFound = asked.empty() || asked == "default";
  for (size_t i = 0; i < stepKernels.size(); ++i) {
    const int64_t kernel = stepKernels[i];
    if (!chosen.insert(kernel).second)
      continue;
    const manifest::Kernel &info = *stepKernelInfo[i];
    if (info.variantChoice == manifest::VariantChoice::LikeProducts) {
      followers.push_back(i);
      continue;
    }
    const std::vector<std::string> names = driver->kernelVariants(kernel);
    int build = -1;
    if (!asked.empty()) { // the user's choice, not a measurement
      auto named = std::find(names.begin(), names.end(), asked);
      build = named != names.end() ? int(named - names.begin()) : -1;
      askedFound = askedFound || build >= 0;
    } else if (!names.empty()) {
      build = fastestBuild(i, names.size(), rows);
    }
    useBuild(i, names, build);
    if (!info.matmul.empty())
      productMatmuls.insert(buildMatmul(info, names, build));
  }
  if (!askedFound)
    throw LoadError(fmt::format("{}: --kernel-build {}: no kernel has a variant of that name that "
                                "this CPU can run",
                                artifact->displayName(), asked));
  for (size_t i : followers) {
    const std::vector<std::string> names = driver->kernelVariants(stepKernels[i]);
    int build = -1;
    for (size_t b = 0; b < names.size() && build < 0; ++b)
      if (productMatmuls.count(buildMatmul(*stepKernelInfo[i], names, int(b))))
        build = int(b);
    useBuild(i, names, build);
  }
}

std::string Model::State::buildMatmul(const manifest::Kernel &kernel,
                                      const std::vector<std::string> &names, int build) {
  if (build < 0)
    return kernel.matmul;
  for (const manifest::KernelVariant &variant : kernel.variants)
    if (variant.name == names.at(size_t(build)))
      return variant.matmul;
  return kernel.matmul;
}

void Model::State::useBuild(size_t index, const std::vector<std::string> &names, int build) {
  driver->useKernelVariant(stepKernels[index], build);
  if (!stepKernelInfo[index]->variants.empty())
    variantChoices[stepKernelInfo[index]->name] = build < 0 ? "default" : names[size_t(build)];
}

int Model::State::fastestBuild(size_t index, size_t variants, int64_t rows) {
  int best = -1;
  double bestSeconds = std::numeric_limits<double>::infinity();
  for (int build = -1; build < int(variants); ++build) {
    driver->useKernelVariant(stepKernels[index], build);
    runStep(index, rows, 0); // warms up
    driver->finish();
    const auto start = std::chrono::steady_clock::now();
    runStep(index, rows, 0);
    driver->finish();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (seconds < bestSeconds) {
      bestSeconds = seconds;
      best = build;
    }
  }
  return best;
}

const std::map<std::string, std::string> &Model::kernelVariantChoices() const {
  return state->variantChoices;
}

} // namespace q3::runtime
