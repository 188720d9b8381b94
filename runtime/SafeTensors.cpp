#include "runtime/SafeTensors.h"

#include "runtime/SafeTensorsParser.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace q3::runtime {

std::unique_ptr<SafeTensorsFile> SafeTensorsFile::parse(const std::string &displayName,
                                                        const uint8_t *data, size_t size) {
  SafeTensorsContents contents = parseSafeTensorsImage(displayName, data, size);
  std::unique_ptr<SafeTensorsFile> file(new SafeTensorsFile());
  file->displayName_ = displayName;
  file->tensors_ = std::move(contents.tensors);
  file->metadata_ = std::move(contents.metadata);
  return file;
}

std::unique_ptr<SafeTensorsFile> SafeTensorsFile::open(const std::string &path,
                                                       FilePlacement placement, ThreadPool *pool) {
  std::unique_ptr<MappedFile> mapped = MappedFile::open(path, placement, pool);
  std::unique_ptr<SafeTensorsFile> parsed = parse(path, mapped->data(), mapped->size());
  parsed->mapping_ = std::move(mapped);
  return parsed;
}

const TensorView *SafeTensorsFile::find(std::string_view name) const {
  auto it = std::lower_bound(
      tensors_.begin(), tensors_.end(), name,
      [](const TensorView &tensor, std::string_view key) { return tensor.name < key; });
  if (it == tensors_.end() || it->name != name)
    return nullptr;
  return &*it;
}

SafeTensorsFile::~SafeTensorsFile() = default;

} // namespace q3::runtime
