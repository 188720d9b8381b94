//===- KernelHeap.h - malloc policy for the generated kernels' scratch ----===//
//
// The CPU kernels allocate their per-call scratch with malloc (a prefill's
// activations rounded to bf16 or times the gain, a product's packed weight
// panel: 64 KiB to a few MiB) and free it before they return, once per
// dispatch and thread. With glibc's defaults (an mmap threshold that follows
// the largest chunk freed so far, the heap's top trimmed past twice that)
// some sequences of those sizes are handed back to the system at a free and
// faulted in again at the next call: a 32-token prefill of the 0.6B shape
// took ~1,800 page faults each time, and its q/k/v and down products ran at
// half the rate of a 33-token one.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>

namespace q3::runtime {

/// Allocations up to this size come from malloc's heap, not fresh mappings.
inline constexpr size_t kKernelScratchMmapThreshold = size_t(32) << 20;
/// Free memory at the heap's top past this much is returned to the system.
inline constexpr size_t kKernelScratchTrimThreshold = size_t(64) << 20;

/// Sets malloc's mmap and trim thresholds (glibc; process-wide, once) so
/// scratch freed by one kernel call is reused by the next without page
/// faults. Memory freed in larger amounts is still returned.
void keepKernelScratchInHeap();

} // namespace q3::runtime
