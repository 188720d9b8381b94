// Stops a text stream at the first occurrence of any of a set of strings
// (q3run --stop). Text that could be the start of a stop string is held back
// until it is known not to be, so a stop string is never printed, not even
// in part.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace q3::text {

class StopStringFilter {
public:
  explicit StopStringFilter(std::vector<std::string> stops);

  struct Result {
    std::string text; // safe to emit
    bool stopped = false;
  };
  /// Adds `text`; after a stop, everything is dropped.
  Result push(std::string_view text);
  /// The held-back text (at the end of the stream, or where the text it holds
  /// can no longer continue into a stop string).
  std::string flush();
  bool stopped() const { return stopped_; }

private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

} // namespace q3::text
