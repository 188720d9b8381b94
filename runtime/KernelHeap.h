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

namespace q3::runtime {

/// Sets malloc's mmap and trim thresholds (glibc; process-wide, once) so
/// scratch freed by one kernel call is reused by the next without page
/// faults: allocations up to 32 MiB come from the heap, and free memory at
/// its top past 64 MiB still goes back to the system.
void keepKernelScratchInHeap();

} // namespace q3::runtime
