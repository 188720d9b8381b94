//===- CpuTarget.h - the CPU a kernel library is compiled for -------------===//
#pragma once

#include "mlir/IR/BuiltinOps.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <string>
#include <vector>

namespace q3::cpu {

/// The `matmul` choices of cpu-select-matmul (q3c's --prefill-matmul) and of
/// cpu-select-attention-matmul (--attention-matmul).
inline constexpr llvm::StringLiteral kProductMatmulChoices[] = {"auto", "f32", "avx512bf16", "amx"};
inline constexpr llvm::StringLiteral kAttentionMatmulChoices[] = {"auto", "f32", "avx512bf16"};

/// `choices` as an error message lists them: "auto, f32 or avx512bf16".
std::string choicesText(llvm::ArrayRef<llvm::StringLiteral> choices);

struct CpuTarget {
  std::string name;     // what the user asked for: host, x86-64-v2, x86-64-v3, x86-64-v4
  std::string llvmCpu;  // LLVM's CPU name
  std::string features; // LLVM feature string, "+avx2,+fma,..."
  std::vector<std::string> requiredFeatures; // what the runtime must check on its host
};

/// "host" (this machine, as LLVM detects it), an x86-64 microarchitecture
/// level, or a 64-bit x86 CPU LLVM knows by name (cross-compiling for it).
/// Anything else throws std::invalid_argument listing the choices.
CpuTarget resolveCpuTarget(const std::string &name);

/// Whether `target` has the LLVM feature `feature` ("avx512bf16", "amx-tile").
bool targetHas(const CpuTarget &target, const std::string &feature);

/// Accumulators (vectors of 16 f32 lanes) per weight row of a product's
/// one-row (decode) loop on `target` when it reads `rowsSideBySide` rows at
/// once: the most of 4, 2 and 1 whose registers, rows x accumulators, take
/// at most half of the target's vector registers (32 zmm with AVX-512, 16
/// ymm with AVX, each vector two of them, 16 xmm before, four), so the
/// loads and the widened weights keep the rest. Two rows of four on AVX2
/// (all 16 ymm) spilled on every step: decode 1.10x with two (AMD EPYC
/// family 23). At least 1.
int64_t decodeAccumulatorsFor(const CpuTarget &target, int64_t rowsSideBySide);

/// Value columns (16 f32 lanes each) per head that one pass of decode
/// attention over a block's values sums, for `heads` heads per workgroup and
/// `columns` columns per value row: the most, up to all `columns`, whose
/// registers (heads x columns) take at most half of the target's vector
/// registers, as decodeAccumulatorsFor counts them. AVX-512 with two heads
/// sums 8 (all of head_dim 128) per pass; AVX2 2: 8 there spilled each
/// accumulator to the stack on every FMA (f16 cache 12.6 -> 14.0 GB/s with
/// 2, AMD EPYC family 23). At least 1.
int64_t decodeValueAccumulatorsFor(const CpuTarget &target, int64_t heads, int64_t columns);

/// The module attribute that records what a module is compiled for:
/// `q3.target = {backend = "cpu", cpu = "host", llvm_cpu = "znver3",
/// features = ["avx2", ...]}`. The CPU target passes read it.
inline constexpr const char *kTargetAttrName = "q3.target";
void setTargetAttribute(mlir::ModuleOp module, const CpuTarget &target);
/// The target recorded on `module`; throws std::runtime_error without one.
CpuTarget targetOf(mlir::ModuleOp module);

} // namespace q3::cpu
