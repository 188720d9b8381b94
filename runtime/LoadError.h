// The one exception type the runtime throws for bad files and mismatched
// weights. Messages are a single line naming the file, the tensor (if any),
// and what was expected versus found.
#pragma once

#include <cstdint>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace q3::runtime {

class LoadError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// Makes untrusted text (tensor names, file names, parser messages) safe to put
// in a one-line message: control characters and bytes that are not valid UTF-8
// become \n, \t, \xNN escapes, and very long text is shortened.
std::string printable(std::string_view text);

// The length of the well-formed UTF-8 sequence starting at text[i] (a lead
// byte of 0x80 or more), or 0 where it is not one: overlong, a surrogate,
// above U+10FFFF or cut short.
size_t utf8SequenceLength(std::string_view text, size_t i);

// "[1024, 2048]"
std::string formatShape(const std::vector<int64_t> &shape);

// A JSON parser's message made printable, without nlohmann's
// "[json.exception.parse_error.101] " prefix.
std::string describeJsonError(const std::exception &error);

} // namespace q3::runtime
