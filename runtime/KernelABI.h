// The calling convention of compiled kernels: the one ABI between the code
// the compiler generates and the runtime that runs it.
//
// Every kernel of a CPU executable exports
//
//   void q3_kernel_<name>(void *const *buffers, const int64_t *bufferBytes,
//                         const int64_t *scalars, int64_t workgroupBegin,
//                         int64_t workgroupEnd);
//
// and computes workgroups [workgroupBegin, workgroupEnd) of its grid, so the
// runtime can split one dispatch over its threads. `buffers` are the kernel's
// tensor arguments in order, then its results; `bufferBytes` their sizes.
// `scalars[0]` is the number of rows T of the dispatch (the dynamic sequence
// extent); the kernel's own index arguments follow.
#pragma once

#include <cstdint>

namespace q3::runtime {

using KernelEntry = void (*)(void *const *buffers, const int64_t *bufferBytes,
                             const int64_t *scalars, int64_t workgroupBegin,
                             int64_t workgroupEnd);

inline constexpr const char *kKernelSymbolPrefix = "q3_kernel_";

} // namespace q3::runtime
