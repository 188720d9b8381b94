// Model::State: what a loaded Model holds (the artifact, the weights, the
// driver and its buffers, the KV cache) and the steps of loading and
// running it, shared by the files that implement them: Model.cpp (load,
// run), ModelBuffers.cpp (activation buffers and KV cache) and
// ModelKernelVariants.cpp (the build each kernel runs). Private to the
// runtime.
#pragma once

#include "runtime/Artifact.h"
#include "runtime/Checkpoint.h"
#include "runtime/Driver.h"
#include "runtime/MemoryLock.h"
#include "runtime/Model.h"
#include "runtime/ThreadPool.h"
#include "runtime/WeightPlan.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace q3::runtime {

struct Model::State {
  std::unique_ptr<Artifact> artifact;
  manifest::Manifest manifest;
  std::unique_ptr<Checkpoint> checkpoint;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<Driver> driver;
  std::vector<WeightData> weights;
  LockedMemory lockedWeights;         // with ModelOptions::lockWeights
  std::vector<int64_t> weightBuffers; // driver buffer of each weight the schedule reads
  std::vector<int64_t> stepKernels;   // the driver's kernel of each step
  std::vector<const manifest::Kernel *> stepKernelInfo; // the manifest's
  bool logitsRowwise = false;           // the last step (logits) may run on some rows only
  std::vector<int64_t> buffers;         // driver buffers of prefillRows rows each
  int64_t keyCache = 0, valueCache = 0; // [layers][kvHeads][capacity][headDim], kv element
  int64_t tokenBuffer = 0;              // [prefillRows] i32
  /// The kernels' workspace (manifest::Kernel::workspaceBytes): one, of the
  /// largest, as dispatches run one at a time and leave it as they found it.
  int64_t workspace = -1;
  std::vector<float> logits;
  int64_t layers = 0, kvRowBytes = 0, vocab = 0, context = 0, position = 0, chunkRows = 0;
  /// Positions the KV cache has room for now (the kernels' capacity
  /// scalar): the context, or less while a driver that moves memory in
  /// place grows it with use (reserve()).
  int64_t capacity = 0;
  bool profiling = false;
  std::vector<KernelProfile> stepProfiles;                // parallel to the steps while profiling
  std::map<std::string, std::string> variantChoices;      // kernel -> the build it runs
  std::optional<CheckpointPlacement> checkpointPlacement; // absent for embedded weights
  std::optional<CheckpointPlacement> embeddedWeightsPlacement; // CPU embedded weights only
  bool kvCacheOnHugePages = false;                        // see kvCacheOnHugePagesPays

  /// The activation buffers and the KV cache; `memoryBudget` (bytes this
  /// process may use) decides the cache's pages, `reserveContext`
  /// (ModelOptions) whether it is allocated for the whole context.
  void allocate(uint64_t memoryBudget, bool reserveContext);
  /// Room in the KV cache for `positions` (at most the context): where it
  /// has less, the capacity doubles (or more, to fit) and each layer's and
  /// head's cached rows move to their new place in the same buffers.
  void reserve(int64_t positions);
  /// Locks the weights in memory (ModelOptions::lockWeights); `source` is
  /// the checkpoint or the artifact that embeds them, for the message.
  void lockWeights(const std::string &source);
  /// For each kernel with variants this machine can run: times one dispatch
  /// of its first step on `kVariantProbeRows` rows with each build (the
  /// buffers hold no request yet) and keeps the fastest, or the build named
  /// `asked`; then gives each kernel that chooses like the products
  /// (attention) its first build whose matmul a product's chosen build runs.
  void chooseKernelVariants(const std::string &asked);
  /// The prefill instructions of `kernel`'s build `build` (-1: its default)
  /// among the usable builds `names`.
  static std::string buildMatmul(const manifest::Kernel &kernel,
                                 const std::vector<std::string> &names, int build);
  /// Runs step `index`'s kernel as its build `build` and records the choice.
  void useBuild(size_t index, const std::vector<std::string> &names, int build);
  /// The build of step `index`'s kernel (-1: its default, else one of its
  /// `variants` usable builds) whose dispatch on `rows` rows is fastest.
  int fastestBuild(size_t index, size_t variants, int64_t rows);
  /// Runs the chunk of `rows` tokens at `startPos`: every step, or all but
  /// the logits product (`logitsRows` 0), which otherwise runs on its last
  /// `logitsRows` rows.
  void runChunk(int64_t rows, int64_t startPos, int64_t logitsRows);
  /// After a chunk has finished, while profiling on a driver that times
  /// its dispatches: adds the device's times to the steps' profiles.
  void addDispatchTimes();
  /// Runs one dispatch over rows [firstRow, rows) of the activation buffers
  /// (firstRow > 0 only for the row-independent logits product).
  void runStep(size_t index, int64_t rows, int64_t startPos, int64_t firstRow = 0);
  /// Counts one call of step `index` (and the weight bytes it reads) while
  /// profiling.
  void countCall(size_t index, int64_t visible, int64_t computedRows);
};

} // namespace q3::runtime
