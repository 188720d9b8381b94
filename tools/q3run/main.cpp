//===- main.cpp - q3run: runs a compiled q3c artifact ----------------------===//
//
// q3run MODEL.q3 --weights DIR --tokens 1,2,3 [--logits out.npy] [-n N]
// q3run bench MODEL.q3 --weights DIR [-p 128] [-g 64] [-r 3] [--json]
// q3run --list-devices
//
// Links only the runtime. Any error is one line "q3run: error: ..." on stderr
// and exit code 1. Usage: docs/q3run.md.
//
//===----------------------------------------------------------------------===//
#include "tools/q3run/Commands.h"

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

int main(int argc, char **argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() == 1 && args.front() == "--list-devices")
      return q3::q3run::listDevicesCommand();
    if (!args.empty() && args.front() == "bench")
      return q3::q3run::benchCommand(std::vector<std::string>(args.begin() + 1, args.end()));
    return q3::q3run::runCommand(args);
  } catch (const std::exception &error) {
    std::fflush(stdout);
    std::fprintf(stderr, "q3run: error: %s\n", error.what());
    return 1;
  }
}
