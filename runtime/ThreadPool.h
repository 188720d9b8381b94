// A fixed set of persistent worker threads that run parallel loops: one at
// a time, or a sequence of dependent ones in one wake-up. Built for many
// short dispatches (a decode step issues ~170 of 50-500 µs each), so waking
// the workers must cost microseconds, not a thread start.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <utility>
#include <vector>

#include <pthread.h>

#include "runtime/CallerStack.h"

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
  //
  // With `stackBytes` > 0 every thread runs the loops on a stack of that
  // many bytes: the workers are started with it, and the caller runs its
  // share on one the pool owns (CallerStack), so what the loops may put on
  // the stack does not depend on the calling thread or `ulimit -s`. With 0
  // the workers get the system's default stack and the caller its own.
  explicit ThreadPool(int threads, size_t stackBytes = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  int size() const { return size_; }

  using Body = std::function<void(int64_t begin, int64_t end)>;

  // Runs body(begin, end) over [0, count). Thread t (the caller is 0) owns
  // the range [count*t/size(), count*(t+1)/size()), cut into
  // chunksPerThread chunks that halve in size: the first is half the range,
  // the next a quarter, ..., the last two equal. It runs them in order, so
  // it streams one contiguous range; a thread whose own chunks are all
  // claimed takes the last unclaimed chunk of the thread with the most left,
  // which is a small one. So a thread the OS has not scheduled delays
  // nothing, a slower thread does less, and the threads finish close
  // together (even chunks left a fast thread idle for up to one chunk). With
  // fewer indices than size() * chunksPerThread, each chunk is one index.
  // The split depends only on count, size() and chunksPerThread. Chunk 0 is
  // the caller's. Empty chunks are skipped. Returns when every chunk is
  // done; the first exception a chunk throws is rethrown here. Not
  // reentrant: one call at a time, and body must not call the pool.
  void parallelFor(int64_t count, const Body &body, int chunksPerThread = 1);

  // One loop of runLoops(): parallelFor's arguments.
  struct Loop {
    int64_t count = 0;
    const Body *body = nullptr;
    int chunksPerThread = 1;
  };
  // Runs the loops in order, each as parallelFor would, in one wake-up of
  // the workers: a thread starts on loop k+1 once every chunk of loop k has
  // finished, so loop k+1 may read what loop k wrote. Between two loops
  // the threads pass one counter instead of returning to the caller and
  // being woken again (a decode step's ~170 dispatches each paid that, ~3
  // µs). After a chunk throws, the remaining chunks and loops are skipped
  // and the first exception is rethrown.
  //
  // With `loopSeconds`, it is also resized to loops.size() and given each
  // loop's time: from the moment the loop before it finished (the first
  // loop: from this call) to the moment its own last chunk finished; an
  // empty loop takes 0. That is what each loop costs in the sequence as it
  // runs, waits for the slowest thread included: what --profile reports,
  // without returning to the caller between loops (a call per loop added
  // ~4-12 µs to each on the AMD family 26 VM). Each chunk then reads the
  // clock once.
  void runLoops(const std::vector<Loop> &loops, std::vector<double> *loopSeconds = nullptr);

  // The slot of the thread running a body (0 is the caller, 1 .. size()-1
  // the workers), whatever slot's chunk it runs: what a body uses to pick
  // memory of its own thread (the kernels' thread scratch). 0 outside the
  // pools' loops.
  static int currentSlot();

private:
  struct LoopState;
  void workerLoop(int slot);
  // Copies `loops` (the non-empty ones) into loops_ and resets their chunks.
  void setLoops(const std::vector<Loop> &loops);
  // Wakes every worker to exit and joins it.
  void stopWorkers();
  // Runs the current loops on this thread: in each, its own chunks and then
  // the others', then it waits for the loop's last chunk to finish.
  void walkLoops(int slot);
  // Claims and runs chunks of `loop` until none are left.
  void runUnclaimedChunks(LoopState &loop, int slot);
  // The next chunk of `slot`'s own range in `loop`, or -1 when it is
  // exhausted.
  int claimOwnChunk(LoopState &loop, int slot);
  // The last unclaimed chunk of `loop`'s slot with the most left, or -1.
  int stealChunk(LoopState &loop);
  // The indices [begin, end) of chunk `index` of `loop`.
  std::pair<int64_t, int64_t> chunkBounds(const LoopState &loop, int index) const;
  // Runs one chunk (unless a chunk threw), records its exception, and counts
  // it finished.
  void runChunk(LoopState &loop, int index);
  // Spins briefly, then sleeps on `cv` until `ready()` holds.
  template <typename Ready>
  void spinThenWait(std::condition_variable &cv, std::atomic<int> &sleepers, Ready ready);

  // Runs `body` on the caller's stack, or on callerStack_ where there is one.
  void onCallerStack(const std::function<void()> &body);

  int size_;
  std::vector<pthread_t> workers_;
  std::unique_ptr<CallerStack> callerStack_;

  // Per thread, the unclaimed part of its chunks of one loop: the next (low
  // 32 bits) and the end (high 32 bits) in one word, so the owner's claim
  // from the front and a thief's from the back are each one
  // compare-and-swap and never take the same chunk. One cache line each:
  // owners claim without contention.
  struct alignas(64) ChunkRange {
    std::atomic<uint64_t> word{0};
  };
  struct alignas(64) LoopState {
    const Body *body = nullptr;
    int64_t count = 0;
    int chunks = 0;
    int chunksPerThread = 1;
    std::unique_ptr<ChunkRange[]> ranges; // one per thread
    // On its own line: every thread polls it while the loop's last chunk runs.
    alignas(64) std::atomic<int> finishedChunks{0};
    // While timing_: the latest steady_clock nanoseconds at which a chunk
    // finished, stored before the chunk counts itself finished.
    std::atomic<int64_t> lastFinishNanos{0};
  };
  // The current loops, published to the workers by making generation_ even
  // again. They are rewritten only while no worker walks them (walkers_ is
  // 0 after generation_ turned odd).
  std::vector<std::unique_ptr<LoopState>> loops_;
  size_t loopCount_ = 0;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> walkers_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> failed_{false};
  bool timing_ = false; // written only while no worker walks the loops

  std::mutex errorMutex_;
  std::exception_ptr firstError_;

  // Sleeping is the slow path: a waker takes the mutex only when someone sleeps.
  std::mutex sleepMutex_;
  std::condition_variable workAvailable_;
  std::condition_variable loopFinished_;
  std::atomic<int> sleepingWorkers_{0};
  std::atomic<int> sleepingWaiters_{0};
};

} // namespace q3::runtime
