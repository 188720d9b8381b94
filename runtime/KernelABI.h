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
// tensor arguments in order, then its results, then, where the manifest gives
// the kernel `workspace_bytes`, its workspace (allocated zeroed once; every
// dispatch leaves it as it found it, so dispatches share it), then always
// the calling thread's scratch; `bufferBytes` their sizes.
// `scalars` are: [0] the number of rows T of the dispatch (the dynamic
// sequence extent), [1] the positions visible after it (start position + T),
// [2] the KV cache capacity in positions; the kernel's own index arguments
// (layer, start position, ...) follow.
//
// The thread scratch: each thread that runs kernels owns one region, of the
// most any kernel (any build) takes at the manifest's prefill_rows
// (`thread_scratch_bytes` + `thread_scratch_row_bytes` x T, q3.lowering's
// thread_scratch); a kernel uses it within one call and keeps nothing there.
// The products put their per-call panel and their gain-scaled and
// bf16-rounded activations there (megabytes at long prompts, which they
// malloc'ed per call before: glibc handed some back to the system at each
// free, and a 32-token prefill faulted ~1800 pages in again), the bf16
// flash attention prefill the key and value rows a call keeps rounded
// (512 KiB, on the stack before). A kernel
// whose lowering has none does not read it. No kernel calls the allocator
// (CompileKernels.cpp checks).
//
// The rest of their scratch is on the stack (memref.alloca in their IR),
// and the runtime runs them on stacks of kKernelStackBytes, whatever thread
// calls it (ThreadPool's stackBytes). What they take: decode attention one
// block's scores per query head of a workgroup (2 KiB each), the rest a few
// KiB to tens of KiB; only attention for head sizes that are not a multiple of 16
// (its scalar fallback) takes 4 bytes per visible position. Their frames
// probe each page they take (CompileKernels.cpp), so a stack too small
// faults at its guard page instead of writing below it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace q3::runtime {

using KernelEntry = void (*)(void *const *buffers, const int64_t *bufferBytes,
                             const int64_t *scalars, int64_t workgroupBegin, int64_t workgroupEnd);

inline constexpr const char *kKernelSymbolPrefix = "q3_kernel_";

/// A kernel variant's own kernel name (its symbol: the prefix, then this):
/// "<kernel>__<variant>".
inline std::string variantKernelName(const std::string &kernel, const std::string &variant) {
  return kernel + "__" + variant;
}
inline constexpr int kFixedKernelScalars = 3; // rows, visible, capacity

/// The stack every thread that runs kernels gets: address space reserved
/// per thread, backed only where touched.
inline constexpr size_t kKernelStackBytes = size_t(16) << 20;

} // namespace q3::runtime
