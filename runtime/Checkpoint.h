// A Hugging Face model folder (single file or sharded with an index), or a
// lone .safetensors file, presented as one flat set of named tensors.
#pragma once

#include "runtime/SafeTensors.h"

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace q3::runtime {

class Checkpoint {
public:
  // `path` is one of:
  //  - a folder with model.safetensors.index.json ({"weight_map": {tensor: shard}}) and its shards,
  //  - a folder with model.safetensors,
  //  - a .safetensors file, or an *.index.json file.
  // Index validation: every weight_map entry's shard exists and contains that tensor; a tensor
  // present in two shards is an error; shard names may not escape the folder.
  // A copy (FilePlacement::HugePageCopy) is read by `pool`'s threads when given.
  static Checkpoint open(const std::string &path, FilePlacement placement = FilePlacement::Mapped,
                         ThreadPool *pool = nullptr);

  const TensorView *find(std::string_view name) const;
  std::vector<std::string> tensorNames() const; // sorted
  std::string description() const;              // for messages: the path it was opened from
  /// Drops the resident mapped pages of tensor bytes that were copied
  /// elsewhere (SafeTensorsFile::dropPages on every file; each checks bounds).
  void dropPages(const uint8_t *begin, size_t bytes) const;
  /// The bytes of its files.
  uint64_t fileBytes() const;
  /// Each file's census of its whole 2 MB stretches in the page cache
  /// (MappedFile::folioCensus; nullopt for a file that could not be
  /// measured), in file order. It unmaps the files' pages to count, so the
  /// bytes stay valid but the next read of each faults.
  std::vector<std::optional<FolioCensus>> folioCensuses() const;
  /// combinedHugeShare of folioCensuses().
  std::optional<double> hugePageShare() const { return combinedHugeShare(folioCensuses()); }
  /// Reads the stretches `censuses` (folioCensuses(), taken since nothing
  /// but reads touched the files) finds in small folios back into huge
  /// ones (MappedFile::rereadIntoHugeFolios), file after file, until one
  /// reads slower than `minBytesPerSecond` (then slowStorage) or comes back
  /// in small folios again (then noHugeFolios).
  RereadResult rereadSmallFolios(const std::vector<std::optional<FolioCensus>> &censuses,
                                 ThreadPool *pool, double minBytesPerSecond) const;

private:
  Checkpoint() = default;
  void addFile(std::unique_ptr<SafeTensorsFile> file, const std::string &indexName);

  std::string description_;
  std::vector<std::unique_ptr<SafeTensorsFile>> files_; // owns every TensorView below
  std::map<std::string, const TensorView *, std::less<>> tensors_;
};

} // namespace q3::runtime
