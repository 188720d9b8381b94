// A compiled model ready to run: an artifact's kernels loaded, the weights
// bound from a Hugging Face checkpoint (with the recorded weight transforms
// applied), activation buffers allocated by the artifact's buffer plan and a
// KV cache. No MLIR, no LLVM.
#pragma once

#include "runtime/CheckpointBinding.h"
#include "runtime/Manifest.h"
#include "runtime/MappedFile.h"
#include "runtime/Signature.h"
#include "runtime/ThreadPool.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace q3::runtime {

/// A request the model cannot serve (token id outside the vocabulary, more
/// positions than the context holds). The message is one line.
class RequestError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Time spent in one kernel over the forward() calls since profiling began.
struct KernelProfile {
  std::string kernel;
  int64_t calls = 0;
  double seconds = 0;
  int64_t weightBytes = 0; // weight bytes the kernel read over those calls
  /// KV-cache bytes of the visible positions of the layers the kernel read
  /// (attention), once per call: decode's real traffic, a prefill's least.
  int64_t cacheBytes = 0;
  /// Multiply-adds of the products over those calls: the rows each call
  /// computed times the elements of the weight matrices it read.
  int64_t multiplyAdds = 0;
};

struct ModelOptions {
  int threads = 0;           // 0: all cores
  int64_t contextLength = 0; // KV cache positions; 0: min(max_position_embeddings, 4096)
  /// Give the KV cache the whole context's capacity at load, rather than
  /// kInitialCachePositions grown as the context fills (where the driver
  /// moves memory in place).
  bool reserveContext = false;
  int device = -1;           // Vulkan artifacts: the device index; -1: the default device
  /// Kernels with variants (portable artifacts): "" times them at load and
  /// runs the fastest; "default" runs every kernel's own build; a variant's
  /// name runs that variant wherever a kernel has it (LoadError when this
  /// CPU cannot run it).
  std::string kernelBuild;
  /// When set, the artifact must carry a signature that verifies with this
  /// key, checked before any of its code is loaded (runtime/Signature.h).
  std::optional<PublicKey> requiredSigner;
  /// CPU artifacts: lock the weights the kernels read in memory (mlock), so
  /// memory pressure cannot evict them (a checkpoint bound in place is page
  /// cache). Fails the load with ResourceError when they cannot be locked.
  bool lockWeights = false;
  /// Checkpoint weights: read in place from the page cache (Mapped), or
  /// copied at load into memory on transparent huge pages (HugePageCopy:
  /// slower to load, faster kernels where the page cache maps small pages);
  /// unset: chosen by measuring the page cache (runtime/CheckpointBinding.h).
  std::optional<FilePlacement> checkpointPlacement;
  /// Called as weights are bound (done of total weight-plan entries), for a
  /// progress bar.
  std::function<void(int64_t done, int64_t total)> progress;
};

/// Whether the KV cache (`cacheBytes`, keys and values, for the whole
/// context) goes on huge pages. Its layout, [layer][KV head][position]
/// [feature], gives each layer and head one stretch of the capacity (2 MB
/// for the 0.6B shape's 4096 f32 positions), so on huge pages the first
/// token makes nearly all of the capacity resident (which is why it grows
/// with use: kInitialCachePositions); in exchange decode attention streams
/// it faster (measured on
/// the project's AMD VM, five alternations: 37-39 against 24-35 GB/s of KV
/// after 2048 positions). Taken while the whole cache is at most an eighth
/// of `budgetBytes` (the memory this process may use), so long contexts
/// keep growing with use, and when each of keys and values holds at least
/// one huge page (HostBuffer maps less with small pages).
bool kvCacheOnHugePagesPays(uint64_t cacheBytes, uint64_t budgetBytes);

/// The KV cache's first capacity, in positions, where the driver moves
/// memory in place (Driver::movesInPlace): it doubles as the context fills,
/// up to the context, inside buffers that reserve the whole context (only
/// the pages written are resident).
inline constexpr int64_t kInitialCachePositions = 256;

class Model {
public:
  /// Throws LoadError naming the file, tensor or field on any mismatch.
  static std::unique_ptr<Model> load(const std::string &artifactPath,
                                     const std::string &weightsPath, const ModelOptions &options);
  ~Model();

  int64_t vocabSize() const;
  int64_t contextLength() const;
  int threads() const;
  /// Positions already in the KV cache.
  int64_t position() const;
  /// Forgets the cache.
  void reset();

  /// Which positions' logits forward() computes: every one ([T, vocab]), or
  /// only the last ([1, vocab]; the final product then runs on one row, which
  /// is what generation needs).
  enum class Logits { All, Last };

  /// Runs `tokens` at positions [position(), position() + T) and returns the
  /// logits, row-major, valid until the next call. A T longer than
  /// prefillRows() runs in chunks of at most that many rows.
  const std::vector<float> &forward(const std::vector<int32_t> &tokens, Logits which = Logits::All);

  /// Rows one dispatch handles at most (the activation buffers' rows).
  int64_t prefillRows() const;

  /// Bytes one decode step reads and writes: every weight as stored, plus
  /// activations, the token's K/V rows and the keys and values of the
  /// `visiblePositions` positions attention reads (its own included; 1, at
  /// position 0, is what `q3c dump --stats` plans).
  int64_t decodeBytesPerToken(int64_t visiblePositions = 1) const;
  /// Bytes of all bound weights (transforms applied), as held in memory.
  int64_t weightBytes() const;
  /// Bytes locked in memory by ModelOptions::lockWeights (whole pages); 0
  /// without it.
  uint64_t lockedBytes() const;
  /// The KV cache's bytes (keys and values, for the whole context), and
  /// whether they live on huge pages (kvCacheOnHugePagesPays): then each
  /// capacity it grows to is resident as soon as it holds a token, else
  /// pages become resident as positions fill.
  int64_t kvCacheBytes() const;
  bool kvCacheOnHugePages() const;
  /// The positions the KV cache has room for now: the context, or fewer
  /// while it grows with use (kInitialCachePositions).
  int64_t kvCachePositions() const;
  /// Where the checkpoint's bytes were placed and why; nullopt for an
  /// artifact that embeds its weights.
  const std::optional<CheckpointPlacement> &checkpointPlacement() const;
  /// For a CPU artifact that embeds its weights: how much of them the page
  /// cache held in huge folios, and what the load read back
  /// (placeEmbeddedWeights); nullopt otherwise.
  const std::optional<CheckpointPlacement> &embeddedWeightsPlacement() const;
  /// The artifact's manifest (validated), with the model's config.
  const manifest::Manifest &manifest() const;
  const manifest::ModelConfig &config() const;
  ThreadPool &pool();
  /// What the kernels run on: "cpu", or the Vulkan device's name.
  std::string deviceName() const;
  /// The build a portable artifact's kernel runs, picked at load among the
  /// variants this CPU can run by timing one prefill dispatch of each:
  /// kernel name -> variant name ("default" for the kernel's own build).
  /// Empty when no kernel has variants.
  const std::map<std::string, std::string> &kernelVariantChoices() const;
  /// The Vulkan device's read bandwidth, measured by the artifact's read
  /// kernel (the best of `reads`); nullopt for the CPU, whose memory the
  /// caller probes itself (runtime/MemoryBandwidth.h).
  std::optional<double> deviceReadBandwidth(int reads, int64_t *bytes = nullptr);
  /// CPU artifacts: how fast the memory the kernels read the weights from
  /// reads (GB/s, the best of `reads` plain reads of every weight where it
  /// lies, on the model's threads), and the bytes read; nullopt on a device.
  /// Beside a fresh buffer's rate it tells the pages the weights got from
  /// the kernels' own speed.
  std::optional<double> weightReadBandwidth(int reads, int64_t *bytes = nullptr);

  /// Starts (clearing what was collected) or stops timing each dispatch.
  /// Off by default: it adds two clock reads to every dispatch.
  void setProfiling(bool enabled);
  /// Per kernel, in order of first use in the schedule.
  std::vector<KernelProfile> profile() const;

private:
  Model();
  struct State;
  std::unique_ptr<State> state;
};

} // namespace q3::runtime
