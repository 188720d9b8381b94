// A fixed set of persistent worker threads that run one parallel loop at a
// time. Built for many short dispatches (a decode step issues ~170 of 50-500 µs
// each), so waking the workers must cost microseconds, not a thread start.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <mutex>
#include <thread>
#include <vector>

namespace q3::runtime {

/// The system refused to start a worker (thread or memory limits). The
/// message is one line; the workers that had started are stopped.
class ThreadStartError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

class ThreadPool {
public:
  // `threads` counts the caller too: ThreadPool(4) starts 3 workers. 0 means
  // std::thread::hardware_concurrency(); negative is std::invalid_argument.
  // Throws ThreadStartError when a worker cannot be started.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  int size() const { return size_; }

  // Runs body(begin, end) over [0, count) split into n = size() *
  // chunksPerThread contiguous chunks, chunk i being [count*i/n,
  // count*(i+1)/n), so the split depends only on count, size() and
  // chunksPerThread. Thread t (the caller is 0) owns chunks [n*t/size(),
  // n*(t+1)/size()) and runs them in order, so it streams one contiguous
  // range; a thread whose own chunks are all claimed takes the last unclaimed
  // chunk of the thread with the most left. So a thread the OS has not
  // scheduled delays nothing, and with several chunks per thread a slower
  // thread does less. Empty chunks are skipped. Returns when every chunk is
  // done; the first exception a chunk throws is rethrown here. Not reentrant:
  // one call at a time, and body must not call parallelFor on the same pool.
  void parallelFor(int64_t count, const std::function<void(int64_t begin, int64_t end)> &body,
                   int chunksPerThread = 1);

private:
  void workerLoop(int slot);
  // Wakes every worker to exit and joins it.
  void stopWorkers();
  // Claims and runs chunks of the current loop until none are left: first
  // the slot's own, then the others' from their ends.
  void runUnclaimedChunks(int slot);
  // The next chunk of `slot`'s own range, or -1 when it is exhausted.
  int claimOwnChunk(int slot);
  // The last unclaimed chunk of the slot with the most left, or -1.
  int stealChunk();
  // Runs one chunk, records its exception, and counts it finished.
  void runChunk(int index);
  // Spins briefly, then sleeps on `cv` until `ready()` holds.
  template <typename Ready>
  void spinThenWait(std::condition_variable &cv, std::atomic<int> &sleepers, Ready ready);

  int size_;
  std::vector<std::thread> workers_;

  // The current loop, published to the workers by bumping generation_.
  const std::function<void(int64_t, int64_t)> *body_ = nullptr;
  int64_t count_ = 0;
  int chunks_ = 0;
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stopping_{false};
  // Per thread, the unclaimed part of its chunks: the next (low 32 bits) and
  // the end (high 32 bits) in one word, so the owner's claim from the front
  // and a thief's from the back are each one compare-and-swap and never take
  // the same chunk. One cache line each: owners claim without contention.
  struct alignas(64) ChunkRange {
    std::atomic<uint64_t> word{0};
  };
  std::unique_ptr<ChunkRange[]> ranges_;
  std::atomic<int> finishedChunks_{0}; // the loop is done when this reaches chunks_

  std::mutex errorMutex_;
  std::exception_ptr firstError_;

  // Sleeping is the slow path: a waker takes the mutex only when someone sleeps.
  std::mutex sleepMutex_;
  std::condition_variable workAvailable_;
  std::condition_variable loopFinished_;
  std::atomic<int> sleepingWorkers_{0};
  std::atomic<int> sleepingCaller_{0};
};

} // namespace q3::runtime
