//===- CpuDriver.h - the Driver for q3c-cpu artifacts ---------------------===//
#pragma once

#include "runtime/Driver.h"
#include "runtime/HostBuffer.h"
#include "runtime/Manifest.h"
#include "runtime/KernelABI.h"
#include "runtime/SharedLibrary.h"
#include "runtime/ThreadPool.h"

#include <cstdlib>
#include <map>
#include <optional>

namespace q3::runtime {

/// Runs the artifact's kernels.so (loaded from memory) on the thread pool:
/// a dispatch splits its workgroups over the threads, and buffers are host
/// memory. Dispatches queue until finish() or a read, write or move, and
/// then run as one sequence of pool loops, so a decode step wakes the
/// threads once rather than ~170 times. Allocations are HostBuffers left
/// untouched, so memory sized for the whole context (the KV cache) costs
/// only the pages a request writes.
class CpuDriver final : public Driver {
public:
  /// Checks the artifact's required CPU features against this machine and
  /// loads its kernels; throws LoadError naming `path`.
  CpuDriver(const Artifact &artifact, const manifest::Manifest &m, const std::string &path,
            ThreadPool &pool);

  int64_t kernel(const std::string &name) override;
  int64_t allocate(int64_t bytes, Pages pages = Pages::Small) override;
  int64_t wrapHost(const void *data, int64_t bytes) override;
  void write(const BufferRange &to, const void *from) override;
  void read(const BufferRange &from, void *to) override;
  bool movesInPlace() const override { return true; }
  void move(const std::vector<std::vector<CopyRange>> &waves) override;
  void dispatch(int64_t kernel, const std::vector<BufferRange> &buffers,
                const std::vector<int64_t> &scalars, int64_t workgroups) override;
  void finish() override;
  std::string deviceName() const override { return "cpu"; }
  /// While profiling, finish() keeps the time of each dispatch in the
  /// sequence it runs (ThreadPool::runLoops' loop times).
  void setProfiling(bool enabled) override;
  std::vector<double> dispatchSeconds() override;
  std::vector<std::string> kernelVariants(int64_t kernel) override;
  void useKernelVariant(int64_t kernel, int variant) override;

private:
  struct Memory {
    uint8_t *data;
    int64_t bytes;
    HostBuffer owned; // empty for wrapped host memory
  };
  uint8_t *at(const BufferRange &range);
  /// How finely a dispatch is split for the pool's threads to claim: the
  /// kernel's prefill_chunks (dispatches of several rows) and decode_chunks
  /// (one row).
  struct Chunking {
    int prefill = 1, decode = 1;
  };

  /// A kernel's builds: the default and the variants this CPU can run, the
  /// thread scratch each takes, the kernel's chunking, and which build runs.
  struct Builds {
    KernelEntry base = nullptr;
    manifest::ThreadScratch baseScratch;
    Chunking chunking;
    std::vector<std::string> variantNames;
    std::vector<KernelEntry> variants;
    std::vector<manifest::ThreadScratch> variantScratch;
    int chosen = -1; // a variant's index, or -1: the default build
    KernelEntry entry() const { return chosen < 0 ? base : variants.at(size_t(chosen)); }
    const manifest::ThreadScratch &scratch() const {
      return chosen < 0 ? baseScratch : variantScratch.at(size_t(chosen));
    }
  };
  Builds buildsOf(const std::string &name);
  /// Whether Linux gives this process the AMX tile state.
  bool amxGranted();
  void allocateThreadScratch(int64_t bytes);

  ThreadPool &pool_;
  std::unique_ptr<SharedLibrary> library_;
  /// The manifest's kernels by name: their variants, scratch and chunking.
  std::map<std::string, manifest::Kernel> manifestKernels_;
  std::vector<Builds> builds_; // by kernel id
  /// One region of threadScratchBytes_ per pool thread (runtime/KernelABI.h),
  /// threadScratchStride_ apart: the most any build takes at the planned
  /// prefill chunk.
  HostBuffer threadScratch_;
  int64_t threadScratchBytes_ = 0, threadScratchStride_ = 0;
  std::optional<bool> amxGranted_;
  std::map<std::string, int64_t> kernelIds_;
  std::vector<Memory> memory_;
  /// A dispatch waiting in the queue; its buffers and scalars are spans of
  /// the queue's flat arrays: its buffers once per pool thread, each copy
  /// ending with that thread's scratch, `buffers` apart.
  struct QueuedDispatch {
    KernelEntry entry;
    size_t firstBuffer, buffers, firstScalar;
    int64_t workgroups;
    int chunksPerThread;
  };
  // Reused by every pass: no allocation on the decode path once they have
  // grown to a pass's size.
  std::vector<QueuedDispatch> queue_;
  std::vector<void *> queuedPointers_;
  std::vector<int64_t> queuedBytes_, queuedScalars_;
  std::vector<ThreadPool::Body> queuedBodies_;
  std::vector<ThreadPool::Loop> queuedLoops_;

  bool profiling_ = false;
  // The seconds of each dispatch run since dispatchSeconds() was last
  // called, in issue order.
  std::vector<double> dispatchSeconds_;
};

} // namespace q3::runtime
