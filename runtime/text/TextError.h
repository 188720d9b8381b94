// Text the tokenizer or the chat template cannot take (invalid UTF-8, a
// malformed conversation). The message is one line.
#pragma once

#include <stdexcept>

namespace q3::text {

class TextError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

} // namespace q3::text
