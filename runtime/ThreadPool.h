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

  // Runs body(begin, end) over [0, count) split into size() contiguous chunks,
  // chunk i being [count*i/size, count*(i+1)/size), so the split depends only
  // on count and size(). The caller takes the first chunk, then any chunk no
  // worker has claimed yet: a worker the OS has not scheduled delays nothing.
  // Empty chunks are skipped. Returns when every chunk is done; the first
  // exception a chunk throws is rethrown here. Not reentrant: one call at a
  // time, and body must not call parallelFor on the same pool.
  void parallelFor(int64_t count, const std::function<void(int64_t begin, int64_t end)> &body);

private:
  void workerLoop();
  // Claims and runs chunks of the current loop until none are left.
  void runUnclaimedChunks();
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
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<int> nextChunk_{0};      // next chunk to claim; >= size_ once all are
  std::atomic<int> finishedChunks_{0}; // the loop is done when this reaches size_

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
