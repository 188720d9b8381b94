// Terminal output for the command-line tools: whether a stream is a
// terminal, and a progress bar that shows itself only on a terminal and only
// once the work has taken a while (so short runs and logs stay clean).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace q3::text {

bool isTerminal(std::FILE *stream);

class ProgressBar {
public:
  /// Draws on `stream` when it is a terminal, after `delaySeconds`.
  explicit ProgressBar(std::string label, std::FILE *stream = stderr, double delaySeconds = 1.0);
  ~ProgressBar();
  /// Redraws (at most ten times a second) with `done` of `total`.
  void update(int64_t done, int64_t total);
  /// Erases the bar.
  void finish();

private:
  std::string label_;
  std::FILE *stream_;
  bool enabled_;
  double delay_;
  std::chrono::steady_clock::time_point start_, lastDraw_;
  bool drawn_ = false;
};

/// A progress bar over the named stages of one long call (q3c compile: the
/// kernels stage is one LLVM run). A thread redraws it with the elapsed time,
/// so it moves while a stage runs; on a terminal only, after `delaySeconds`.
class StageProgress {
public:
  StageProgress(std::string title, int stages, std::FILE *stream = stderr,
                double delaySeconds = 1.0);
  ~StageProgress();
  /// Starts stage `index` (1-based) named `name`.
  void stage(int index, std::string name);
  /// Stops and erases the bar.
  void finish();

private:
  void run();
  void draw(double seconds);
  std::string title_;
  int stages_;
  std::FILE *stream_;
  double delay_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::thread thread_;
  int index_ = 0;
  std::string name_;
  bool stop_ = false, drawn_ = false;
};

} // namespace q3::text
