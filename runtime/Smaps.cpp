#include "runtime/Smaps.h"
#include "runtime/ReadStream.h"

#include <cstdio>

namespace q3::runtime {

std::optional<uint64_t> smapsFieldKb(std::string_view smaps, uintptr_t start,
                                     std::string_view field) {
  const std::string pattern = std::string(field) + ": %llu kB";
  bool inMapping = false;
  while (!smaps.empty()) {
    const size_t newline = smaps.find('\n');
    const std::string line(smaps.substr(0, newline));
    smaps.remove_prefix(newline == std::string_view::npos ? smaps.size() : newline + 1);
    unsigned long long begin = 0, end = 0, kb = 0;
    // A mapping's header, "begin-end perms offset dev inode [path]" (no field
    // line starts with two hex numbers joined by '-').
    if (std::sscanf(line.c_str(), "%llx-%llx ", &begin, &end) == 2)
      inMapping = begin == start;
    else if (inMapping && std::sscanf(line.c_str(), pattern.c_str(), &kb) == 1)
      return uint64_t(kb);
  }
  return std::nullopt;
}

std::optional<std::string> readSelfSmaps() {
  std::FILE *file = std::fopen("/proc/self/smaps", "re");
  if (!file)
    return std::nullopt;
  std::string text = readToEnd(file);
  std::fclose(file);
  return text;
}

} // namespace q3::runtime
