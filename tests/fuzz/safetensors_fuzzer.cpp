// Feeds arbitrary bytes to the checkpoint readers. LoadError is the only
// acceptable failure; any other exception escapes and aborts (a bug). For a
// successful parse every tensor's bytes are touched so ASan checks the bounds.
//
// Two readers, chosen by the first byte: an input that starts with '{' is a
// sharded index (model.safetensors.index.json) next to two fixed, valid
// shards, opened with Checkpoint::open (weight_map entries, shard names that
// escape the folder, tensors in two shards, ...); anything else is one
// .safetensors image (a real one starts with its 8-byte header length).
#include "runtime/Checkpoint.h"
#include "runtime/SafeTensors.h"
#include "runtime/SafeTensorsWriter.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

using q3::runtime::Checkpoint;
using q3::runtime::LoadError;
using q3::runtime::SafeTensorsFile;
using q3::runtime::TensorView;

namespace {

// Converting big tensors would only slow the fuzzer down; their first and
// last bytes are still read.
constexpr size_t kMaxConvertedBytes = 4096;

unsigned touch(const TensorView &tensor) {
  unsigned sum = 0;
  if (tensor.byteSize != 0)
    sum += tensor.data[0] + tensor.data[tensor.byteSize - 1];
  if (tensor.byteSize <= kMaxConvertedBytes)
    for (float value : q3::runtime::readAsF32(tensor))
      sum += value == value ? 1u : 0u;
  if (tensor.numElements() < 0)
    __builtin_trap(); // the parser promised a valid shape
  return sum;
}

void fuzzSafeTensors(const uint8_t *data, size_t size) {
  try {
    auto file = SafeTensorsFile::parse("fuzz", data, size);
    volatile unsigned sink = 0;
    for (const TensorView &tensor : file->tensors()) {
      sink = sink + touch(tensor);
      if (file->find(tensor.name) != &tensor)
        __builtin_trap();
    }
    for (const auto &entry : file->metadata())
      sink = sink + unsigned(entry.second.size());
  } catch (const LoadError &) {
  }
}

/// A folder with two valid shards (tensors a.weight, b.weight | c.weight),
/// made once per process.
const std::string &shardFolder() {
  // Never destroyed: the exit handler below still needs it.
  static const std::string &folder = *new std::string([] {
    char pattern[] = "/tmp/q3-index-fuzz-XXXXXX";
    if (!::mkdtemp(pattern))
      std::abort();
    std::string dir = pattern;
    auto tensor = [](const char *name, int64_t n) {
      q3::runtime::TensorToWrite t{name, q3::runtime::DType::F32, {n}, {}};
      t.bytes.assign(size_t(n) * 4, 0x3f);
      return t;
    };
    q3::runtime::writeSafeTensors(dir + "/model-00001-of-00002.safetensors",
                                  {tensor("a.weight", 4), tensor("b.weight", 2)});
    q3::runtime::writeSafeTensors(dir + "/model-00002-of-00002.safetensors",
                                  {tensor("c.weight", 3)});
    std::atexit([] {
      for (const char *name : {"/model-00001-of-00002.safetensors",
                               "/model-00002-of-00002.safetensors", "/model.safetensors.index.json"})
        std::remove((shardFolder() + name).c_str());
      std::remove(shardFolder().c_str());
    });
    return dir;
  }());
  return folder;
}

void fuzzShardedIndex(const uint8_t *data, size_t size) {
  const std::string index = shardFolder() + "/model.safetensors.index.json";
  FILE *file = std::fopen(index.c_str(), "wb");
  if (!file || std::fwrite(data, 1, size, file) != size || std::fclose(file) != 0)
    std::abort();
  try {
    Checkpoint checkpoint = Checkpoint::open(shardFolder());
    volatile unsigned sink = 0;
    for (const std::string &name : checkpoint.tensorNames()) {
      const TensorView *tensor = checkpoint.find(name);
      if (!tensor)
        __builtin_trap(); // every listed name resolves
      sink = sink + touch(*tensor);
    }
  } catch (const LoadError &) {
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 0 && data[0] == '{')
    fuzzShardedIndex(data, size);
  else
    fuzzSafeTensors(data, size);
  return 0;
}
