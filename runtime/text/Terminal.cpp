#include "runtime/text/Terminal.h"

#include <algorithm>

#include <unistd.h>

namespace q3::text {

bool isTerminal(std::FILE *stream) { return ::isatty(::fileno(stream)) == 1; }

ProgressBar::ProgressBar(std::string label, std::FILE *stream, double delaySeconds)
    : label_(std::move(label)), stream_(stream), enabled_(isTerminal(stream)),
      delay_(delaySeconds), start_(std::chrono::steady_clock::now()), lastDraw_(start_) {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::update(int64_t done, int64_t total) {
  if (!enabled_ || total <= 0)
    return;
  const auto now = std::chrono::steady_clock::now();
  if (std::chrono::duration<double>(now - start_).count() < delay_)
    return;
  if (drawn_ && done < total && now - lastDraw_ < std::chrono::milliseconds(100))
    return;
  lastDraw_ = now;
  constexpr int kWidth = 30;
  const int filled = int(kWidth * double(done) / double(total));
  std::string bar(size_t(filled), '#');
  bar.resize(kWidth, '.');
  std::fprintf(stream_, "\r\033[K%s [%s] %3d%% (%lld/%lld)", label_.c_str(), bar.c_str(),
               int(100.0 * double(done) / double(total)), (long long)done, (long long)total);
  std::fflush(stream_);
  drawn_ = true;
}

void ProgressBar::finish() {
  if (drawn_) {
    std::fputs("\r\033[K", stream_);
    std::fflush(stream_);
    drawn_ = false;
  }
}

StageProgress::StageProgress(std::string title, int stages, std::FILE *stream, double delaySeconds)
    : title_(std::move(title)), stages_(stages), stream_(stream), delay_(delaySeconds),
      start_(std::chrono::steady_clock::now()) {
  if (isTerminal(stream))
    thread_ = std::thread([this] { run(); });
}

StageProgress::~StageProgress() { finish(); }

void StageProgress::stage(int index, std::string name) {
  std::lock_guard<std::mutex> lock(mutex_);
  index_ = index;
  name_ = std::move(name);
}

void StageProgress::finish() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable())
    thread_.join();
}

void StageProgress::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stop_; })) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (seconds >= delay_)
      draw(seconds);
  }
  if (drawn_) {
    std::fputs("\r\033[K", stream_);
    std::fflush(stream_);
  }
}

void StageProgress::draw(double seconds) {
  constexpr int kWidth = 20;
  const int filled = stages_ > 0 ? kWidth * std::max(index_ - 1, 0) / stages_ : 0;
  std::string bar(size_t(filled), '#');
  bar.resize(kWidth, '.');
  std::fprintf(stream_, "\r\033[K%s [%s] %d/%d %s (%.1f s)", title_.c_str(), bar.c_str(), index_,
               stages_, name_.c_str(), seconds);
  std::fflush(stream_);
  drawn_ = true;
}

} // namespace q3::text
