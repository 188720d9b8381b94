// 64-bit FNV-1a: a tiny, dependency-free hash for detecting corrupt files. It
// is not cryptographic; it catches truncation, bit flips and mangled bytes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace q3::runtime {

constexpr uint64_t kFnv1a64Basis = 0xcbf29ce484222325ull;
constexpr uint64_t kFnv1a64Prime = 0x100000001b3ull;

// Continues the hash `state` over `size` bytes; start with kFnv1a64Basis.
uint64_t fnv1a64(const void *data, size_t size, uint64_t state = kFnv1a64Basis);

// Continues the hash over `count` zero bytes (for fields hashed as zero).
uint64_t fnv1a64Zeros(size_t count, uint64_t state);

} // namespace q3::runtime
