//===- LLVMErrors.cpp -----------------------------------------------------===//
#include "tools/common/LLVMErrors.h"

#include "runtime/AtomicFile.h"
#include "runtime/FatalSignals.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <sstream>

#include <sys/mman.h>
#include <unistd.h>

namespace q3::tools {
namespace {

const char *toolName = "q3";

void writeStderr(const char *text) {
  for (size_t size = std::strlen(text); size > 0;) {
    ssize_t n = ::write(STDERR_FILENO, text, size);
    if (n <= 0)
      return;
    text += n;
    size -= size_t(n);
  }
}

/// The reason on one line: LLVM's messages may hold newlines.
std::string oneLine(std::string text) {
  for (char &c : text)
    if (c == '\n' || c == '\r')
      c = ' ';
  while (!text.empty() && text.back() == ' ')
    text.pop_back();
  return text;
}

// A fatal error may come from any thread and leaves LLVM in an unknown
// state: print, remove unfinished outputs, and exit without running static
// destructors (which could report the same error again).
void onFatalError(void *, const char *reason, bool) {
  runtime::removeTemporaryOutputs();
  std::string line = std::string(toolName) + ": error: " + oneLine(reason) + "\n";
  writeStderr(line.c_str());
  ::_exit(1);
}

// Allocating is what failed: no std::string here.
void onBadAlloc(void *, const char *reason, bool) {
  runtime::removeTemporaryOutputs();
  writeStderr(toolName);
  writeStderr(": error: out of memory (");
  writeStderr(reason);
  writeStderr("): the model needs more memory than this process may use\n");
  ::_exit(1);
}

bool startsWith(const std::string &text, const std::string &prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

/// One of llvm::cl's error lines without the program name and the
/// "Try: '...'" / "See: ..." pointers (replaced by one hint at the end).
std::string tidyLine(std::string line, const std::string &tool) {
  for (const std::string &prefix : {tool + ": ", std::string("error: ")})
    if (startsWith(line, prefix))
      line.erase(0, prefix.size());
  for (const char *pointer : {"  Try: '", " See: ", ": See: "})
    if (size_t at = line.find(pointer); at != std::string::npos)
      line.erase(at);
  while (!line.empty() && (line.back() == '!' || line.back() == '.' || line.back() == ' '))
    line.pop_back();
  if (!line.empty() && line[0] >= 'A' && line[0] <= 'Z')
    line[0] = char(line[0] - 'A' + 'a');
  // "for the -o option: must be specified at least once" -> "missing -o".
  const std::string forThe = "for the ", option = " option: ";
  if (startsWith(line, forThe)) {
    if (size_t at = line.find(option); at != std::string::npos) {
      const std::string name = line.substr(forThe.size(), at - forThe.size());
      const std::string what = line.substr(at + option.size());
      if (what == "must be specified at least once")
        return "missing " + name;
      if (what == "requires a value")
        return name + " needs a value";
      if (size_t value = what.find(" value invalid for "); value != std::string::npos)
        return name + ": " + what.substr(0, value) + " is not a valid value";
      return name + ": " + what;
    }
  }
  return line;
}

/// Redirects file descriptor 2 (llvm::errs() is unbuffered on it) into a
/// memory file for as long as it lives.
class StderrCapture {
public:
  StderrCapture() {
    llvm::errs().flush();
    memory_ = ::memfd_create("q3-cl-errors", MFD_CLOEXEC);
    saved_ = memory_ >= 0 ? ::dup(STDERR_FILENO) : -1;
    if (saved_ >= 0)
      ::dup2(memory_, STDERR_FILENO);
  }
  ~StderrCapture() {
    restore();
    if (memory_ >= 0)
      ::close(memory_);
  }
  std::string text() {
    restore();
    std::string text;
    if (memory_ < 0)
      return text;
    char chunk[4096];
    for (off_t at = 0;;) {
      ssize_t n = ::pread(memory_, chunk, sizeof chunk, at);
      if (n <= 0)
        break;
      text.append(chunk, size_t(n));
      at += n;
    }
    return text;
  }

private:
  void restore() {
    if (saved_ < 0)
      return;
    llvm::errs().flush();
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
    saved_ = -1;
  }
  int memory_ = -1, saved_ = -1;
};

} // namespace

void installLLVMErrorHandlers(const char *tool) {
  toolName = tool;
  llvm::install_fatal_error_handler(onFatalError);
  llvm::install_bad_alloc_error_handler(onBadAlloc);
  runtime::installFatalSignalHandlers(tool);
}

std::string parseCommandLine(int argc, char **argv, const char *overview, const char *tool,
                             const std::vector<std::string> &subcommands) {
  std::string errors;
  llvm::raw_string_ostream stream(errors);
  // Some of llvm::cl's complaints ("must be specified at least once") go to
  // llvm::errs() whatever stream it is given: catch those too.
  bool parsed;
  {
    StderrCapture capture;
    parsed = llvm::cl::ParseCommandLineOptions(argc, argv, overview, &stream);
    stream << capture.text();
  }
  if (parsed)
    return "";
  stream.flush();
  std::string message;
  std::istringstream lines(errors);
  for (std::string line; std::getline(lines, line);) {
    line = tidyLine(line, tool);
    if (line.empty() || startsWith(line, "must specify at least") ||
        startsWith(line, "can specify at most"))
      continue; // the line before says it
    if (startsWith(line, "missing ") &&
        message.find(line.substr(8) + " needs a value") != std::string::npos)
      continue; // "--tokens needs a value" says it
    message += (message.empty() ? "" : "; ") + line;
  }
  std::string help = tool;
  for (const std::string &sub : subcommands)
    if (argc > 1 && sub == argv[1])
      help += " " + sub;
  return (message.empty() ? std::string("invalid command line") : message) + " (see '" + help +
         " --help')";
}

void flushLLVMStandardOutput() {
  llvm::raw_fd_ostream &out = llvm::outs();
  out.flush();
  if (!out.has_error())
    return;
  const std::string reason = out.error().message();
  out.clear_error();
  throw runtime::OutputError("standard output: cannot write: " + reason);
}

} // namespace q3::tools
