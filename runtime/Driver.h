//===- Driver.h - what a backend gives the scheduler ----------------------===//
//
// Model is the scheduler: it reads the artifact's manifest (weight plan,
// buffer plan, schedule), binds the checkpoint and turns each dispatch of the
// schedule into buffer ranges, index scalars and a workgroup count. A Driver
// is the backend beneath it: it loads the artifact's executables, owns the
// memory the kernels read and write, and runs one dispatch. The scheduler never
// calls a kernel or touches kernel memory itself, so a Vulkan driver (device
// buffers, dispatches recorded into a command buffer, finish() waiting on a
// fence) plugs in beside the CPU one without changes to it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace q3::runtime {

class Artifact;
class ThreadPool;
} // namespace q3::runtime

namespace q3::manifest {
struct Manifest;
} // namespace q3::manifest

namespace q3::runtime {

/// Bytes [offset, offset + bytes) of one driver buffer.
struct BufferRange {
  int64_t buffer = 0; // what allocate() or wrapHost() returned
  int64_t offset = 0;
  int64_t bytes = 0;
};

class Driver {
public:
  virtual ~Driver() = default;

  /// A kernel of the artifact's executables by its manifest name, for
  /// dispatch(). Throws LoadError when the executables lack it.
  virtual int64_t kernel(const std::string &name) = 0;

  /// `bytes` of zeroed memory (activations, the KV cache, token ids).
  virtual int64_t allocate(int64_t bytes) = 0;
  /// Host bytes that stay valid and unchanged while the driver lives (the
  /// weights): the CPU driver reads them in place, a GPU driver uploads them.
  virtual int64_t wrapHost(const void *data, int64_t bytes) = 0;
  virtual void write(const BufferRange &to, const void *from) = 0;
  virtual void read(const BufferRange &from, void *to) = 0;

  /// Runs workgroups [0, workgroups) of `kernel` on `buffers` (its operands,
  /// then its results) and `scalars` (runtime/KernelABI.h). A driver may
  /// queue it; dispatches run in the order they were issued.
  virtual void dispatch(int64_t kernel, const std::vector<BufferRange> &buffers,
                        const std::vector<int64_t> &scalars, int64_t workgroups) = 0;
  /// Returns when every dispatch issued so far has finished.
  virtual void finish() = 0;
};

/// The driver for `artifact`'s format (its validated manifest `m`). Throws
/// LoadError naming `path` for a format this runtime has no driver for, or
/// an artifact the driver cannot run here (missing CPU features, say).
std::unique_ptr<Driver> createDriver(const Artifact &artifact, const manifest::Manifest &m,
                                     const std::string &path, ThreadPool &pool);

} // namespace q3::runtime
