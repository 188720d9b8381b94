#include "runtime/ThreadPool.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <system_error>

#include <fmt/format.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace q3::runtime {

// How long a waiting thread polls before it sleeps. Back-to-back dispatches
// arrive well within this, so a decode step never pays a futex wake-up; an idle
// pool stops burning CPU soon after.
static constexpr auto kSpinTime = std::chrono::microseconds(200);

static void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

ThreadPool::ThreadPool(int threads) {
  if (threads < 0)
    throw std::invalid_argument("ThreadPool: thread count must be >= 0");
  if (threads == 0)
    threads = std::max(1, int(std::thread::hardware_concurrency()));
  size_ = threads;
  ranges_ = std::make_unique<ChunkRange[]>(size_t(threads));
  workers_.reserve(size_t(threads - 1));
  try {
    for (int slot = 1; slot < threads; ++slot)
      workers_.emplace_back([this, slot] { workerLoop(slot); });
  } catch (const std::system_error &error) {
    // The destructor does not run for a half-built pool: stop the workers
    // that did start, or their std::thread objects abort the process.
    const size_t started = workers_.size();
    stopWorkers();
    throw ThreadStartError(fmt::format("cannot start thread {} of {}: {} (the system limits "
                                       "threads or memory; ask for fewer threads)",
                                       started + 2, threads, error.code().message()));
  }
}

ThreadPool::~ThreadPool() { stopWorkers(); }

void ThreadPool::stopWorkers() {
  {
    std::lock_guard<std::mutex> lock(sleepMutex_);
    stopping_.store(true);
    generation_.fetch_add(1);
  }
  workAvailable_.notify_all();
  for (std::thread &worker : workers_)
    worker.join();
  workers_.clear();
}

template <typename Ready>
void ThreadPool::spinThenWait(std::condition_variable &cv, std::atomic<int> &sleepers,
                              Ready ready) {
  auto deadline = std::chrono::steady_clock::now() + kSpinTime;
  for (int i = 0; !ready(); ++i) {
    cpuRelax();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > deadline) {
      // The waker stores its condition and then reads `sleepers`; we bump
      // `sleepers` and then re-check the condition (both seq_cst), so one of
      // us sees the other and no wake-up is lost.
      std::unique_lock<std::mutex> lock(sleepMutex_);
      sleepers.fetch_add(1);
      cv.wait(lock, ready);
      sleepers.fetch_sub(1);
      return;
    }
  }
}

void ThreadPool::runChunk(int index) {
  // Read before the chunk counts as finished: after that the caller may
  // already be setting up the next loop.
  const int chunks = chunks_;
  int64_t begin = count_ * index / chunks;
  int64_t end = count_ * (index + 1) / chunks;
  if (begin < end) {
    try {
      (*body_)(begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(errorMutex_);
      if (!firstError_)
        firstError_ = std::current_exception();
    }
  }
  if (finishedChunks_.fetch_add(1) == chunks - 1 && sleepingCaller_.load() > 0) {
    // Taking the mutex orders this notify after the caller's wait begins.
    { std::lock_guard<std::mutex> lock(sleepMutex_); }
    loopFinished_.notify_one();
  }
}

static constexpr uint64_t kLow = 0xFFFFFFFFu;

int ThreadPool::claimOwnChunk(int slot) {
  std::atomic<uint64_t> &range = ranges_[size_t(slot)].word;
  uint64_t word = range.load();
  for (;;) {
    const uint64_t next = word & kLow, end = word >> 32;
    if (next >= end)
      return -1;
    if (range.compare_exchange_weak(word, word + 1))
      return int(next);
  }
}

int ThreadPool::stealChunk() {
  for (;;) {
    int victim = -1;
    uint64_t most = 0, word = 0;
    for (int slot = 0; slot < size_; ++slot) {
      const uint64_t w = ranges_[size_t(slot)].word.load();
      const uint64_t next = w & kLow, end = w >> 32;
      if (end > next && end - next > most) {
        most = end - next;
        victim = slot;
        word = w;
      }
    }
    if (victim < 0)
      return -1;
    const uint64_t end = word >> 32;
    if (ranges_[size_t(victim)].word.compare_exchange_strong(word, (end - 1) << 32 | (word & kLow)))
      return int(end - 1);
  }
}

void ThreadPool::runUnclaimedChunks(int slot) {
  for (int index = claimOwnChunk(slot); index >= 0; index = claimOwnChunk(slot))
    runChunk(index);
  for (int index = stealChunk(); index >= 0; index = stealChunk())
    runChunk(index);
}

void ThreadPool::workerLoop(int slot) {
  uint64_t seen = 0;
  for (;;) {
    spinThenWait(workAvailable_, sleepingWorkers_, [&] { return generation_.load() != seen; });
    seen = generation_.load();
    if (stopping_.load())
      return;
    // A worker that wakes late finds every chunk claimed (or claims one of a
    // later loop, which the caller is then still waiting for): both are safe.
    runUnclaimedChunks(slot);
  }
}

void ThreadPool::parallelFor(int64_t count, const std::function<void(int64_t, int64_t)> &body,
                             int chunksPerThread) {
  if (count <= 0)
    return;
  if (size_ == 1 || count == 1) { // nothing to share: skip waking anyone
    body(0, count);
    return;
  }
  body_ = &body;
  count_ = count;
  chunks_ = int(std::min<int64_t>(count, int64_t(size_) * std::max(1, chunksPerThread)));
  firstError_ = nullptr;
  finishedChunks_.store(0);
  // From here on chunks can be claimed (seq_cst publishes body_ and the rest).
  // The ranges of the previous loop are all exhausted, so a worker still in
  // it claims nothing until they are reset, and then claims for this loop.
  // Chunk 0 is the caller's before anyone can claim it (with fewer chunks
  // than threads it may fall in another slot's range).
  for (int slot = 0; slot < size_; ++slot) {
    const uint64_t first = uint64_t(chunks_) * uint64_t(slot) / uint64_t(size_);
    const uint64_t end = uint64_t(chunks_) * uint64_t(slot + 1) / uint64_t(size_);
    ranges_[size_t(slot)].word.store(end << 32 | std::max<uint64_t>(first, 1));
  }
  generation_.fetch_add(1);
  if (sleepingWorkers_.load() > 0) {
    { std::lock_guard<std::mutex> lock(sleepMutex_); }
    workAvailable_.notify_all();
  }
  runChunk(0);
  runUnclaimedChunks(0);
  spinThenWait(loopFinished_, sleepingCaller_, [&] { return finishedChunks_.load() == chunks_; });
  body_ = nullptr;
  if (firstError_)
    std::rethrow_exception(firstError_);
}

} // namespace q3::runtime
