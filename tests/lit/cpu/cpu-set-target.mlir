// RUN: %q3-opt %s -cpu-set-target=cpu=x86-64-v3 | FileCheck %s --check-prefix=V3
// RUN: %q3-opt %s -cpu-set-target=cpu=x86-64-v4 | FileCheck %s --check-prefix=V4
// RUN: %q3-opt %s -cpu-set-target=cpu=sapphirerapids | FileCheck %s --check-prefix=SPR
// RUN: %q3-opt %s -cpu-set-target=cpu=host | FileCheck %s --check-prefix=HOST
// RUN: not %q3-opt %s -cpu-set-target=cpu=pentium9 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: %q3-opt %S/Inputs/f16-cache.mlir -cpu-set-target=cpu=x86-64-v3 | FileCheck %s --check-prefix=F16
// RUN: not %q3-opt %S/Inputs/f16-cache.mlir -cpu-set-target=cpu=x86-64-v2 2>&1 | FileCheck %s --check-prefix=F16V2

// The module records the CPU and the features the loading machine must have;
// the later CPU passes decide from these features, never from the name.
// V3: module attributes {q3.target = {backend = "cpu", cpu = "x86-64-v3", features = ["sse4.2", "popcnt", "ssse3", "avx", "avx2", "fma", "f16c", "bmi2"], llvm_cpu = "x86-64-v3"}}
// V4: q3.target = {backend = "cpu", cpu = "x86-64-v4", features = [{{.*}}"avx512f", "avx512bw", "avx512dq", "avx512vl"], llvm_cpu = "x86-64-v4"}
// A named CPU carries LLVM's feature list for it (AMX and vdpbf16ps here).
// SPR: q3.target = {backend = "cpu", cpu = "sapphirerapids", features = [{{.*}}"avx512bf16"{{.*}}"amx-bf16"{{.*}}"amx-tile"{{.*}}], llvm_cpu = "sapphirerapids"}
// host is this machine as LLVM sees it.
// HOST: q3.target = {backend = "cpu", cpu = "host", features = [{{.*}}"avx2"{{.*}}], llvm_cpu = "{{[a-z0-9-]+}}"}
// The CPU kernels store f32, bf16 and f16 caches; f16 needs F16C, so a target
// without it is refused here, before any kernel is chosen.
// F16: q3.target = {backend = "cpu", cpu = "x86-64-v3"
// F16: !q3.kv_cache<layers = 1, kv_heads = 1, head_dim = 8, element = f16>
// F16V2: error: cpu-set-target: an f16 KV cache needs the f16c feature (x86-64-v3 or newer), which --cpu=x86-64-v2 lacks (--kv-cache)
// UNKNOWN: error: cpu-set-target: --cpu: expected host, x86-64-v2, x86-64-v3, x86-64-v4 or a CPU LLVM knows (e.g. znver4, sapphirerapids), got 'pentium9'
module {
  func.func @forward(%c: !q3.kv_cache<layers = 1, kv_heads = 1, head_dim = 8>) {
    return
  }
}
