//===- main.cpp - q3run: runs a compiled q3c artifact ----------------------===//
//
// q3run MODEL.q3 --weights DIR --tokens 1,2,3 [--logits out.npy] [-n N]
// q3run MODEL.q3 --weights DIR --prompt TEXT [...]   (= q3run generate ...)
// q3run chat MODEL.q3 --weights DIR [...]
// q3run bench MODEL.q3 --weights DIR [-p 128] [-g 64] [-r 3] [--json]
// q3run tokenize | detokenize | template ...
//
// Links only the runtime. Any error is one line "q3run: error: ..." on stderr
// and exit code 1. Usage: docs/q3run.md.
//
//===----------------------------------------------------------------------===//
#include "tools/q3run/Commands.h"
#include "tools/q3run/TextCommands.h"

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

int main(int argc, char **argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    using namespace q3::q3run;
    const std::vector<std::string> rest =
        args.empty() ? args : std::vector<std::string>(args.begin() + 1, args.end());
    const std::string command = args.empty() ? "" : args.front();
    if (command == "bench")
      return benchCommand(rest);
    if (command == "chat")
      return chatCommand(rest);
    if (command == "generate")
      return generateCommand(rest);
    if (command == "tokenize")
      return tokenizeCommand(rest);
    if (command == "detokenize")
      return detokenizeCommand(rest);
    if (command == "template")
      return templateCommand(rest);
    if (wantsGeneration(args))
      return generateCommand(args);
    return runCommand(args);
  } catch (const std::exception &error) {
    std::fflush(stdout);
    std::fprintf(stderr, "q3run: error: %s\n", error.what());
    return 1;
  }
}
