//===- ArgParser.h - q3run's small command-line parser ---------------------===//
//
// q3run links only the runtime (no LLVM), so it parses its own flags: long
// options ("--threads 4" or "--threads=4"), short ones ("-n 32"), boolean
// flags, and positional arguments. Every mistake is a UsageError with a
// one-line message naming the option; "--help"/"-h" prints the help text.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace q3::q3run {

/// A bad command line. The message is one line.
class UsageError : public std::invalid_argument {
public:
  using std::invalid_argument::invalid_argument;
};

class ArgParser {
public:
  /// `command` starts every help text ("q3run", "q3run bench"); `usage` is the
  /// synopsis line(s); `description` a paragraph shown under it.
  ArgParser(std::string command, std::string usage, std::string description);

  /// `names` like {"-n"} or {"--threads"}; `valueName` is shown in the help.
  void addString(std::vector<std::string> names, std::string *destination, std::string valueName,
                 std::string help, bool required = false);
  /// A decimal integer in [minimum, maximum].
  void addInt(std::vector<std::string> names, int64_t *destination, std::string valueName,
              std::string help, int64_t minimum, int64_t maximum);
  /// A decimal number in [minimum, maximum].
  void addDouble(std::vector<std::string> names, double *destination, std::string valueName,
                 std::string help, double minimum, double maximum);
  /// An option that may be given several times; each value is appended.
  void addStringList(std::vector<std::string> names, std::vector<std::string> *destination,
                     std::string valueName, std::string help);
  void addFlag(std::vector<std::string> names, bool *destination, std::string help);
  /// Positional arguments are filled in the order they are added; all are required.
  void addPositional(std::string name, std::string *destination, std::string help);

  /// Parses `args` (without the program and command names). Returns false
  /// when --help was given (the help is printed to stdout); throws UsageError.
  bool parse(const std::vector<std::string> &args);

  std::string help() const;

  /// True when the option named `name` was on the command line (after parse()).
  bool given(const std::string &name) const;

private:
  enum class Kind { String, Int, Double, StringList, Flag };
  struct Option {
    std::vector<std::string> names;
    Kind kind;
    void *destination;
    std::string valueName;
    std::string help;
    bool required = false;
    int64_t minimum = 0;
    int64_t maximum = 0;
    double minimumDouble = 0;
    double maximumDouble = 0;
    bool seen = false;
  };
  struct Positional {
    std::string name;
    std::string *destination;
    std::string help;
  };

  Option *find(const std::string &name);
  void assign(Option &option, const std::string &spelling, const std::string &value);
  std::string seeHelp() const;

  std::string command_;
  std::string usage_;
  std::string description_;
  std::vector<Option> options_;
  std::vector<Positional> positionals_;
};

/// Parses a decimal number in [minimum, maximum]; `what` names it in the error.
double parseNumber(const std::string &what, const std::string &text, double minimum,
                   double maximum);

/// Parses a decimal integer in [minimum, maximum]; `what` names it in the error.
int64_t parseInteger(const std::string &what, const std::string &text, int64_t minimum,
                     int64_t maximum);

} // namespace q3::q3run
