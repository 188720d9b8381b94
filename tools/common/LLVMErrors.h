//===- LLVMErrors.h - LLVM's errors in the project's one-line format -------===//
//
// q3c and q3-opt link LLVM, whose default answer to a fatal error, a failed
// allocation or a bad command line is "LLVM ERROR: ..." and an abort with a
// stack dump, or a multi-line usage complaint. These route all of them to one
// line "<tool>: error: ..." and exit code 1, removing any temporary output
// file first (runtime/AtomicFile.h).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <vector>

namespace q3::tools {

/// Installs LLVM's fatal-error and bad-alloc handlers for `tool` ("q3c"),
/// an interrupt function that removes temporary outputs, and a handler that
/// turns a SIGBUS on a mapped input file into one line naming the file.
/// Call once, after llvm::InitLLVM.
void installLLVMErrorHandlers(const char *tool);

/// llvm::cl::ParseCommandLineOptions, except that errors come back as one
/// line ("for the -o option: must be specified at least once (see 'q3c
/// compile --help')") instead of being printed: returns "" on success.
/// `subcommands` are the tool's subcommand names, for the --help hint.
std::string parseCommandLine(int argc, char **argv, const char *overview, const char *tool,
                             const std::vector<std::string> &subcommands = {});

/// Flushes llvm::outs(); throws runtime::OutputError ("standard output:
/// cannot write: ...") if anything written to it failed, and clears the
/// error so that LLVM does not report it again at exit.
void flushLLVMStandardOutput();

} // namespace q3::tools
