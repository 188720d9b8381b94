#include "runtime/CpuDriver.h"

#include "runtime/Artifact.h"
#include "runtime/CpuFeatures.h"
#include "runtime/LoadError.h"
#include "runtime/Manifest.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <stdexcept>
#include <utility>

namespace q3::runtime {

CpuDriver::CpuDriver(const Artifact &artifact, const manifest::Manifest &m,
                     const std::string &path, ThreadPool &pool)
    : pool_(pool) {
  const std::vector<std::string> &required = m.target.requiredFeatures;
  std::vector<std::string> missing = missingCpuFeatures(required);
  if (!missing.empty())
    throw LoadError(fmt::format("{}: compiled for CPU features this machine lacks: {} (compile "
                                "with --cpu=host on this machine, or a lower --cpu level)",
                                path, fmt::join(missing, ", ")));
  if (std::find(required.begin(), required.end(), "amx-tile") != required.end()) {
    if (std::string refused = requestAmxState(); !refused.empty())
      throw LoadError(path + ": compiled for AMX, but " + refused);
  }
  for (const manifest::Kernel &kernel : m.kernels)
    manifestKernels_[kernel.name] = kernel;
  allocateThreadScratch(manifest::largestThreadScratch(m));
  const Artifact::Section *library = artifact.find("kernels.so");
  if (!library)
    throw LoadError(path + ": no kernels.so section");
  library_ = SharedLibrary::loadFromMemory(path + ":kernels.so", library->data, library->size);
}

void CpuDriver::allocateThreadScratch(int64_t bytes) {
  threadScratchBytes_ = bytes;
  if (bytes == 0)
    return;
  // Page-aligned regions: no two threads write one line, and a region's
  // pages are touched only as far as its thread's largest call reaches.
  constexpr int64_t kPage = 4096;
  threadScratchStride_ = (threadScratchBytes_ + kPage - 1) / kPage * kPage;
  threadScratch_ = HostBuffer(size_t(threadScratchStride_) * size_t(pool_.size()));
}

bool CpuDriver::amxGranted() {
  if (!amxGranted_) // asked once: Linux's answer does not change
    amxGranted_ = requestAmxState().empty();
  return *amxGranted_;
}

CpuDriver::Builds CpuDriver::buildsOf(const std::string &name) {
  Builds builds;
  builds.base = reinterpret_cast<KernelEntry>(library_->symbol(kKernelSymbolPrefix + name));
  auto described = manifestKernels_.find(name);
  if (described == manifestKernels_.end())
    return builds;
  builds.baseScratch = described->second.threadScratch;
  builds.chunking = {int(described->second.prefillChunks), int(described->second.decodeChunks)};
  for (const manifest::KernelVariant &variant : described->second.variants) {
    if (!missingCpuFeatures(variant.requiredFeatures).empty())
      continue;
    const bool amx = std::find(variant.requiredFeatures.begin(), variant.requiredFeatures.end(),
                               "amx-tile") != variant.requiredFeatures.end();
    if (amx && !amxGranted())
      continue;
    builds.variantNames.push_back(variant.name);
    builds.variants.push_back(reinterpret_cast<KernelEntry>(
        library_->symbol(kKernelSymbolPrefix + variantKernelName(name, variant.name))));
    builds.variantScratch.push_back(variant.threadScratch);
  }
  return builds;
}

int64_t CpuDriver::kernel(const std::string &name) {
  auto [it, inserted] = kernelIds_.try_emplace(name, int64_t(builds_.size()));
  if (inserted)
    builds_.push_back(buildsOf(name));
  return it->second;
}

std::vector<std::string> CpuDriver::kernelVariants(int64_t kernel) {
  return builds_.at(size_t(kernel)).variantNames;
}

void CpuDriver::useKernelVariant(int64_t kernel, int variant) {
  Builds &builds = builds_.at(size_t(kernel));
  if (variant >= int(builds.variants.size()))
    throw std::out_of_range("useKernelVariant: no variant " + std::to_string(variant));
  builds.chosen = variant < 0 ? -1 : variant;
}

int64_t CpuDriver::allocate(int64_t bytes, Pages pages) {
  HostBuffer buffer(size_t(bytes > 0 ? bytes : 1),
                    pages == Pages::Huge ? HostBuffer::Pages::Huge : HostBuffer::Pages::Small);
  uint8_t *data = buffer.data();
  memory_.push_back({data, bytes, std::move(buffer)});
  return int64_t(memory_.size() - 1);
}

int64_t CpuDriver::wrapHost(const void *data, int64_t bytes) {
  // Kernels never write weights: the const_cast only fits the kernel ABI.
  memory_.push_back({static_cast<uint8_t *>(const_cast<void *>(data)), bytes, HostBuffer()});
  return int64_t(memory_.size() - 1);
}

uint8_t *CpuDriver::at(const BufferRange &range) {
  const Memory &memory = memory_.at(size_t(range.buffer));
  if (range.offset < 0 || range.bytes < 0 || range.offset + range.bytes > memory.bytes)
    throw std::out_of_range(fmt::format("bytes [{}, {}) of a {}-byte buffer", range.offset,
                                        range.offset + range.bytes, memory.bytes));
  return memory.data + range.offset;
}

void CpuDriver::write(const BufferRange &to, const void *from) {
  finish(); // a queued dispatch may still read the bytes
  std::memcpy(at(to), from, size_t(to.bytes));
}

void CpuDriver::read(const BufferRange &from, void *to) {
  finish();
  std::memcpy(to, at(from), size_t(from.bytes));
}

void CpuDriver::move(const std::vector<std::vector<CopyRange>> &waves) {
  finish();
  for (const std::vector<CopyRange> &wave : waves) {
    for (const CopyRange &copy : wave)
      if (copy.from.bytes != copy.to.bytes)
        throw std::invalid_argument(
            fmt::format("a move of {} bytes into {}", copy.from.bytes, copy.to.bytes));
    // On the pool's threads: the copies fault in the pages they write, and
    // that is most of their cost.
    pool_.parallelFor(
        int64_t(wave.size()),
        [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            const CopyRange &copy = wave[size_t(i)];
            std::memmove(at(copy.to), at(copy.from), size_t(copy.from.bytes));
          }
        },
        8);
  }
}

void CpuDriver::dispatch(int64_t kernel, const std::vector<BufferRange> &buffers,
                         const std::vector<int64_t> &scalars, int64_t workgroups) {
  // Past this many the queue runs: a pass of a deep model still queues
  // whole, and the queue's memory stays bounded.
  constexpr size_t kMaxQueued = 4096;
  if (queue_.size() == kMaxQueued)
    finish();
  const Builds &builds = builds_.at(size_t(kernel));
  // Scalar 0 is the dispatch's row count (runtime/KernelABI.h).
  const int64_t rows = scalars.at(0);
  const int64_t scratchBytes = builds.scratch().bytesFor(rows);
  if (scratchBytes > threadScratchBytes_)
    throw std::logic_error(fmt::format("a dispatch of {} rows takes {} bytes of thread scratch, "
                                       "more than the {} planned for the prefill chunk",
                                       rows, scratchBytes, threadScratchBytes_));
  const int chunksPerThread = rows > 1 ? builds.chunking.prefill : builds.chunking.decode;
  QueuedDispatch queued{builds.entry(),     queuedPointers_.size(),
                        buffers.size() + 1, queuedScalars_.size(),
                        workgroups,         chunksPerThread};
  for (int slot = 0; slot < pool_.size(); ++slot) {
    for (const BufferRange &range : buffers) {
      queuedPointers_.push_back(at(range));
      queuedBytes_.push_back(range.bytes);
    }
    queuedPointers_.push_back(threadScratchBytes_ == 0
                                  ? nullptr
                                  : threadScratch_.data() + int64_t(slot) * threadScratchStride_);
    queuedBytes_.push_back(threadScratchBytes_);
  }
  queuedScalars_.insert(queuedScalars_.end(), scalars.begin(), scalars.end());
  queue_.push_back(queued);
}

void CpuDriver::finish() {
  if (queue_.empty())
    return;
  // The bodies are built only now: queue_ no longer grows, so they may
  // point into it (and reserved, so the loops may point into them).
  queuedBodies_.clear();
  queuedBodies_.reserve(queue_.size());
  queuedLoops_.clear();
  for (const QueuedDispatch &queued : queue_) {
    queuedBodies_.push_back([this, &queued](int64_t begin, int64_t end) {
      // The copy of the buffers that ends with this thread's scratch.
      const size_t first = queued.firstBuffer + size_t(ThreadPool::currentSlot()) * queued.buffers;
      queued.entry(queuedPointers_.data() + first, queuedBytes_.data() + first,
                   queuedScalars_.data() + queued.firstScalar, begin, end);
    });
    queuedLoops_.push_back({queued.workgroups, &queuedBodies_.back(), queued.chunksPerThread});
  }
  // Emptied even when a kernel throws: those dispatches are not retried.
  struct ClearQueue {
    CpuDriver &driver;
    ~ClearQueue() {
      driver.queue_.clear();
      driver.queuedPointers_.clear();
      driver.queuedBytes_.clear();
      driver.queuedScalars_.clear();
    }
  } clearQueue{*this};
  if (!profiling_) {
    pool_.runLoops(queuedLoops_);
    return;
  }
  std::vector<double> seconds;
  pool_.runLoops(queuedLoops_, &seconds);
  dispatchSeconds_.insert(dispatchSeconds_.end(), seconds.begin(), seconds.end());
}

void CpuDriver::setProfiling(bool enabled) {
  finish(); // what ran before is not profiled
  profiling_ = enabled;
  dispatchSeconds_.clear();
}

std::vector<double> CpuDriver::dispatchSeconds() {
  finish();
  return std::exchange(dispatchSeconds_, {});
}

} // namespace q3::runtime
