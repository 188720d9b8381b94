//===- CompileKernels.h - kernel MLIR -> LLVM -> object code --------------===//
#pragma once

#include "backends/cpu/CpuTarget.h"

#include <cstdint>
#include <string>
#include <vector>

namespace q3::cpu {

/// Lowers MLIR kernel source (scf/vector/memref/arith/math) to the LLVM
/// dialect, translates it to LLVM IR, adds the q3_kernel_<name> entry of
/// runtime/KernelABI.h for every public `func.func @q3k_<name>`, optimizes
/// at O3 for `target` and returns the ELF object. Throws std::runtime_error
/// with the MLIR diagnostics if the source does not parse or lower.
std::vector<uint8_t> compileKernelsToObject(const std::string &mlirSource, const CpuTarget &target);

/// compileKernelsToObject of each of `sources`, on all the CPUs this process
/// may use at once (each compile has its own MLIR and LLVM contexts). The
/// first compile that throws is rethrown.
std::vector<std::vector<uint8_t>> compileKernelsToObjects(const std::vector<std::string> &sources,
                                                          const CpuTarget &target);

/// Links ELF objects into one shared object with the system compiler driver
/// (`cc -shared`, libm). Throws std::runtime_error naming the command on failure.
std::vector<uint8_t> linkSharedObject(const std::vector<std::vector<uint8_t>> &objects);
inline std::vector<uint8_t> linkSharedObject(const std::vector<uint8_t> &object) {
  return linkSharedObject(std::vector<std::vector<uint8_t>>{object});
}

} // namespace q3::cpu
