#include "runtime/SafeTensorsParser.h"

#include "runtime/LittleEndian.h"
#include "runtime/LoadError.h"
#include "runtime/SafeTensors.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>
#include <set>

namespace q3::runtime {

namespace {

using Json = nlohmann::json;

constexpr size_t kHeaderLengthBytes = 8;
constexpr const char *kMetadataKey = "__metadata__";

LoadError fileError(const std::string &file, const std::string &what) {
  return LoadError(fmt::format("{}: {}", printable(file), what));
}

LoadError tensorError(const std::string &file, const std::string &tensor, const std::string &what) {
  return LoadError(fmt::format("{}: tensor '{}': {}", printable(file), printable(tensor), what));
}

size_t readHeaderLength(const std::string &file, const uint8_t *data, size_t size) {
  if (size < kHeaderLengthBytes)
    throw fileError(file,
                    fmt::format("file is {} bytes, shorter than the 8-byte header length", size));
  uint64_t length = loadLittleEndianU64(data);
  if (length == 0)
    throw fileError(file, "header length is 0, expected a JSON header");
  if (length > kMaxSafeTensorsHeaderBytes)
    throw fileError(file, fmt::format("header length {} exceeds the {}-byte limit", length,
                                      kMaxSafeTensorsHeaderBytes));
  if (length > size - kHeaderLengthBytes)
    throw fileError(file,
                    fmt::format("header length {} exceeds the {} bytes after the length field",
                                length, size - kHeaderLengthBytes));
  return static_cast<size_t>(length);
}

// The shared description, plus what a UTF-8 failure means for safetensors.
std::string describeHeaderJsonError(const Json::exception &error) {
  std::string text = describeJsonError(error);
  if (text.find("UTF-8") != std::string::npos)
    text += " (tensor names and metadata must be valid UTF-8)";
  return text;
}

// nlohmann keeps the last of duplicated keys silently; a tensor listed twice is
// ambiguous, so top-level duplicates are rejected while parsing.
Json parseHeaderJson(const std::string &file, const uint8_t *begin, size_t length) {
  std::set<std::string> topLevelKeys;
  auto rejectDuplicateKeys = [&](int depth, Json::parse_event_t event, Json &parsed) {
    if (depth == 1 && event == Json::parse_event_t::key) {
      const std::string &key = parsed.get_ref<const std::string &>();
      if (!topLevelKeys.insert(key).second)
        throw tensorError(file, key, "appears more than once in the header");
    }
    return true;
  };
  try {
    return Json::parse(begin, begin + length, rejectDuplicateKeys);
  } catch (const Json::exception &error) {
    throw fileError(file, "header is not valid JSON: " + describeHeaderJsonError(error));
  }
}

// Short text for a found value in an error. Never dumps containers whole:
// dump() recurses, so a deeply nested header value could overflow the stack.
std::string describeValue(const Json &value) {
  constexpr size_t kMaxShownElements = 4;
  if (value.is_string()) {
    // printable(), not dump(): cutting the text may split a UTF-8 sequence.
    std::string_view text = value.get_ref<const std::string &>();
    return fmt::format("\"{}\"", printable(text.substr(0, 64)));
  }
  if (value.is_primitive())
    return value.dump();
  bool small =
      value.size() <= kMaxShownElements &&
      std::all_of(value.begin(), value.end(), [](const Json &item) { return item.is_primitive(); });
  if (small && value.is_array()) {
    std::vector<std::string> items;
    for (const Json &item : value)
      items.push_back(describeValue(item));
    return fmt::format("[{}]", fmt::join(items, ", "));
  }
  return fmt::format("{} of {} elements", value.type_name(), value.size());
}

std::map<std::string, std::string> parseMetadata(const std::string &file, const Json &value) {
  if (!value.is_object())
    throw fileError(file, fmt::format("'{}' must be an object of strings, found {}", kMetadataKey,
                                      value.type_name()));
  std::map<std::string, std::string> metadata;
  for (const auto &[key, entry] : value.items()) {
    if (!entry.is_string())
      throw fileError(file, fmt::format("'{}' entry '{}' must be a string, found {}", kMetadataKey,
                                        printable(key), entry.type_name()));
    metadata.emplace(key, entry.get<std::string>());
  }
  return metadata;
}

const Json &requireField(const std::string &file, const std::string &tensor, const Json &entry,
                         const char *field) {
  auto it = entry.find(field);
  if (it == entry.end())
    throw tensorError(file, tensor, fmt::format("missing field '{}'", field));
  return *it;
}

DType readDType(const std::string &file, const std::string &tensor, const Json &entry) {
  const Json &value = requireField(file, tensor, entry, "dtype");
  if (!value.is_string())
    throw tensorError(file, tensor,
                      fmt::format("'dtype' must be a string, found {}", value.type_name()));
  const std::string &name = value.get_ref<const std::string &>();
  std::optional<DType> dtype = parseDType(name);
  if (!dtype)
    throw tensorError(
        file, tensor,
        fmt::format("unsupported dtype {} (supported: F32, F16, BF16)", printable(name)));
  return *dtype;
}

// Integers only: JSON floats such as 2.0 or 1e3 are rejected, as are
// negatives and (for shape dims) values that do not fit int64.
uint64_t readNonNegativeInteger(const std::string &file, const std::string &tensor,
                                const Json &value, const std::string &what) {
  if (value.is_number_unsigned())
    return value.get<uint64_t>();
  if (value.is_number_integer())
    throw tensorError(file, tensor,
                      fmt::format("{} must be non-negative, found {}", what, value.get<int64_t>()));
  throw tensorError(file, tensor,
                    fmt::format("{} must be an integer, found {}", what, describeValue(value)));
}

std::vector<int64_t> readShape(const std::string &file, const std::string &tensor,
                               const Json &entry) {
  const Json &value = requireField(file, tensor, entry, "shape");
  if (!value.is_array())
    throw tensorError(file, tensor,
                      fmt::format("'shape' must be an array, found {}", value.type_name()));
  std::vector<int64_t> shape;
  shape.reserve(value.size()); // bounded by the header length, which is bounded
  for (size_t i = 0; i < value.size(); ++i) {
    uint64_t dim = readNonNegativeInteger(file, tensor, value[i], fmt::format("shape[{}]", i));
    if (dim > uint64_t(std::numeric_limits<int64_t>::max()))
      throw tensorError(file, tensor, fmt::format("shape[{}] = {} is too large", i, dim));
    shape.push_back(int64_t(dim));
  }
  return shape;
}

struct Offsets {
  uint64_t begin, end;
};

Offsets readOffsets(const std::string &file, const std::string &tensor, const Json &entry,
                    size_t dataRegionSize) {
  const Json &value = requireField(file, tensor, entry, "data_offsets");
  if (!value.is_array() || value.size() != 2)
    throw tensorError(file, tensor,
                      fmt::format("'data_offsets' must be an array of two integers, found {}",
                                  describeValue(value)));
  Offsets offsets{readNonNegativeInteger(file, tensor, value[0], "data_offsets[0]"),
                  readNonNegativeInteger(file, tensor, value[1], "data_offsets[1]")};
  if (offsets.begin > offsets.end)
    throw tensorError(
        file, tensor,
        fmt::format("data_offsets [{}, {}] begin after end", offsets.begin, offsets.end));
  if (offsets.end > dataRegionSize)
    throw tensorError(file, tensor,
                      fmt::format("data_offsets [{}, {}] end beyond the {}-byte data region",
                                  offsets.begin, offsets.end, dataRegionSize));
  return offsets;
}

// Bytes the shape needs, or nullopt if the product overflows. A zero dim makes
// the tensor empty however large the other dims are.
std::optional<uint64_t> bytesNeeded(const std::vector<int64_t> &shape, DType dtype) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end())
    return 0;
  uint64_t bytes = dtypeSize(dtype);
  for (int64_t dim : shape)
    if (__builtin_mul_overflow(bytes, uint64_t(dim), &bytes))
      return std::nullopt;
  if (bytes > uint64_t(std::numeric_limits<int64_t>::max())) // numElements() must fit int64
    return std::nullopt;
  return bytes;
}

void checkByteSize(const std::string &file, const std::string &tensor,
                   const std::vector<int64_t> &shape, DType dtype, Offsets offsets) {
  std::optional<uint64_t> needed = bytesNeeded(shape, dtype);
  if (!needed)
    throw tensorError(file, tensor,
                      fmt::format("shape {} x {} overflows the addressable size",
                                  formatShape(shape), dtypeName(dtype)));
  uint64_t span = offsets.end - offsets.begin;
  if (span != *needed)
    throw tensorError(file, tensor,
                      fmt::format("data_offsets [{}, {}] span {} bytes but shape {} x {} needs {}",
                                  offsets.begin, offsets.end, span, formatShape(shape),
                                  dtypeName(dtype), *needed));
}

TensorView parseTensorEntry(const std::string &file, const std::string &tensor, const Json &entry,
                            const uint8_t *dataRegion, size_t dataRegionSize) {
  if (tensor.empty())
    throw fileError(file, "a tensor has an empty name");
  if (!entry.is_object())
    throw tensorError(file, tensor,
                      fmt::format("entry must be an object, found {}", entry.type_name()));
  DType dtype = readDType(file, tensor, entry);
  std::vector<int64_t> shape = readShape(file, tensor, entry);
  Offsets offsets = readOffsets(file, tensor, entry, dataRegionSize);
  checkByteSize(file, tensor, shape, dtype, offsets);
  return TensorView{tensor,
                    dtype,
                    std::move(shape),
                    dataRegion + offsets.begin,
                    size_t(offsets.end - offsets.begin),
                    file};
}

std::string describeOffsets(const TensorView &tensor, const uint8_t *dataRegion) {
  size_t begin = size_t(tensor.data - dataRegion);
  return fmt::format("[{}, {}]", begin, begin + tensor.byteSize);
}

// Empty tensors occupy no bytes, so they cannot overlap anything.
void checkNoOverlap(const std::string &file, const std::vector<TensorView> &tensors,
                    const uint8_t *dataRegion) {
  std::vector<const TensorView *> byStart;
  for (const TensorView &tensor : tensors)
    if (tensor.byteSize != 0)
      byStart.push_back(&tensor);
  std::sort(byStart.begin(), byStart.end(),
            [](const TensorView *a, const TensorView *b) { return a->data < b->data; });
  for (size_t i = 1; i < byStart.size(); ++i) {
    const TensorView &previous = *byStart[i - 1];
    const TensorView &current = *byStart[i];
    if (current.data < previous.data + previous.byteSize)
      throw tensorError(file, current.name,
                        fmt::format("data_offsets {} overlap tensor '{}' at {}",
                                    describeOffsets(current, dataRegion), printable(previous.name),
                                    describeOffsets(previous, dataRegion)));
  }
}

} // namespace

SafeTensorsContents parseSafeTensorsImage(const std::string &file, const uint8_t *data,
                                          size_t size) {
  size_t headerLength = readHeaderLength(file, data, size);
  Json header = parseHeaderJson(file, data + kHeaderLengthBytes, headerLength);
  if (!header.is_object())
    throw fileError(file,
                    fmt::format("header must be a JSON object, found {}", header.type_name()));

  const uint8_t *dataRegion = data + kHeaderLengthBytes + headerLength;
  size_t dataRegionSize = size - kHeaderLengthBytes - headerLength;
  SafeTensorsContents contents;
  for (const auto &[key, value] : header.items()) {
    if (key == kMetadataKey)
      contents.metadata = parseMetadata(file, value);
    else
      contents.tensors.push_back(parseTensorEntry(file, key, value, dataRegion, dataRegionSize));
  }
  // Json objects iterate in key order, so the tensors are already sorted by name.
  checkNoOverlap(file, contents.tensors, dataRegion);
  return contents;
}

} // namespace q3::runtime
