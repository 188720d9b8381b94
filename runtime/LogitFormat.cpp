#include "runtime/LogitFormat.h"

#include <fmt/format.h>

#include <cmath>

namespace q3::runtime {

std::string formatLogit(double value) {
  if (std::isnan(value))
    return "nan";
  if (std::isinf(value))
    return value > 0 ? "inf" : "-inf";
  return fmt::format("{:e}", value);
}

} // namespace q3::runtime
