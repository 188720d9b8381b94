#include "runtime/FatalSignals.h"

#include "runtime/AtomicFile.h"
#include "runtime/LoadError.h"

#include <array>
#include <atomic>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>

#include <unistd.h>

namespace q3::runtime {
namespace {

/// One mapping; immutable once published, so the handler reads it lock-free.
struct Mapping {
  uintptr_t begin, end;
  std::string path; // printable(), so the message stays one line
};

// Enough for a checkpoint of a few hundred shards plus the artifact.
constexpr int kMappings = 1024;
std::array<std::atomic<Mapping *>, kMappings> mappings{};

const char *toolName = "q3";
struct sigaction previousBus, previousInterrupt[3];
constexpr int kInterruptSignals[3] = {SIGINT, SIGTERM, SIGHUP};

void writeText(const char *text) {
  size_t size = std::strlen(text);
  while (size > 0) {
    ssize_t n = ::write(STDERR_FILENO, text, size);
    if (n <= 0)
      return;
    text += n;
    size -= size_t(n);
  }
}

void writeNumber(uint64_t value) {
  char digits[24];
  char *end = digits + sizeof digits - 1, *p = end;
  *p = '\0';
  do {
    *--p = char('0' + value % 10);
    value /= 10;
  } while (value != 0);
  writeText(p);
}

/// Calls the handler that was installed before ours, or the default action.
void passOn(int signal, siginfo_t *info, void *context, const struct sigaction &previous) {
  if ((previous.sa_flags & SA_SIGINFO) && previous.sa_sigaction) {
    previous.sa_sigaction(signal, info, context);
    return;
  }
  if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
    previous.sa_handler(signal);
    return;
  }
  // The default action: a faulting read runs again and dumps core as usual;
  // a signal sent by a process (si_code <= 0) is raised again.
  std::signal(signal, SIG_DFL);
  if (signal != SIGBUS || info == nullptr || info->si_code <= 0)
    ::raise(signal);
}

void onBusError(int signal, siginfo_t *info, void *context) {
  const auto address = reinterpret_cast<uintptr_t>(info->si_addr);
  for (const std::atomic<Mapping *> &slot : mappings) {
    const Mapping *mapping = slot.load(std::memory_order_acquire);
    if (!mapping || address < mapping->begin || address >= mapping->end)
      continue;
    removeTemporaryOutputs();
    writeText(toolName);
    writeText(": error: ");
    writeText(mapping->path.c_str());
    writeText(": cannot read byte ");
    writeNumber(address - mapping->begin);
    writeText(" of the mapped file: it was truncated, or its storage failed, while in use\n");
    ::_exit(1);
  }
  passOn(signal, info, context, previousBus);
}

void onInterrupt(int signal, siginfo_t *info, void *context) {
  removeTemporaryOutputs();
  for (int i = 0; i < 3; ++i)
    if (kInterruptSignals[i] == signal) {
      // Ours stays installed only until the first interrupt.
      ::sigaction(signal, &previousInterrupt[i], nullptr);
      passOn(signal, info, context, previousInterrupt[i]);
    }
}

// An exception nobody caught (one thrown on a thread of the tool's own, or
// through a noexcept function) would abort with "terminate called ...".
[[noreturn]] void onTerminate() {
  removeTemporaryOutputs();
  writeText(toolName);
  writeText(": error: internal error: ");
  const char *what = "an unknown exception";
  try {
    if (std::exception_ptr current = std::current_exception())
      std::rethrow_exception(current);
    what = "std::terminate without an exception";
  } catch (const std::exception &error) {
    writeText(printable(error.what()).c_str());
    writeText("\n");
    ::_exit(1);
  } catch (...) {
  }
  writeText(what);
  writeText("\n");
  ::_exit(1);
}

} // namespace

void installFatalSignalHandlers(const char *tool) {
  toolName = tool;
  // A file-size limit (ulimit -f) then fails the write with EFBIG, which
  // AtomicFile reports as one line, instead of killing the process.
  std::signal(SIGXFSZ, SIG_IGN);
  std::set_terminate(onTerminate);
  struct sigaction action {};
  action.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&action.sa_mask);
  action.sa_sigaction = onBusError;
  ::sigaction(SIGBUS, &action, &previousBus);
  action.sa_flags = SA_SIGINFO;
  action.sa_sigaction = onInterrupt;
  for (int i = 0; i < 3; ++i) {
    ::sigaction(kInterruptSignals[i], nullptr, &previousInterrupt[i]);
    if (previousInterrupt[i].sa_handler == SIG_IGN) // e.g. nohup: keep ignoring
      continue;
    ::sigaction(kInterruptSignals[i], &action, &previousInterrupt[i]);
  }
}

int registerMapping(const void *begin, size_t size, const std::string &path) {
  auto mapping = std::make_unique<Mapping>(
      Mapping{reinterpret_cast<uintptr_t>(begin), reinterpret_cast<uintptr_t>(begin) + size,
              printable(path)});
  for (int i = 0; i < kMappings; ++i) {
    Mapping *expected = nullptr;
    if (mappings[size_t(i)].compare_exchange_strong(expected, mapping.get(),
                                                    std::memory_order_acq_rel)) {
      mapping.release();
      return i;
    }
  }
  return -1;
}

void unregisterMapping(int handle) {
  if (handle < 0 || handle >= kMappings)
    return;
  // Only faults inside a live mapping look the record up, and the caller
  // unmaps after this, so nothing reads the record once it is gone.
  delete mappings[size_t(handle)].exchange(nullptr, std::memory_order_acq_rel);
}

} // namespace q3::runtime
