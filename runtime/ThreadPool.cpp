#include "runtime/ThreadPool.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

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
  workers_.reserve(size_t(threads - 1));
  for (int i = 1; i < threads; ++i)
    workers_.emplace_back([this] { workerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(sleepMutex_);
    stopping_.store(true);
    generation_.fetch_add(1);
  }
  workAvailable_.notify_all();
  for (std::thread &worker : workers_)
    worker.join();
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

int ThreadPool::claimChunk() {
  uint64_t word = claims_.load();
  for (;;) {
    const uint64_t next = word & 0xFFFFFFFFu, chunks = word >> 32;
    if (next >= chunks)
      return -1;
    if (claims_.compare_exchange_weak(word, word + 1))
      return int(next);
  }
}

void ThreadPool::runUnclaimedChunks() {
  for (int index = claimChunk(); index >= 0; index = claimChunk())
    runChunk(index);
}

void ThreadPool::workerLoop() {
  uint64_t seen = 0;
  for (;;) {
    spinThenWait(workAvailable_, sleepingWorkers_, [&] { return generation_.load() != seen; });
    seen = generation_.load();
    if (stopping_.load())
      return;
    // A worker that wakes late finds every chunk claimed (or claims one of a
    // later loop, which the caller is then still waiting for): both are safe.
    runUnclaimedChunks();
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
  claims_.store(uint64_t(chunks_) << 32 | 1);
  generation_.fetch_add(1);
  if (sleepingWorkers_.load() > 0) {
    { std::lock_guard<std::mutex> lock(sleepMutex_); }
    workAvailable_.notify_all();
  }
  runChunk(0);
  runUnclaimedChunks();
  spinThenWait(loopFinished_, sleepingCaller_, [&] { return finishedChunks_.load() == chunks_; });
  body_ = nullptr;
  if (firstError_)
    std::rethrow_exception(firstError_);
}

} // namespace q3::runtime
