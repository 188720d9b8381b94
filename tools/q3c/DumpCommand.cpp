//===- DumpCommand.cpp - q3c dump -----------------------------------------===//
#include "tools/q3c/CommandLine.h"
#include "tools/q3c/Commands.h"

#include "frontend/Presets.h"
#include "ir/BuildGraph.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <stdexcept>

namespace q3::tools {

int runDump() {
  std::vector<std::string> warnings;
  frontend::ModelConfig config = frontend::resolveModelConfig(dumpModel, &warnings);
  printWarnings(warnings);
  mlir::MLIRContext context;
  auto module = ir::buildQwen3Graph(context, config);
  std::error_code error;
  llvm::ToolOutputFile output(dumpOutput, error, llvm::sys::fs::OF_Text);
  if (error)
    throw std::runtime_error(dumpOutput + ": " + error.message());
  module->print(output.os());
  output.os() << "\n";
  output.keep();
  return 0;
}

} // namespace q3::tools
