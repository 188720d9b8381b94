#include "runtime/ThreadPool.h"

#include <gtest/gtest.h>

#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace q3::runtime {
namespace {

// Runs parallelFor and returns how many times each index was visited.
std::vector<int> visitCounts(ThreadPool &pool, int64_t count, int chunksPerThread = 1) {
  std::vector<std::atomic<int>> visits(static_cast<size_t>(count));
  pool.parallelFor(
      count,
      [&](int64_t begin, int64_t end) {
        EXPECT_LT(begin, end);
        for (int64_t i = begin; i < end; ++i)
          visits[size_t(i)].fetch_add(1);
      },
      chunksPerThread);
  std::vector<int> result;
  for (auto &v : visits)
    result.push_back(v.load());
  return result;
}

// The [begin, end) of every chunk parallelFor runs, sorted.
std::vector<std::pair<int64_t, int64_t>> sortedChunks(ThreadPool &pool, int64_t count,
                                                      int chunksPerThread = 1) {
  std::mutex mutex;
  std::vector<std::pair<int64_t, int64_t>> seen;
  pool.parallelFor(
      count,
      [&](int64_t begin, int64_t end) {
        std::lock_guard<std::mutex> lock(mutex);
        seen.emplace_back(begin, end);
      },
      chunksPerThread);
  std::sort(seen.begin(), seen.end());
  return seen;
}

TEST(ThreadPool, EveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 4, 7}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t count : {1, 2, 5, 64, 1000, 12345})
      EXPECT_EQ(visitCounts(pool, count), std::vector<int>(size_t(count), 1))
          << threads << " threads, count " << count;
  }
}

TEST(ThreadPool, CountBelowThreadCount) {
  ThreadPool pool(8);
  for (int64_t count : {1, 2, 3, 7})
    EXPECT_EQ(visitCounts(pool, count), std::vector<int>(size_t(count), 1));
}

TEST(ThreadPool, ZeroCountDoesNotCallBody) {
  ThreadPool pool(3);
  bool called = false;
  pool.parallelFor(0, [&](int64_t, int64_t) { called = true; });
  EXPECT_FALSE(called);
}

TEST(ThreadPool, ChunksAreContiguousAndDeterministic) {
  ThreadPool pool(4);
  std::vector<std::pair<int64_t, int64_t>> expected{{0, 2}, {2, 5}, {5, 7}, {7, 10}};
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(sortedChunks(pool, 10), expected);
}

TEST(ThreadPool, SeveralChunksPerThread) {
  ThreadPool pool(2);
  const std::vector<std::pair<int64_t, int64_t>> seen = sortedChunks(pool, 10, 3);
  // Each thread's five indices as chunks that halve: 3 (5 - 5/2), 1, 1.
  std::vector<std::pair<int64_t, int64_t>> expected{{0, 3}, {3, 4}, {4, 5},
                                                    {5, 8}, {8, 9}, {9, 10}};
  EXPECT_EQ(seen, expected);
  // Any chunk count, more chunks than indices, and loops that alternate
  // chunk counts (a thread still claiming in one loop must not take a chunk
  // of the next twice).
  for (int chunks : {1, 2, 5, 8, 64})
    for (int64_t count : {1, 3, 16, 100, 1001})
      EXPECT_EQ(visitCounts(pool, count, chunks), std::vector<int>(size_t(count), 1))
          << chunks << " chunks per thread, count " << count;
  std::vector<int64_t> data(97, 0);
  for (int call = 0; call < 20000; ++call)
    pool.parallelFor(
        int64_t(data.size()),
        [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i)
            data[size_t(i)] += 1;
        },
        call % 3 == 0 ? 1 : 8);
  EXPECT_EQ(data, std::vector<int64_t>(97, 20000));
}

TEST(ThreadPool, OneThreadRunsInline) {
  ThreadPool pool(1);
  std::thread::id caller = std::this_thread::get_id();
  int calls = 0;
  pool.parallelFor(100, [&](int64_t begin, int64_t end) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 100);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
}

// A thread's chunks halve in size, so the ones a faster thread steals from
// the end of a slower one's range are small: the threads finish close
// together.
TEST(ThreadPool, ChunksHalveInSize) {
  ThreadPool pool(2);
  const std::vector<std::pair<int64_t, int64_t>> seen = sortedChunks(pool, 64, 4);
  std::vector<std::pair<int64_t, int64_t>> expected{{0, 16},  {16, 24}, {24, 28}, {28, 32},
                                                    {32, 48}, {48, 56}, {56, 60}, {60, 64}};
  EXPECT_EQ(seen, expected);
}

// A thread that runs out of its own chunks takes the others' from their ends:
// the caller's chunks are slow here, so the worker runs more than its half.
TEST(ThreadPool, IdleThreadsTakeChunksOfASlowOne) {
  ThreadPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  std::mutex mutex;
  std::vector<int64_t> byWorker, byCaller; // the first index of each chunk
  int64_t indicesByWorker = 0;
  pool.parallelFor(
      64,
      [&](int64_t begin, int64_t end) {
        const bool onCaller = std::this_thread::get_id() == caller;
        if (onCaller)
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        std::lock_guard<std::mutex> lock(mutex);
        (onCaller ? byCaller : byWorker).push_back(begin);
        if (!onCaller)
          indicesByWorker += end - begin;
      },
      4);
  EXPECT_EQ(byCaller.size() + byWorker.size(), 8u);
  EXPECT_GT(indicesByWorker, 32);
  // The caller works through its own range from the front, in order; the
  // worker took what it took of it from the back.
  ASSERT_FALSE(byCaller.empty());
  const std::vector<int64_t> callerStarts{0, 16, 24, 28};
  for (size_t i = 0; i < byCaller.size(); ++i)
    EXPECT_EQ(byCaller[i], callerStarts[i]);
}

// Each thread runs its own contiguous range of chunks first, in order.
TEST(ThreadPool, ThreadsStartWithTheirOwnRange) {
  ThreadPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  std::mutex mutex;
  std::vector<int64_t> byWorker;
  std::atomic<bool> workerStarted{false};
  pool.parallelFor(
      16,
      [&](int64_t begin, int64_t) {
        if (std::this_thread::get_id() == caller) {
          // Hold the caller in chunk 0 until the worker has begun, so the
          // worker's first claim is of its own range, not a steal.
          while (begin == 0 && !workerStarted.load())
            std::this_thread::yield();
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          return;
        }
        workerStarted.store(true);
        std::lock_guard<std::mutex> lock(mutex);
        byWorker.push_back(begin);
      },
      4);
  // Indices 8..15 are the worker's, as chunks of 4, 2, 1 and 1.
  ASSERT_GE(byWorker.size(), 4u);
  const std::vector<int64_t> workerStarts{8, 12, 14, 15};
  for (size_t i = 0; i < 4; ++i)
    EXPECT_EQ(byWorker[i], workerStarts[i]);
}

// Later chunks go to whichever thread claims them first, the caller included.
TEST(ThreadPool, CallerRunsTheFirstChunk) {
  ThreadPool pool(2);
  std::thread::id caller = std::this_thread::get_id();
  for (int call = 0; call < 100; ++call)
    pool.parallelFor(2, [&](int64_t begin, int64_t) {
      if (begin == 0) {
        EXPECT_EQ(std::this_thread::get_id(), caller);
      }
    });
}

// runLoops: a loop starts only when the one before it has finished, so it
// may read what any thread wrote in it; here each loop reads the previous
// one's results in reverse, so most reads cross to the other threads' chunks.
TEST(ThreadPool, LoopsSeeWhatEarlierLoopsWrote) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    const int64_t n = 101;
    std::vector<int64_t> a(n), b(n), c(n);
    const ThreadPool::Body fillA = [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        a[size_t(i)] += i;
    };
    const ThreadPool::Body reverseIntoB = [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        b[size_t(i)] = a[size_t(n - 1 - i)];
    };
    const ThreadPool::Body sumIntoC = [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        c[size_t(i)] = b[size_t(n - 1 - i)] + a[size_t(i)];
    };
    for (int call = 1; call <= 3000; ++call) {
      pool.runLoops({{n, &fillA, call % 4 + 1}, {n, &reverseIntoB, 1}, {n, &sumIntoC, 8}});
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(c[size_t(i)], 2 * call * i) << threads << " threads, call " << call;
    }
  }
}

// A loop long enough that the waiting threads fall asleep, then more loops:
// the threads that slept are woken for the next one, and nothing hangs.
TEST(ThreadPool, LoopsAfterALongOneDoNotHang) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  const ThreadPool::Body slow = [&](int64_t begin, int64_t) {
    if (begin == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(5)); // past the spin window
  };
  const ThreadPool::Body add = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      sum.fetch_add(i);
  };
  for (int call = 0; call < 5; ++call)
    pool.runLoops({{3, &slow, 1}, {1000, &add, 4}, {3, &slow, 1}, {1000, &add, 4}});
  EXPECT_EQ(sum.load(), 5 * 2 * (999 * 1000 / 2));
}

// --profile's dispatch times: each loop's time is from the finish of the
// loop before it to its own, so a loop whose slowest chunk sleeps takes at
// least that long, the quick ones between take less, an empty loop takes
// 0, and together they take no longer than the call. With one thread the
// loops run inline and are timed the same way.
TEST(ThreadPool, RunLoopsTimesEachLoopInTheSequence) {
  using namespace std::chrono;
  const ThreadPool::Body sleepsOnIndexZero = [](int64_t begin, int64_t) {
    if (begin == 0)
      std::this_thread::sleep_for(milliseconds(20));
  };
  const ThreadPool::Body quick = [](int64_t, int64_t) {};
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    std::vector<double> seconds{7.0}; // replaced, not appended to
    const auto start = steady_clock::now();
    pool.runLoops(
        {{6, &sleepsOnIndexZero, 2}, {100, &quick, 4}, {0, &quick, 1}, {3, &sleepsOnIndexZero, 1}},
        &seconds);
    const double wall = duration<double>(steady_clock::now() - start).count();
    ASSERT_EQ(seconds.size(), 4u) << threads << " threads";
    EXPECT_GE(seconds[0], 0.020) << threads << " threads";
    EXPECT_LT(seconds[1], 0.020) << threads << " threads";
    EXPECT_EQ(seconds[2], 0.0) << threads << " threads";
    EXPECT_GE(seconds[3], 0.020) << threads << " threads";
    EXPECT_LE(seconds[0] + seconds[1] + seconds[2] + seconds[3], wall) << threads << " threads";
    pool.runLoops({{100, &quick, 4}}); // untimed afterwards
  }
}

// After a chunk throws, the rest of its loop and the later loops are
// skipped (they would read what it failed to write); the caller gets the
// exception, and the pool runs the next call whole.
TEST(ThreadPool, AThrowingLoopStopsTheLoopsAfterIt) {
  ThreadPool pool(2);
  std::atomic<int> laterChunks{0};
  const ThreadPool::Body throws = [](int64_t begin, int64_t) {
    if (begin == 0)
      throw std::runtime_error("loop 0");
  };
  const ThreadPool::Body later = [&](int64_t, int64_t) { laterChunks.fetch_add(1); };
  EXPECT_THROW(pool.runLoops({{2, &throws, 1}, {100, &later, 4}}), std::runtime_error);
  EXPECT_EQ(laterChunks.load(), 0);
  pool.runLoops({{100, &later, 4}});
  EXPECT_EQ(laterChunks.load(), 8);
  pool.runLoops({}); // nothing to run
  EXPECT_EQ(visitCounts(pool, 100), std::vector<int>(100, 1));
}

TEST(ThreadPool, ZeroMeansHardwareConcurrency) {
  ThreadPool pool(0);
  EXPECT_EQ(pool.size(), std::max(1, int(std::thread::hardware_concurrency())));
  EXPECT_THROW(ThreadPool(-1), std::invalid_argument);
}

TEST(ThreadPool, ExceptionsReachTheCaller) {
  ThreadPool pool(3);
  // Thrown by a worker's chunk...
  EXPECT_THROW(pool.parallelFor(3,
                                [](int64_t begin, int64_t) {
                                  if (begin == 2)
                                    throw std::runtime_error("worker");
                                }),
               std::runtime_error);
  // ...and by the caller's; the pool stays usable afterwards.
  EXPECT_THROW(pool.parallelFor(3,
                                [](int64_t begin, int64_t) {
                                  if (begin == 0)
                                    throw std::logic_error("caller");
                                }),
               std::logic_error);
  EXPECT_EQ(visitCounts(pool, 100), std::vector<int>(100, 1));
}

TEST(ThreadPool, ManyConsecutiveCalls) {
  ThreadPool pool(3);
  std::vector<int64_t> data(300, 0);
  for (int call = 0; call < 20000; ++call)
    pool.parallelFor(int64_t(data.size()), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        data[size_t(i)] += 1;
    });
  EXPECT_EQ(data, std::vector<int64_t>(300, 20000));
}

TEST(ThreadPool, WakesWorkersThatFellAsleep) {
  ThreadPool pool(3);
  for (int call = 0; call < 3; ++call) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5)); // past the spin window
    EXPECT_EQ(visitCounts(pool, 50), std::vector<int>(50, 1));
  }
}

// Puts `bytes` on the stack, touching it from the top down, so a stack too
// small faults at its guard page rather than writing past it.
[[gnu::noinline]] int useStack(size_t bytes) {
  std::vector<char> unused; // keeps the frame from being merged into the caller
  char *area = static_cast<char *>(__builtin_alloca(bytes));
  for (size_t offset = bytes; offset >= 4096; offset -= 4096)
    reinterpret_cast<volatile char *>(area)[offset - 1] = 1;
  return reinterpret_cast<volatile char *>(area)[bytes - 1] + int(unused.size());
}

// Runs `body` on a new thread with a stack of `stackBytes` and waits for it.
void onThreadWithStack(size_t stackBytes, const std::function<void()> &body) {
  pthread_attr_t attributes;
  ASSERT_EQ(pthread_attr_init(&attributes), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attributes, stackBytes), 0);
  pthread_t thread;
  auto run = [](void *argument) -> void * {
    (*static_cast<const std::function<void()> *>(argument))();
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&thread, &attributes, run, const_cast<std::function<void()> *>(&body)),
            0);
  pthread_attr_destroy(&attributes);
  pthread_join(thread, nullptr);
}

// Kernels keep their scratch on the stack: a pool given a stack size runs
// every chunk, the caller's included, on a stack that size even when the
// calling thread's own is far smaller (ulimit -s, an embedding program's
// thread). Before, the caller's share ran on the caller's stack and a
// 1024-token prefill crashed q3run under `ulimit -s 512`.
TEST(ThreadPool, LoopsRunOnTheStackAskedForWhateverTheCallerHas) {
  constexpr size_t kCallerStack = 128 << 10, kLoopStack = 4 << 20, kUsed = 2 << 20;
  for (int threads : {1, 2, 3}) {
    std::atomic<int> chunks{0};
    onThreadWithStack(kCallerStack, [&] {
      ThreadPool pool(threads, kLoopStack);
      const ThreadPool::Body body = [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
          chunks.fetch_add(useStack(kUsed));
      };
      pool.parallelFor(1, body);           // the caller alone, no wake-up
      pool.parallelFor(threads * 4, body); // every thread
      pool.runLoops({{5, &body, 2}, {3, &body, 1}});
    });
    EXPECT_EQ(chunks.load(), 1 + threads * 4 + 8) << threads << " threads";
  }
}

TEST(ThreadPool, ExceptionsOfTheCallersShareOnItsOwnStackReachTheCaller) {
  for (int threads : {1, 2}) {
    ThreadPool pool(threads, 1 << 20);
    EXPECT_THROW(pool.parallelFor(1, [](int64_t, int64_t) { throw std::runtime_error("one"); }),
                 std::runtime_error);
    EXPECT_THROW(pool.parallelFor(8,
                                  [](int64_t begin, int64_t) {
                                    if (begin == 0)
                                      throw std::logic_error("x");
                                  }),
                 std::logic_error);
    std::atomic<int> after{0};
    pool.parallelFor(8, [&](int64_t begin, int64_t end) { after.fetch_add(int(end - begin)); });
    EXPECT_EQ(after.load(), 8); // still usable
  }
}

// What outgrows the pool's stack faults at its guard page; it never writes
// into whatever mapping lies below.
TEST(ThreadPoolDeathTest, OutgrowingThePoolsStackFaults) {
  EXPECT_EXIT(
      {
        ThreadPool pool(1, 256 << 10);
        pool.parallelFor(1, [](int64_t, int64_t) { useStack(1 << 20); });
        ::_exit(0);
      },
      ::testing::KilledBySignal(SIGSEGV), "");
}

// Under an address-space limit only a few 8 MiB thread stacks fit: the pool
// must say so and stop the workers it started (before, the half-built
// pool's std::thread objects ended the process, or it hung).
TEST(ThreadPoolDeathTest, AWorkerThatCannotStartIsAnErrorNotAHang) {
  EXPECT_EXIT(
      {
        uint64_t vmKb = 0;
        std::ifstream status("/proc/self/status");
        for (std::string line; std::getline(status, line);)
          if (line.rfind("VmSize:", 0) == 0)
            vmKb = std::stoull(line.substr(7));
        struct rlimit limit {};
        limit.rlim_cur = limit.rlim_max = (vmKb + 64 * 1024) * 1024;
        if (vmKb == 0 || ::setrlimit(RLIMIT_AS, &limit) != 0)
          ::_exit(3);
        try {
          ThreadPool pool(3000);
        } catch (const ThreadStartError &error) {
          std::fprintf(stderr, "%s\n", error.what());
          ::_exit(0);
        }
        ::_exit(2);
      },
      ::testing::ExitedWithCode(0),
      "^cannot start thread [0-9]+ of 3000: Resource temporarily unavailable \\(the system "
      "limits threads or memory; ask for fewer threads\\)\n$");
}

} // namespace
} // namespace q3::runtime
