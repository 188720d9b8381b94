//===- Commands.h - the q3c subcommands -----------------------------------===//
#pragma once

namespace q3::tools {

// Each returns the process exit code; errors are thrown and reported by main.
int runDump();
int runEval();
int runRandomModel();
int runCompile();
int runKeygen();

} // namespace q3::tools
