//===- main.cpp - the q3c driver ------------------------------------------===//
//
//   q3c dump MODEL              print the q3 graph IR
//   q3c eval MODEL_DIR ...      reference logits / greedy ids on a checkpoint
//   q3c random-model ...        write a random-weight checkpoint
//   q3c compile MODEL -o M.q3   compile a deployable artifact (--sign KEY)
//   q3c keygen -o KEY           a key pair for signing artifacts
//
// Every failure is one line on stderr, "q3c: error: ...", and exit code 1.
//
//===----------------------------------------------------------------------===//
#include "tools/common/LLVMErrors.h"
#include "tools/q3c/CommandLine.h"
#include "tools/q3c/Commands.h"

#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <exception>
#include <new>

namespace {

int runSubcommand() {
  using namespace q3::tools;
  if (dumpCommand)
    return runDump();
  if (evalCommand)
    return runEval();
  if (randomModelCommand)
    return runRandomModel();
  if (compileCommand)
    return runCompile();
  if (keygenCommand)
    return runKeygen();
  llvm::errs()
      << "q3c: error: missing subcommand (dump, eval, compile, random-model or keygen); see q3c --help\n";
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  using namespace q3::tools;
  installLLVMErrorHandlers("q3c");
  for (llvm::cl::SubCommand *sub :
       {&dumpCommand, &evalCommand, &randomModelCommand, &compileCommand, &keygenCommand})
    llvm::cl::HideUnrelatedOptions(q3Category, *sub);
  llvm::cl::HideUnrelatedOptions(q3Category);
  const std::string usageError = parseCommandLine(
      argc, argv,
      "q3c: an ahead-of-time compiler for Qwen3 models\n\n"
      "  q3c dump MODEL                          print the q3 graph IR\n"
      "  q3c eval MODEL_DIR --tokens 1,2,3       reference logits (--logits out.npy, -n N)\n"
      "  q3c random-model --config C -o DIR      random-weight checkpoint\n"
      "  q3c compile MODEL --target cpu -o M.q3  deployable artifact (run it with q3run)\n"
      "  q3c keygen -o KEY                       key pair for compile --sign\n\n"
      "Run 'q3c SUBCOMMAND --help' for the options of each.\n",
      "q3c", {"dump", "eval", "random-model", "compile", "keygen"});
  if (!usageError.empty()) {
    llvm::errs() << "q3c: error: " << usageError << "\n";
    return 1;
  }
  try {
    const int code = runSubcommand();
    flushLLVMStandardOutput();
    return code;
  } catch (const std::bad_alloc &) {
    llvm::errs() << "q3c: error: out of memory: the model needs more memory than this process "
                    "may use\n";
    return 1;
  } catch (const std::exception &e) {
    llvm::errs() << "q3c: error: " << e.what() << "\n";
    return 1;
  }
}
