#include "runtime/CallerStack.h"

#include <cerrno>
#include <exception>
#include <system_error>

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

// Sanitizers track one stack per thread; a switch they are not told of
// leaves ASan unpoisoning the wrong range when an exception unwinds ("false
// positive error reports may follow") and TSan's shadow call stack wrong.
// Clang's sanitizers only: the TSan switch back must run in a function TSan
// does not instrument (below), which only Clang can ask for.
#if defined(__clang__) && defined(__has_feature)
#if __has_feature(address_sanitizer)
#define Q3_ASAN_FIBERS 1
#include <sanitizer/common_interface_defs.h>
#endif
#if __has_feature(thread_sanitizer)
#define Q3_TSAN_FIBERS 1
#include <sanitizer/tsan_interface.h>
#endif
#endif
#if defined(Q3_ASAN_FIBERS) || defined(Q3_TSAN_FIBERS)
// TSan pairs every instrumented function's entry and exit on the current
// fiber's shadow stack; the function that switches back to the caller's
// fiber and then returns must have neither.
#define Q3_UNINSTRUMENTED __attribute__((disable_sanitizer_instrumentation))
#else
#define Q3_UNINSTRUMENTED
#endif

namespace q3::runtime {
namespace {

/// Tells the sanitizers built in (none in a plain build) about the switches
/// run() makes: to the stack, back when the body returns, and the return's
/// arrival on the caller's stack.
struct SanitizerSwitches {
#ifdef Q3_ASAN_FIBERS
  void *callerFakeStack = nullptr;
  const void *callerBottom = nullptr;
  size_t callerSize = 0;
#endif
#ifdef Q3_TSAN_FIBERS
  void *callerFiber = nullptr, *stackFiber = nullptr;
#endif

  [[gnu::always_inline]] void leaveCaller([[maybe_unused]] const void *bottom,
                                          [[maybe_unused]] size_t size) {
#ifdef Q3_ASAN_FIBERS
    __sanitizer_start_switch_fiber(&callerFakeStack, bottom, size);
#endif
#ifdef Q3_TSAN_FIBERS
    callerFiber = __tsan_get_current_fiber();
    stackFiber = __tsan_create_fiber(0);
    __tsan_switch_to_fiber(stackFiber, 0);
#endif
  }
  [[gnu::always_inline]] void arriveOnStack() {
#ifdef Q3_ASAN_FIBERS
    __sanitizer_finish_switch_fiber(nullptr, &callerBottom, &callerSize);
#endif
  }
  // The body's frames are gone for good: each run() starts afresh.
  [[gnu::always_inline]] void leaveStack() {
#ifdef Q3_ASAN_FIBERS
    __sanitizer_start_switch_fiber(nullptr, callerBottom, callerSize);
#endif
#ifdef Q3_TSAN_FIBERS
    __tsan_switch_to_fiber(callerFiber, 0);
#endif
  }
  [[gnu::always_inline]] void arriveOnCaller() {
#ifdef Q3_ASAN_FIBERS
    __sanitizer_finish_switch_fiber(callerFakeStack, nullptr, nullptr);
#endif
#ifdef Q3_TSAN_FIBERS
    __tsan_destroy_fiber(stackFiber);
#endif
  }
};

/// What run() hands the function it enters on the other stack: makecontext
/// passes only ints, so it goes through a thread-local.
struct Entry {
  const std::function<void()> *body = nullptr;
  std::exception_ptr error;
  ucontext_t caller, callee;
  SanitizerSwitches sanitizers;
};
thread_local Entry *enteringNow = nullptr;

void runBody(Entry &entry) {
  try {
    (*entry.body)();
  } catch (...) { // unwinding must not cross back to the caller's stack
    entry.error = std::current_exception();
  }
}

Q3_UNINSTRUMENTED void enter() {
  Entry &entry = *enteringNow;
  entry.sanitizers.arriveOnStack();
  runBody(entry);
  entry.sanitizers.leaveStack();
  // Returning resumes entry.caller (uc_link).
}

size_t pageSize() { return size_t(::sysconf(_SC_PAGESIZE)); }

} // namespace

CallerStack::CallerStack(size_t bytes) {
  const size_t page = pageSize();
  bytes_ = (bytes + page - 1) / page * page;
  mappingBytes_ = bytes_ + page;
  void *mapping = ::mmap(nullptr, mappingBytes_, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (mapping == MAP_FAILED)
    throw std::system_error(errno, std::generic_category(), "mmap of a thread stack");
  mapping_ = mapping;
  // The lowest page faults instead of letting an overflow write below.
  if (::mprotect(mapping_, page, PROT_NONE) != 0) {
    const int error = errno;
    ::munmap(mapping_, mappingBytes_);
    throw std::system_error(error, std::generic_category(), "mprotect of a stack guard page");
  }
}

CallerStack::~CallerStack() { ::munmap(mapping_, mappingBytes_); }

void CallerStack::run(const std::function<void()> &body) {
  Entry entry;
  entry.body = &body;
  if (::getcontext(&entry.callee) != 0)
    throw std::system_error(errno, std::generic_category(), "getcontext");
  entry.callee.uc_stack.ss_sp = static_cast<char *>(mapping_) + (mappingBytes_ - bytes_);
  entry.callee.uc_stack.ss_size = bytes_;
  entry.callee.uc_link = &entry.caller;
  ::makecontext(&entry.callee, enter, 0);
  enteringNow = &entry;
  entry.sanitizers.leaveCaller(entry.callee.uc_stack.ss_sp, bytes_);
  if (::swapcontext(&entry.caller, &entry.callee) != 0)
    throw std::system_error(errno, std::generic_category(), "swapcontext");
  entry.sanitizers.arriveOnCaller();
  enteringNow = nullptr;
  if (entry.error)
    std::rethrow_exception(entry.error);
}

} // namespace q3::runtime
