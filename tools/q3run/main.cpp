//===- main.cpp - q3run: runs a compiled q3c artifact ----------------------===//
//
// q3run MODEL.q3 --weights DIR --tokens 1,2,3 [--logits out.npy] [-n N]
// q3run MODEL.q3 --weights DIR --prompt TEXT [...]   (= q3run generate ...)
// q3run chat MODEL.q3 --weights DIR [...]
// q3run bench MODEL.q3 --weights DIR [-p 128] [-g 64] [-r 3] [--json]
// q3run compare MODEL.q3 --with OTHER.q3 --weights DIR [-p 128] [-g 32] [-r 10]
// q3run tokenize | detokenize | template ...
// q3run --list-devices
//
// Links only the runtime. Any error is one line "q3run: error: ..." on stderr
// and exit code 1. Usage: docs/q3run.md.
//
//===----------------------------------------------------------------------===//
#include "tools/q3run/Commands.h"
#include "tools/q3run/TextCommands.h"

#include "runtime/AtomicFile.h"
#include "runtime/FatalSignals.h"

#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <vector>

int main(int argc, char **argv) {
  // A SIGBUS on the mapped artifact or checkpoint is one line naming it.
  q3::runtime::installFatalSignalHandlers("q3run");
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    using namespace q3::q3run;
    const std::vector<std::string> rest =
        args.empty() ? args : std::vector<std::string>(args.begin() + 1, args.end());
    const std::string command = args.empty() ? "" : args.front();
    int code = 0;
    if (args.size() == 1 && command == "--list-devices")
      code = listDevicesCommand();
    else if (command == "bench")
      code = benchCommand(rest);
    else if (command == "compare")
      code = compareCommand(rest);
    else if (command == "chat")
      code = chatCommand(rest);
    else if (command == "generate")
      code = generateCommand(rest);
    else if (command == "tokenize")
      code = tokenizeCommand(rest);
    else if (command == "detokenize")
      code = detokenizeCommand(rest);
    else if (command == "template")
      code = templateCommand(rest);
    else if (wantsGeneration(args))
      code = generateCommand(args);
    else
      code = runCommand(args);
    // Output that never arrived (a full disk, a closed pipe) is an error.
    q3::runtime::flushStandardOutput();
    return code;
  } catch (const std::bad_alloc &) {
    std::fflush(stdout);
    std::fprintf(stderr, "q3run: error: out of memory: the model needs more memory than this "
                         "process may use\n");
    return 1;
  } catch (const std::exception &error) {
    std::fflush(stdout);
    std::fprintf(stderr, "q3run: error: %s\n", error.what());
    return 1;
  }
}
