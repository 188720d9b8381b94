#include "runtime/Checkpoint.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <sys/stat.h>

namespace q3::runtime {

namespace {

using Json = nlohmann::json;

constexpr const char *kSingleFileName = "model.safetensors";
constexpr const char *kIndexFileName = "model.safetensors.index.json";
constexpr uint64_t kMaxIndexBytes = 100ull << 20;

enum class PathKind { Missing, Directory, File };

PathKind classify(const std::string &path) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0)
    return PathKind::Missing;
  return S_ISDIR(info.st_mode) ? PathKind::Directory : PathKind::File;
}

bool endsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

std::string joinPath(const std::string &folder, const std::string &name) {
  if (folder.empty() || folder.back() == '/')
    return folder + name;
  return folder + "/" + name;
}

std::string parentFolder(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash + 1);
}

LoadError indexError(const std::string &indexPath, const std::string &what) {
  return LoadError(fmt::format("{}: {}", printable(indexPath), what));
}

std::string readSmallFile(const std::string &path) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    int error = errno;
    throw LoadError(fmt::format("{}: cannot open: {}", printable(path), std::strerror(error)));
  }
  if (S_ISDIR(info.st_mode))
    throw indexError(path, "is a folder, expected the sharded checkpoint's index file");
  if (!S_ISREG(info.st_mode))
    throw indexError(path, "not a regular file, expected the sharded checkpoint's index file");
  if (uint64_t(info.st_size) > kMaxIndexBytes)
    throw indexError(path, fmt::format("index is {} bytes, more than the {}-byte limit",
                                       uint64_t(info.st_size), kMaxIndexBytes));
  std::ifstream stream(path, std::ios::binary);
  if (!stream) {
    int error = errno;
    throw LoadError(fmt::format("{}: cannot open: {}", printable(path), std::strerror(error)));
  }
  std::ostringstream text;
  text << stream.rdbuf();
  return text.str();
}

// A shard name must stay inside the checkpoint folder: relative, no "..".
void checkShardName(const std::string &indexPath, const std::string &tensor,
                    const std::string &shard) {
  auto reject = [&](const char *why) {
    return indexError(indexPath, fmt::format("weight_map entry '{}': shard '{}' {}",
                                             printable(tensor), printable(shard), why));
  };
  if (shard.empty())
    throw reject("is empty");
  if (shard.front() == '/')
    throw reject("is an absolute path; expected a file inside the checkpoint folder");
  if (shard.find('\0') != std::string::npos)
    throw reject("contains a NUL byte");
  std::stringstream components(shard);
  std::string component;
  while (std::getline(components, component, '/'))
    if (component == "..")
      throw reject("escapes the checkpoint folder; expected a file inside it");
}

// weight_map: tensor name -> shard file name.
std::map<std::string, std::string> readWeightMap(const std::string &indexPath) {
  Json index;
  try {
    index = Json::parse(readSmallFile(indexPath));
  } catch (const Json::exception &error) {
    throw indexError(indexPath, fmt::format("not valid JSON: {}", describeJsonError(error)));
  }
  if (!index.is_object())
    throw indexError(indexPath, fmt::format("expected a JSON object, found {}", index.type_name()));
  auto weightMap = index.find("weight_map");
  if (weightMap == index.end() || !weightMap->is_object())
    throw indexError(indexPath,
                     "expected a 'weight_map' object mapping tensor names to shard files");
  if (weightMap->empty())
    throw indexError(indexPath, "'weight_map' is empty");
  std::map<std::string, std::string> shardOf;
  for (const auto &[tensor, shard] : weightMap->items()) {
    if (!shard.is_string())
      throw indexError(indexPath,
                       fmt::format("weight_map entry '{}' must be a shard file name, found {}",
                                   printable(tensor), shard.type_name()));
    checkShardName(indexPath, tensor, shard.get<std::string>());
    shardOf.emplace(tensor, shard.get<std::string>());
  }
  return shardOf;
}

} // namespace

void Checkpoint::addFile(std::unique_ptr<SafeTensorsFile> file, const std::string &indexName) {
  for (const TensorView &tensor : file->tensors()) {
    auto [it, inserted] = tensors_.emplace(tensor.name, &tensor);
    if (!inserted)
      throw LoadError(fmt::format("{}: tensor '{}' is present in both '{}' and '{}'",
                                  printable(indexName), printable(tensor.name),
                                  printable(it->second->file), printable(tensor.file)));
  }
  files_.push_back(std::move(file));
}

Checkpoint Checkpoint::open(const std::string &path, FilePlacement placement, ThreadPool *pool) {
  Checkpoint checkpoint;
  checkpoint.description_ = path;

  std::string indexPath;
  switch (classify(path)) {
  case PathKind::Missing: {
    int error = errno;
    throw LoadError(
        fmt::format("{}: cannot open checkpoint: {}", printable(path), std::strerror(error)));
  }
  case PathKind::File:
    if (endsWith(path, ".json") && !endsWith(path, ".index.json"))
      throw LoadError(fmt::format("{}: a JSON file that is not a sharded index "
                                  "(*.index.json): expected the checkpoint folder, a "
                                  ".safetensors file or an index",
                                  printable(path)));
    if (!endsWith(path, ".index.json")) {
      checkpoint.addFile(SafeTensorsFile::open(path, placement, pool), path);
      return checkpoint;
    }
    indexPath = path;
    break;
  case PathKind::Directory:
    indexPath = joinPath(path, kIndexFileName);
    if (classify(indexPath) == PathKind::Missing) {
      std::string single = joinPath(path, kSingleFileName);
      if (classify(single) == PathKind::Missing)
        throw LoadError(fmt::format("{}: expected {} or {} in the checkpoint folder",
                                    printable(path), kSingleFileName, kIndexFileName));
      checkpoint.addFile(SafeTensorsFile::open(single, placement, pool), single);
      return checkpoint;
    }
    break;
  }

  // Sharded: open each distinct shard once, then check the map against what they hold.
  std::map<std::string, std::string> shardOf = readWeightMap(indexPath);
  std::string folder = parentFolder(indexPath);
  std::set<std::string> shards;
  for (const auto &entry : shardOf)
    shards.insert(entry.second);
  for (const std::string &shard : shards)
    checkpoint.addFile(SafeTensorsFile::open(joinPath(folder, shard), placement, pool), indexPath);
  for (const auto &[tensor, shard] : shardOf) {
    const TensorView *found = checkpoint.find(tensor);
    std::string expectedFile = joinPath(folder, shard);
    if (!found)
      throw indexError(indexPath,
                       fmt::format("weight_map says tensor '{}' is in '{}', but no shard has it",
                                   printable(tensor), printable(shard)));
    if (found->file != expectedFile)
      throw indexError(indexPath,
                       fmt::format("weight_map says tensor '{}' is in '{}', but it is in '{}'",
                                   printable(tensor), printable(shard), printable(found->file)));
  }
  return checkpoint;
}

const TensorView *Checkpoint::find(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : it->second;
}

std::vector<std::string> Checkpoint::tensorNames() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const auto &entry : tensors_)
    names.push_back(entry.first);
  return names;
}

std::string Checkpoint::description() const { return description_; }

void Checkpoint::dropPages(const uint8_t *begin, size_t bytes) const {
  for (const auto &file : files_)
    file->dropPages(begin, bytes);
}

uint64_t Checkpoint::fileBytes() const {
  uint64_t bytes = 0;
  for (const auto &file : files_)
    bytes += file->fileBytes();
  return bytes;
}

std::vector<std::optional<FolioCensus>> Checkpoint::folioCensuses() const {
  std::vector<std::optional<FolioCensus>> censuses;
  for (const auto &file : files_)
    censuses.push_back(file->folioCensus());
  return censuses;
}

RereadResult Checkpoint::rereadSmallFolios(const std::vector<std::optional<FolioCensus>> &censuses,
                                           ThreadPool *pool, double minBytesPerSecond) const {
  RereadResult total;
  for (size_t f = 0; f < files_.size() && f < censuses.size(); ++f) {
    const std::optional<FolioCensus> &census = censuses[f];
    if (!census || census->small.empty())
      continue;
    const RereadResult one =
        files_[f]->rereadIntoHugeFolios(pool, minBytesPerSecond, &census->small);
    total.bytes += one.bytes;
    total.seconds += one.seconds;
    if (one.slowStorage || one.noHugeFolios) {
      total.slowStorage = one.slowStorage;
      total.noHugeFolios = one.noHugeFolios;
      break;
    }
  }
  return total;
}

} // namespace q3::runtime
