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
#include <optional>
#include <stdexcept>
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

  /// How host memory backs a buffer: Small pages become resident as they
  /// are first written; Huge ones (transparent huge pages) in 2 MB steps, so
  /// a buffer written sparsely is resident almost whole, but streaming reads
  /// of it miss the TLB far less. Device memory ignores it.
  enum class Pages { Small, Huge };
  /// `bytes` of zeroed memory (activations, the KV cache, token ids).
  virtual int64_t allocate(int64_t bytes, Pages pages = Pages::Small) = 0;
  /// Host bytes that stay valid and unchanged while the driver lives (the
  /// weights): the CPU driver reads them in place, a GPU driver uploads them.
  virtual int64_t wrapHost(const void *data, int64_t bytes) = 0;
  /// Writes reach the kernels of every dispatch issued after them; a driver
  /// may carry a small one in the next submission rather than wait for it.
  /// The range must not be one that an unfinished dispatch still reads.
  virtual void write(const BufferRange &to, const void *from) = 0;
  /// Waits for every dispatch issued so far, then copies what they wrote.
  virtual void read(const BufferRange &from, void *to) = 0;

  /// Whether move() works and memory allocate() returned costs only the
  /// pages written: the scheduler then lets the KV cache's rows fill a
  /// part of its buffer that grows with the context, and spreads them in
  /// place as it grows. A driver that records passes against fixed ranges
  /// (Vulkan) does not.
  virtual bool movesInPlace() const { return false; }
  /// One copy of move(): `from` and `to` have the same byte count.
  struct CopyRange {
    BufferRange from, to;
  };
  /// Runs the waves in order; the copies of one wave in any order or at
  /// once (no copy's ranges overlap another's of its wave, but may overlap
  /// those of earlier waves). Only where movesInPlace().
  virtual void move(const std::vector<std::vector<CopyRange>> &waves) {
    throw std::logic_error("this driver does not move memory in place");
  }

  /// Runs workgroups [0, workgroups) of `kernel` on `buffers` (its operands,
  /// then its results) and `scalars` (runtime/KernelABI.h). A driver may
  /// queue it; dispatches run in the order they were issued.
  virtual void dispatch(int64_t kernel, const std::vector<BufferRange> &buffers,
                        const std::vector<int64_t> &scalars, int64_t workgroups) = 0;
  /// Returns when every dispatch issued so far has finished.
  virtual void finish() = 0;

  /// What decides the dispatches of a forward pass: the same shape always
  /// issues the same dispatches with the same buffer ranges; only the
  /// position differs.
  struct PassShape {
    int64_t rows = 0;
    int64_t logitsRows = 0; // the logits product runs on the last logitsRows rows (0: not at all)
    bool operator<(const PassShape &o) const {
      return rows != o.rows ? rows < o.rows : logitsRows < o.logitsRows;
    }
  };
  /// Brackets the dispatches of one chunk of a forward pass at `startPos`. A driver that
  /// records command buffers returns true when it replays the pass it
  /// recorded for `shape` (the scheduler then issues no dispatch until
  /// endPass()); false means the scheduler issues them (and such a driver
  /// records them). The CPU driver issues every pass's dispatches anew.
  virtual bool beginPass(const PassShape &shape, int64_t startPos) { return false; }
  virtual void endPass() {}

  /// While profiling the driver times each dispatch as it runs (Vulkan:
  /// device timestamps; CPU: the pool's loop times), in the sequence the
  /// pass runs it: the scheduler does not finish each dispatch alone to
  /// clock it, which would time a different run (on the CPU it added ~4-12
  /// µs to every dispatch).
  virtual void setProfiling(bool enabled) = 0;
  /// The seconds of each dispatch of the pass just run, in issue order
  /// (waits for it); empty where the device cannot time them.
  virtual std::vector<double> dispatchSeconds() = 0;

  /// What the dispatches run on, for reports ("cpu", a Vulkan device's name).
  virtual std::string deviceName() const = 0;
  /// A device with its own memory measures how fast it reads it (GB/s, the
  /// best of `reads` timed reads of a `bytes()` buffer); nullopt: the host's
  /// memory is the device's, and the caller probes it.
  struct Bandwidth {
    double gigabytesPerSecond = 0;
    int64_t bytes = 0;
  };
  virtual std::optional<Bandwidth> measureReadBandwidth(int reads) { return std::nullopt; }

  /// The other builds of `kernel` this machine can run (a portable
  /// artifact's variants whose CPU features it has), by name; none here.
  virtual std::vector<std::string> kernelVariants(int64_t kernel) { return {}; }
  /// Runs build `variant` of `kernel` (an index into kernelVariants(), or -1
  /// for the default build) in every later dispatch.
  virtual void useKernelVariant(int64_t kernel, int variant) {}
};

/// How q3run asked for the driver to be set up.
struct DriverOptions {
  int device = -1; // Vulkan: the device index (q3run --list-devices); -1: the default
};

/// The driver for `artifact`'s format (its validated manifest `m`). Throws
/// LoadError naming `path` for a format this runtime has no driver for, or
/// an artifact the driver cannot run here (missing CPU features, no usable
/// Vulkan device, a device option for a CPU artifact).
std::unique_ptr<Driver> createDriver(const Artifact &artifact, const manifest::Manifest &m,
                                     const std::string &path, ThreadPool &pool,
                                     const DriverOptions &options = {});

/// `q3run --list-devices`: one line per Vulkan device (index, name, type,
/// driver, memory, subgroup size, 16-bit storage). Throws when there is no
/// Vulkan loader or it fails.
std::vector<std::string> listVulkanDevices();

} // namespace q3::runtime
