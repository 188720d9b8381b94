#include "runtime/ThreadPool.h"
#include "runtime/CpuRelax.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <system_error>
#include <thread>

#include <fmt/format.h>

namespace q3::runtime {

// How long a waiting thread polls before it sleeps. Back-to-back dispatches
// arrive well within this, so a decode step never pays a futex wake-up; an idle
// pool stops burning CPU soon after.
static constexpr auto kSpinTime = std::chrono::microseconds(200);

namespace {

int64_t nowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Raises `latest` to now.
void recordFinish(std::atomic<int64_t> &latest) {
  const int64_t now = nowNanos();
  int64_t seen = latest.load();
  while (seen < now && !latest.compare_exchange_weak(seen, now)) {
  }
}

struct WorkerStart {
  ThreadPool *pool;
  int slot;
  void (ThreadPool::*loop)(int);
};

void *startWorker(void *argument) {
  const WorkerStart start = *static_cast<WorkerStart *>(argument);
  delete static_cast<WorkerStart *>(argument);
  (start.pool->*start.loop)(start.slot);
  return nullptr;
}

/// Starts a thread running (pool->*loop)(slot), with a stack of
/// `stackBytes` (0: the system's default).
pthread_t startThread(ThreadPool *pool, int slot, void (ThreadPool::*loop)(int),
                      size_t stackBytes) {
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  int error = stackBytes > 0 ? pthread_attr_setstacksize(&attributes, stackBytes) : 0;
  pthread_t thread{};
  auto *start = new WorkerStart{pool, slot, loop};
  if (error == 0)
    error = pthread_create(&thread, &attributes, startWorker, start);
  pthread_attr_destroy(&attributes);
  if (error != 0) {
    delete start;
    throw std::system_error(error, std::generic_category());
  }
  return thread;
}

} // namespace

ThreadPool::ThreadPool(int threads, size_t stackBytes) {
  if (threads < 0)
    throw std::invalid_argument("ThreadPool: thread count must be >= 0");
  if (threads == 0)
    threads = std::max(1, int(std::thread::hardware_concurrency()));
  size_ = threads;
  workers_.reserve(size_t(threads - 1));
  try {
    if (stackBytes > 0)
      callerStack_ = std::make_unique<CallerStack>(stackBytes);
    for (int slot = 1; slot < threads; ++slot)
      workers_.push_back(startThread(this, slot, &ThreadPool::workerLoop, stackBytes));
  } catch (const std::system_error &error) {
    // The destructor does not run for a half-built pool: stop the workers
    // that did start.
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
    generation_.fetch_add(2); // stays even: a worker wakes and sees stopping_
  }
  workAvailable_.notify_all();
  for (pthread_t worker : workers_)
    pthread_join(worker, nullptr);
  workers_.clear();
}

void ThreadPool::onCallerStack(const std::function<void()> &body) {
  if (callerStack_)
    callerStack_->run(body);
  else
    body();
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

std::pair<int64_t, int64_t> ThreadPool::chunkBounds(const LoopState &loop, int index) const {
  if (loop.chunks < size_ * loop.chunksPerThread) // one index each
    return {loop.count * index / loop.chunks, loop.count * (index + 1) / loop.chunks};
  // Chunk j of the thread's range is its part from the end's distance L >> j
  // to L >> (j + 1), the last one to the end.
  const int slot = index / loop.chunksPerThread, j = index % loop.chunksPerThread;
  const int64_t rangeEnd = loop.count * (slot + 1) / size_;
  const int64_t length = rangeEnd - loop.count * slot / size_;
  const int64_t begin = rangeEnd - (length >> j);
  return {begin, j + 1 < loop.chunksPerThread ? rangeEnd - (length >> (j + 1)) : rangeEnd};
}

void ThreadPool::runChunk(LoopState &loop, int index) {
  const auto [begin, end] = chunkBounds(loop, index);
  if (begin < end && !failed_.load(std::memory_order_relaxed)) {
    try {
      (*loop.body)(begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(errorMutex_);
      if (!firstError_)
        firstError_ = std::current_exception();
      failed_.store(true);
    }
  }
  if (timing_)
    recordFinish(loop.lastFinishNanos);
  if (loop.finishedChunks.fetch_add(1) == loop.chunks - 1 && sleepingWaiters_.load() > 0) {
    // Taking the mutex orders this notify after a waiter's wait begins.
    { std::lock_guard<std::mutex> lock(sleepMutex_); }
    loopFinished_.notify_all();
  }
}

static constexpr uint64_t kLow = 0xFFFFFFFFu;

int ThreadPool::claimOwnChunk(LoopState &loop, int slot) {
  std::atomic<uint64_t> &range = loop.ranges[size_t(slot)].word;
  uint64_t word = range.load();
  for (;;) {
    const uint64_t next = word & kLow, end = word >> 32;
    if (next >= end)
      return -1;
    if (range.compare_exchange_weak(word, word + 1))
      return int(next);
  }
}

int ThreadPool::stealChunk(LoopState &loop) {
  for (;;) {
    int victim = -1;
    uint64_t most = 0, word = 0;
    for (int slot = 0; slot < size_; ++slot) {
      const uint64_t w = loop.ranges[size_t(slot)].word.load();
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
    if (loop.ranges[size_t(victim)].word.compare_exchange_strong(word,
                                                                 (end - 1) << 32 | (word & kLow)))
      return int(end - 1);
  }
}

void ThreadPool::runUnclaimedChunks(LoopState &loop, int slot) {
  for (int index = claimOwnChunk(loop, slot); index >= 0; index = claimOwnChunk(loop, slot))
    runChunk(loop, index);
  for (int index = stealChunk(loop); index >= 0; index = stealChunk(loop))
    runChunk(loop, index);
}

namespace {
thread_local int runningSlot = 0;
} // namespace

int ThreadPool::currentSlot() { return runningSlot; }

void ThreadPool::walkLoops(int slot) {
  // The caller may walk another pool's loops later as slot 0 again.
  struct SlotScope {
    int saved;
    explicit SlotScope(int slot) : saved(runningSlot) { runningSlot = slot; }
    ~SlotScope() { runningSlot = saved; }
  } scope(slot);
  for (size_t k = 0; k < loopCount_; ++k) {
    LoopState &loop = *loops_[k];
    if (slot == 0)
      runChunk(loop, 0); // no other thread claims it: see runLoops
    runUnclaimedChunks(loop, slot);
    spinThenWait(loopFinished_, sleepingWaiters_,
                 [&] { return loop.finishedChunks.load() == loop.chunks; });
  }
}

void ThreadPool::workerLoop(int slot) {
  uint64_t seen = 0;
  for (;;) {
    // An odd generation is the caller rewriting the loops: wait it out.
    uint64_t observed = 0;
    spinThenWait(workAvailable_, sleepingWorkers_, [&] {
      observed = generation_.load();
      return observed != seen && observed % 2 == 0;
    });
    seen = observed;
    if (stopping_.load())
      return;
    // Counted a walker first, then checked that the loops are still the
    // ones of `seen`: the caller turns the generation odd before it waits
    // for walkers_ to reach 0, so either it waits for us or we see the
    // change and walk nothing.
    walkers_.fetch_add(1);
    if (generation_.load() == seen)
      walkLoops(slot);
    walkers_.fetch_sub(1);
  }
}

void ThreadPool::parallelFor(int64_t count, const Body &body, int chunksPerThread) {
  if (count == 1) { // nothing to share: skip waking anyone
    onCallerStack([&] { body(0, 1); });
    return;
  }
  runLoops({Loop{count, &body, chunksPerThread}});
}

void ThreadPool::setLoops(const std::vector<Loop> &loops) {
  loopCount_ = 0;
  for (const Loop &loop : loops) {
    if (loop.count <= 0)
      continue;
    if (loopCount_ == loops_.size()) {
      loops_.push_back(std::make_unique<LoopState>());
      loops_.back()->ranges = std::make_unique<ChunkRange[]>(size_t(size_));
    }
    LoopState &state = *loops_[loopCount_++];
    state.body = loop.body;
    state.count = loop.count;
    // Halved 62 times, any range is down to its last index.
    state.chunksPerThread = std::clamp(loop.chunksPerThread, 1, 62);
    state.chunks = int(std::min<int64_t>(loop.count, int64_t(size_) * state.chunksPerThread));
    state.finishedChunks.store(0);
    state.lastFinishNanos.store(0);
    // Chunk 0 is the caller's, claimed by no one else (with fewer chunks
    // than threads it may fall in another slot's range).
    for (int slot = 0; slot < size_; ++slot) {
      const uint64_t first = uint64_t(state.chunks) * uint64_t(slot) / uint64_t(size_);
      const uint64_t end = uint64_t(state.chunks) * uint64_t(slot + 1) / uint64_t(size_);
      state.ranges[size_t(slot)].word.store(end << 32 | std::max<uint64_t>(first, 1));
    }
  }
}

void ThreadPool::runLoops(const std::vector<Loop> &loops, std::vector<double> *loopSeconds) {
  if (loopSeconds)
    loopSeconds->assign(loops.size(), 0.0);
  int64_t previousFinish = loopSeconds ? nowNanos() : 0;
  // Loop k's time: from the finish of the one before it to its own.
  auto timeLoop = [&](size_t k, int64_t finish) {
    (*loopSeconds)[k] = double(finish - previousFinish) * 1e-9;
    previousFinish = finish;
  };
  if (size_ == 1) { // nothing to share: skip waking anyone
    onCallerStack([&] {
      for (size_t k = 0; k < loops.size(); ++k) {
        if (loops[k].count <= 0)
          continue;
        (*loops[k].body)(0, loops[k].count);
        if (loopSeconds)
          timeLoop(k, nowNanos());
      }
    });
    return;
  }
  if (std::none_of(loops.begin(), loops.end(), [](const Loop &loop) { return loop.count > 0; }))
    return;
  generation_.fetch_add(1);    // odd: the loops are being rewritten
  while (walkers_.load() != 0) // a worker still leaving the last call's loops
    cpuRelax();
  try {
    setLoops(loops);
  } catch (...) { // out of memory: publish no loops, so the pool stays usable
    loopCount_ = 0;
    generation_.fetch_add(1);
    throw;
  }
  firstError_ = nullptr;
  failed_.store(false);
  timing_ = loopSeconds != nullptr;
  generation_.fetch_add(1); // even: published (seq_cst orders the stores above)
  if (sleepingWorkers_.load() > 0) {
    { std::lock_guard<std::mutex> lock(sleepMutex_); }
    workAvailable_.notify_all();
  }
  onCallerStack([this] { walkLoops(0); });
  if (firstError_)
    std::rethrow_exception(firstError_);
  if (loopSeconds) {
    // setLoops kept the non-empty loops, in order.
    size_t state = 0;
    for (size_t k = 0; k < loops.size(); ++k)
      if (loops[k].count > 0)
        timeLoop(k, loops_[state++]->lastFinishNanos.load());
  }
}

} // namespace q3::runtime
