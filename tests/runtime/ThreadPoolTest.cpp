#include "runtime/ThreadPool.h"

#include <gtest/gtest.h>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <mutex>
#include <stdexcept>
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
  auto chunks = [&] {
    std::mutex mutex;
    std::vector<std::pair<int64_t, int64_t>> seen;
    pool.parallelFor(10, [&](int64_t begin, int64_t end) {
      std::lock_guard<std::mutex> lock(mutex);
      seen.emplace_back(begin, end);
    });
    std::sort(seen.begin(), seen.end());
    return seen;
  };
  std::vector<std::pair<int64_t, int64_t>> expected{{0, 2}, {2, 5}, {5, 7}, {7, 10}};
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(chunks(), expected);
}

TEST(ThreadPool, SeveralChunksPerThread) {
  ThreadPool pool(2);
  std::mutex mutex;
  std::vector<std::pair<int64_t, int64_t>> seen;
  pool.parallelFor(
      10,
      [&](int64_t begin, int64_t end) {
        std::lock_guard<std::mutex> lock(mutex);
        seen.emplace_back(begin, end);
      },
      3);
  std::sort(seen.begin(), seen.end());
  std::vector<std::pair<int64_t, int64_t>> expected{{0, 1}, {1, 3}, {3, 5},
                                                    {5, 6}, {6, 8}, {8, 10}};
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

// A thread that runs out of its own chunks takes the others' from their ends:
// the caller's chunks are slow here, so the worker runs more than its half.
TEST(ThreadPool, IdleThreadsTakeChunksOfASlowOne) {
  ThreadPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  std::mutex mutex;
  std::vector<int64_t> byWorker, byCaller;
  pool.parallelFor(
      16,
      [&](int64_t begin, int64_t) {
        const bool onCaller = std::this_thread::get_id() == caller;
        if (onCaller)
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        std::lock_guard<std::mutex> lock(mutex);
        (onCaller ? byCaller : byWorker).push_back(begin);
      },
      8);
  EXPECT_EQ(byCaller.size() + byWorker.size(), 16u);
  EXPECT_GT(byWorker.size(), 8u);
  // The caller works through its own range from the front, in order; the
  // worker took what it took of it from the back.
  ASSERT_FALSE(byCaller.empty());
  for (size_t i = 0; i < byCaller.size(); ++i)
    EXPECT_EQ(byCaller[i], int64_t(i));
}

// Each thread runs its own contiguous range of chunks first, in order.
TEST(ThreadPool, ThreadsStartWithTheirOwnRange) {
  ThreadPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  std::mutex mutex;
  std::vector<int64_t> byWorker;
  std::atomic<bool> workerStarted{false};
  pool.parallelFor(
      8,
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
  ASSERT_GE(byWorker.size(), 4u);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_EQ(byWorker[i], int64_t(4 + i)); // chunks 4..7 are the worker's
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
