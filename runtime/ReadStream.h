// Reading a stdio stream to its end without a stack buffer: the callers run
// on whatever stack the process has (`ulimit -s` can be tens of KiB), and a
// 16-64 KiB chunk array was the largest frame on q3run's path.
#pragma once

#include <cstdio>
#include <string>

namespace q3::runtime {

/// What is left of `file`, read into a string that grows on the heap. Stops
/// at the end or at an error: std::ferror(file) tells which.
std::string readToEnd(std::FILE *file);

} // namespace q3::runtime
