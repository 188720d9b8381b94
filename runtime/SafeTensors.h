// Reading one .safetensors file: an 8-byte little-endian header length, a JSON
// header describing every tensor, then the raw tensor bytes. Every field is
// validated before any tensor is exposed, so a TensorView never points outside
// the file image.
#pragma once

#include "runtime/DType.h"
#include "runtime/LoadError.h"
#include "runtime/TensorView.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>

#include "runtime/MappedFile.h"
#include <string>
#include <string_view>
#include <vector>

namespace q3::runtime {

// Headers larger than this are rejected before parsing (real ones are KBs).
constexpr uint64_t kMaxSafeTensorsHeaderBytes = 100ull << 20;

class SafeTensorsFile {
public:
  // Maps `path` read-only (MAP_PRIVATE) and validates it.
  static std::unique_ptr<SafeTensorsFile> open(const std::string &path,
                                               FilePlacement placement = FilePlacement::Mapped,
                                               ThreadPool *pool = nullptr);
  // Validates a whole in-memory file image. Copies nothing big: the returned
  // object refers to `data`, which must outlive it. `displayName` goes in errors.
  static std::unique_ptr<SafeTensorsFile> parse(const std::string &displayName, const uint8_t *data,
                                                size_t size);

  const std::vector<TensorView> &tensors() const { return tensors_; } // sorted by name
  const TensorView *find(std::string_view name) const;
  const std::map<std::string, std::string> &metadata() const { return metadata_; } // "__metadata__"
  const std::string &displayName() const { return displayName_; }
  /// MappedFile::dropPages for bytes of this file's mapping; does nothing for
  /// a parsed in-memory image or bytes outside the mapping.
  void dropPages(const uint8_t *begin, size_t bytes) const {
    if (mapping_)
      mapping_->dropPages(begin, bytes);
  }
  /// The opened file's bytes (0 for a parsed image) and MappedFile::folioCensus.
  size_t fileBytes() const { return mapping_ ? mapping_->size() : 0; }
  std::optional<FolioCensus> folioCensus() const {
    return mapping_ ? mapping_->folioCensus() : std::nullopt;
  }
  /// MappedFile::rereadIntoHugeFolios; nothing for a parsed image.
  RereadResult rereadIntoHugeFolios(ThreadPool *pool, double minBytesPerSecond,
                                    const std::vector<size_t> *stretches = nullptr) const {
    return mapping_ ? mapping_->rereadIntoHugeFolios(pool, minBytesPerSecond, stretches)
                    : RereadResult{};
  }

  SafeTensorsFile(const SafeTensorsFile &) = delete;
  SafeTensorsFile &operator=(const SafeTensorsFile &) = delete;
  ~SafeTensorsFile();

private:
  SafeTensorsFile() = default;

  std::string displayName_;
  std::vector<TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
  std::unique_ptr<MappedFile> mapping_; // set only by open()
};

} // namespace q3::runtime
