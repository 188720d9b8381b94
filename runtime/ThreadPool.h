// A fixed set of persistent worker threads that run one parallel loop at a
// time. Built for many short dispatches (a decode step issues ~170 of 50-500 µs
// each), so waking the workers must cost microseconds, not a thread start.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace q3::runtime {

class ThreadPool {
public:
  // `threads` counts the caller too: ThreadPool(4) starts 3 workers. 0 means
  // std::thread::hardware_concurrency(); negative is std::invalid_argument.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  int size() const { return size_; }

  // Runs body(begin, end) over [0, count) split into n = size() *
  // chunksPerThread contiguous chunks, chunk i being [count*i/n,
  // count*(i+1)/n), so the split depends only on count, size() and
  // chunksPerThread. The caller takes the first chunk, then every thread
  // claims the next unclaimed one: a worker the OS has not scheduled delays
  // nothing, and with several chunks per thread a thread slowed down takes
  // fewer. Empty chunks are skipped. Returns when every chunk is done; the
  // first exception a chunk throws is rethrown here. Not reentrant: one call
  // at a time, and body must not call parallelFor on the same pool.
  void parallelFor(int64_t count, const std::function<void(int64_t begin, int64_t end)> &body,
                   int chunksPerThread = 1);

private:
  void workerLoop();
  // Claims and runs chunks of the current loop until none are left.
  void runUnclaimedChunks();
  // The index of an unclaimed chunk of the current loop, or -1.
  int claimChunk();
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
  // The next chunk to claim (low 32 bits) and the loop's chunk count (high 32
  // bits) in one word, so a claim is one compare-and-swap against the current
  // loop: a thread that read the word during an earlier loop cannot claim a
  // chunk of this one that another thread also claims.
  std::atomic<uint64_t> claims_{0};
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
