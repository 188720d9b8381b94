//===- ArgParser.cpp - q3run's small command-line parser -------------------===//
#include "tools/q3run/ArgParser.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

#include <fmt/format.h>

namespace q3::q3run {
namespace {

std::string joinNames(const std::vector<std::string> &names) {
  std::string out;
  for (const std::string &name : names)
    out += (out.empty() ? "" : ", ") + name;
  return out;
}

} // namespace

int64_t parseInteger(const std::string &what, const std::string &text, int64_t minimum,
                     int64_t maximum) {
  int64_t value = 0;
  const char *begin = text.data();
  const char *end = begin + text.size();
  // from_chars takes '-' but not '+'; accept "+5" too.
  if (begin != end && *begin == '+' && end - begin > 1 && begin[1] != '-')
    ++begin;
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (text.empty() || ec == std::errc::invalid_argument || ptr != end)
    throw UsageError(fmt::format("{}: '{}' is not an integer", what, text));
  if (ec == std::errc::result_out_of_range || value < minimum || value > maximum) {
    if (maximum == std::numeric_limits<int64_t>::max())
      throw UsageError(fmt::format("{}: expected an integer >= {}, got '{}'", what, minimum, text));
    throw UsageError(
        fmt::format("{}: expected an integer in [{}, {}], got '{}'", what, minimum, maximum, text));
  }
  return value;
}

double parseNumber(const std::string &what, const std::string &text, double minimum,
                   double maximum) {
  double value = 0;
  const char *begin = text.data();
  const char *end = begin + text.size();
  if (begin != end && *begin == '+')
    ++begin;
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(value))
    throw UsageError(fmt::format("{}: '{}' is not a number", what, text));
  if (value < minimum || value > maximum)
    throw UsageError(
        fmt::format("{}: expected a number in [{}, {}], got '{}'", what, minimum, maximum, text));
  return value;
}

ArgParser::ArgParser(std::string command, std::string usage, std::string description)
    : command_(std::move(command)), usage_(std::move(usage)), description_(std::move(description)) {
}

void ArgParser::addString(std::vector<std::string> names, std::string *destination,
                          std::string valueName, std::string help, bool required) {
  Option option{std::move(names), Kind::String, destination, std::move(valueName), std::move(help)};
  option.required = required;
  options_.push_back(std::move(option));
}

void ArgParser::addInt(std::vector<std::string> names, int64_t *destination, std::string valueName,
                       std::string help, int64_t minimum, int64_t maximum) {
  Option option{std::move(names), Kind::Int, destination, std::move(valueName), std::move(help)};
  option.minimum = minimum;
  option.maximum = maximum;
  options_.push_back(std::move(option));
}

void ArgParser::addDouble(std::vector<std::string> names, double *destination,
                          std::string valueName, std::string help, double minimum, double maximum) {
  Option option{std::move(names), Kind::Double, destination, std::move(valueName), std::move(help)};
  option.minimumDouble = minimum;
  option.maximumDouble = maximum;
  options_.push_back(std::move(option));
}

void ArgParser::addStringList(std::vector<std::string> names, std::vector<std::string> *destination,
                              std::string valueName, std::string help) {
  options_.push_back(
      Option{std::move(names), Kind::StringList, destination, std::move(valueName), std::move(help)});
}

void ArgParser::addFlag(std::vector<std::string> names, bool *destination, std::string help) {
  options_.push_back(Option{std::move(names), Kind::Flag, destination, "", std::move(help)});
}

void ArgParser::addPositional(std::string name, std::string *destination, std::string help) {
  positionals_.push_back(Positional{std::move(name), destination, std::move(help)});
}

ArgParser::Option *ArgParser::find(const std::string &name) {
  for (Option &option : options_)
    if (std::find(option.names.begin(), option.names.end(), name) != option.names.end())
      return &option;
  return nullptr;
}

bool ArgParser::given(const std::string &name) const {
  for (const Option &option : options_)
    if (std::find(option.names.begin(), option.names.end(), name) != option.names.end())
      return option.seen;
  return false;
}

std::string ArgParser::seeHelp() const { return " (see '" + command_ + " --help')"; }

void ArgParser::assign(Option &option, const std::string &spelling, const std::string &value) {
  switch (option.kind) {
  case Kind::String:
    *static_cast<std::string *>(option.destination) = value;
    break;
  case Kind::Int:
    *static_cast<int64_t *>(option.destination) =
        parseInteger(spelling, value, option.minimum, option.maximum);
    break;
  case Kind::Double:
    *static_cast<double *>(option.destination) =
        parseNumber(spelling, value, option.minimumDouble, option.maximumDouble);
    break;
  case Kind::StringList:
    static_cast<std::vector<std::string> *>(option.destination)->push_back(value);
    break;
  case Kind::Flag:
    *static_cast<bool *>(option.destination) = true;
    break;
  }
}

bool ArgParser::parse(const std::vector<std::string> &args) {
  size_t nextPositional = 0;
  bool optionsEnded = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &arg = args[i];
    if (optionsEnded || arg.size() < 2 || arg[0] != '-') {
      if (nextPositional == positionals_.size())
        throw UsageError("unexpected argument '" + arg + "'" + seeHelp());
      *positionals_[nextPositional++].destination = arg;
      continue;
    }
    if (arg == "--") {
      optionsEnded = true;
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      std::fputs(help().c_str(), stdout);
      return false;
    }
    std::string name = arg;
    std::string value;
    bool inlineValue = false;
    if (arg.compare(0, 2, "--") == 0) {
      if (size_t eq = arg.find('='); eq != std::string::npos) {
        name = arg.substr(0, eq);
        value = arg.substr(eq + 1);
        inlineValue = true;
      }
    }
    Option *option = find(name);
    if (!option)
      throw UsageError("unknown option '" + name + "'" + seeHelp());
    if (option->seen && option->kind != Kind::StringList)
      throw UsageError(name + " given more than once");
    option->seen = true;
    if (option->kind == Kind::Flag) {
      if (inlineValue)
        throw UsageError(name + " takes no value");
      assign(*option, name, "");
      continue;
    }
    if (!inlineValue) {
      if (i + 1 == args.size())
        throw UsageError(name + " needs a value (" + name + " " + option->valueName + ")");
      value = args[++i];
    }
    assign(*option, name, value);
  }
  if (nextPositional < positionals_.size())
    throw UsageError("missing " + positionals_[nextPositional].name + seeHelp());
  for (const Option &option : options_)
    if (option.required && !option.seen)
      throw UsageError("missing " + option.names.back() + " " + option.valueName + seeHelp());
  return true;
}

std::string ArgParser::help() const {
  std::string out = "usage: " + usage_ + "\n\n" + description_ + "\n";
  std::vector<std::pair<std::string, std::string>> rows;
  for (const Positional &positional : positionals_)
    rows.emplace_back(positional.name, positional.help);
  for (const Option &option : options_) {
    std::string left = joinNames(option.names);
    if (option.kind != Kind::Flag)
      left += " " + option.valueName;
    rows.emplace_back(left, option.help + (option.required ? " (required)" : ""));
  }
  rows.emplace_back("-h, --help", "show this help");
  size_t width = 0;
  for (const auto &row : rows)
    width = std::max(width, row.first.size());
  out += "\n";
  for (const auto &row : rows)
    out += fmt::format("  {:<{}}  {}\n", row.first, width, row.second);
  return out;
}

} // namespace q3::q3run
