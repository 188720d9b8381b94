#include "runtime/text/PythonJson.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace q3::text {
namespace {

void appendString(std::string &out, const std::string &text) {
  out += '"';
  for (unsigned char c : text) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\f':
      out += "\\f";
      break;
    default:
      if (c < 0x20) {
        char escape[8];
        std::snprintf(escape, sizeof(escape), "\\u%04x", c);
        out += escape;
      } else {
        out += char(c);
      }
    }
  }
  out += '"';
}

/// Python's float repr: the shortest digits that round-trip, in positional
/// notation when the decimal exponent is in [-4, 16), else as d.ddde+XX.
void appendFloat(std::string &out, double value) {
  if (std::isnan(value)) {
    out += "NaN";
    return;
  }
  if (std::isinf(value)) {
    out += value < 0 ? "-Infinity" : "Infinity";
    return;
  }
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  std::string scientific(buffer, result.ptr);
  // "-1.2345e+02" -> sign, digits "12345", exponent 2
  std::string sign;
  if (scientific[0] == '-') {
    sign = "-";
    scientific.erase(0, 1);
  }
  const size_t e = scientific.find('e');
  std::string digits = scientific.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exponent = std::atoi(scientific.c_str() + e + 1);
  out += sign;
  if (exponent >= -4 && exponent < 16) {
    if (exponent >= 0) {
      if (int(digits.size()) <= exponent + 1) {
        out += digits + std::string(size_t(exponent + 1) - digits.size(), '0') + ".0";
      } else {
        out += digits.substr(0, size_t(exponent + 1)) + "." + digits.substr(size_t(exponent + 1));
      }
    } else {
      out += "0." + std::string(size_t(-exponent - 1), '0') + digits;
    }
    return;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1)
    out += "." + digits.substr(1);
  // Python's repr: a sign and at least two exponent digits ("1e-05", "1e+16").
  const std::string exponentDigits = std::to_string(std::abs(exponent));
  out += exponent < 0 ? "e-" : "e+";
  if (exponentDigits.size() < 2)
    out += '0';
  out += exponentDigits;
}

void append(std::string &out, const nlohmann::ordered_json &value) {
  switch (value.type()) {
  case nlohmann::json::value_t::null:
    out += "null";
    break;
  case nlohmann::json::value_t::boolean:
    out += value.get<bool>() ? "true" : "false";
    break;
  case nlohmann::json::value_t::number_integer:
    out += std::to_string(value.get<int64_t>());
    break;
  case nlohmann::json::value_t::number_unsigned:
    out += std::to_string(value.get<uint64_t>());
    break;
  case nlohmann::json::value_t::number_float:
    appendFloat(out, value.get<double>());
    break;
  case nlohmann::json::value_t::string:
    appendString(out, value.get_ref<const std::string &>());
    break;
  case nlohmann::json::value_t::array: {
    out += '[';
    bool first = true;
    for (const auto &item : value) {
      if (!first)
        out += ", ";
      first = false;
      append(out, item);
    }
    out += ']';
    break;
  }
  case nlohmann::json::value_t::object: {
    out += '{';
    bool first = true;
    for (const auto &[key, item] : value.items()) {
      if (!first)
        out += ", ";
      first = false;
      appendString(out, key);
      out += ": ";
      append(out, item);
    }
    out += '}';
    break;
  }
  default: // binary and discarded values do not come from parsing JSON text
    out += "null";
  }
}

} // namespace

std::string pythonJsonDumps(const nlohmann::ordered_json &value) {
  std::string out;
  append(out, value);
  return out;
}

} // namespace q3::text
