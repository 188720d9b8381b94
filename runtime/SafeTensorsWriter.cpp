#include "runtime/SafeTensorsWriter.h"

#include "runtime/AtomicFile.h"
#include "runtime/LittleEndian.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

namespace q3::runtime {

namespace {

using Json = nlohmann::json;

LoadError tensorError(const std::string &path, const std::string &tensor, const std::string &what) {
  return LoadError(fmt::format("{}: tensor '{}': {}", printable(path), printable(tensor), what));
}

void checkTensor(const std::string &path, const TensorToWrite &tensor) {
  if (tensor.name.empty() || tensor.name == "__metadata__")
    throw tensorError(path, tensor.name, "name is reserved or empty");
  uint64_t needed = dtypeSize(tensor.dtype);
  for (int64_t dim : tensor.shape) {
    if (dim < 0)
      throw tensorError(path, tensor.name,
                        fmt::format("negative dim in shape {}", formatShape(tensor.shape)));
    if (__builtin_mul_overflow(needed, uint64_t(dim), &needed))
      throw tensorError(path, tensor.name,
                        fmt::format("shape {} overflows", formatShape(tensor.shape)));
  }
  if (tensor.bytes.size() != needed)
    throw tensorError(path, tensor.name,
                      fmt::format("has {} bytes but shape {} x {} needs {}", tensor.bytes.size(),
                                  formatShape(tensor.shape), dtypeName(tensor.dtype), needed));
}

std::vector<const TensorToWrite *> sortedByName(const std::string &path,
                                                const std::vector<TensorToWrite> &tensors) {
  std::vector<const TensorToWrite *> sorted;
  for (const TensorToWrite &tensor : tensors)
    sorted.push_back(&tensor);
  std::sort(sorted.begin(), sorted.end(),
            [](const TensorToWrite *a, const TensorToWrite *b) { return a->name < b->name; });
  for (size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i]->name == sorted[i - 1]->name)
      throw tensorError(path, sorted[i]->name, "listed twice");
  return sorted;
}

// The JSON header padded with spaces to a multiple of 8, so data starts aligned.
std::string buildHeader(const std::string &path, const std::vector<const TensorToWrite *> &sorted,
                        const std::map<std::string, std::string> &metadata) {
  Json header = Json::object();
  Json meta = {{"format", "pt"}};
  for (const auto &[key, value] : metadata)
    meta[key] = value;
  header["__metadata__"] = meta;
  uint64_t offset = 0;
  for (const TensorToWrite *tensor : sorted) {
    uint64_t end = offset + tensor->bytes.size();
    header[tensor->name] = {{"dtype", dtypeName(tensor->dtype)},
                            {"shape", tensor->shape},
                            {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const Json::exception &error) { // names/metadata that are not valid UTF-8
    throw LoadError(
        fmt::format("{}: cannot encode header: {}", printable(path), printable(error.what())));
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

} // namespace

void writeSafeTensors(const std::string &path, const std::vector<TensorToWrite> &tensors,
                      const std::map<std::string, std::string> &metadata) {
  for (const TensorToWrite &tensor : tensors)
    checkTensor(path, tensor);
  std::vector<const TensorToWrite *> sorted = sortedByName(path, tensors);
  std::string header = buildHeader(path, sorted, metadata);

  uint8_t length[8];
  storeLittleEndianU64(length, uint64_t(header.size()));
  AtomicFile out(path);
  out.write(length, sizeof length);
  out.write(header.data(), header.size());
  for (const TensorToWrite *tensor : sorted)
    out.write(tensor->bytes.data(), tensor->bytes.size());
  out.commit();
}

} // namespace q3::runtime
