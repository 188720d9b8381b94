#include "runtime/text/StopStrings.h"

#include <algorithm>

namespace q3::text {

StopStringFilter::StopStringFilter(std::vector<std::string> stops) {
  for (std::string &stop : stops)
    if (!stop.empty())
      stops_.push_back(std::move(stop));
}

StopStringFilter::Result StopStringFilter::push(std::string_view text) {
  Result result;
  if (stopped_)
    return result;
  held_.append(text);
  size_t first = std::string::npos;
  for (const std::string &stop : stops_)
    first = std::min(first, held_.find(stop));
  if (first != std::string::npos) {
    result.text = held_.substr(0, first);
    result.stopped = stopped_ = true;
    held_.clear();
    return result;
  }
  // Hold back the longest tail of the text that begins some stop string.
  size_t hold = 0;
  for (const std::string &stop : stops_)
    for (size_t length = std::min(stop.size() - 1, held_.size()); length > hold; --length)
      if (held_.compare(held_.size() - length, length, stop, 0, length) == 0) {
        hold = length;
        break;
      }
  result.text = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return result;
}

std::string StopStringFilter::flush() {
  std::string text;
  text.swap(held_);
  return stopped_ ? std::string() : text;
}

} // namespace q3::text
