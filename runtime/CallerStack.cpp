#include "runtime/CallerStack.h"

#include <cerrno>
#include <exception>
#include <system_error>

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

namespace q3::runtime {
namespace {

/// What run() hands the function it enters on the other stack: makecontext
/// passes only ints, so it goes through a thread-local.
struct Entry {
  const std::function<void()> *body = nullptr;
  std::exception_ptr error;
  ucontext_t caller, callee;
};
thread_local Entry *enteringNow = nullptr;

void enter() {
  Entry &entry = *enteringNow;
  try {
    (*entry.body)();
  } catch (...) { // unwinding must not cross back to the caller's stack
    entry.error = std::current_exception();
  }
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
  if (::swapcontext(&entry.caller, &entry.callee) != 0)
    throw std::system_error(errno, std::generic_category(), "swapcontext");
  enteringNow = nullptr;
  if (entry.error)
    std::rethrow_exception(entry.error);
}

} // namespace q3::runtime
