#!/usr/bin/env bash
# q3c setup on a fresh Debian 12 (bookworm) machine:
#   1. installs every build and test dependency from Debian's packages,
#   2. configures and builds q3c in ./build,
#   3. runs the main job on the bundled default model (models/tiny.json):
#      writes a random-weight checkpoint with a tokenizer cut down from Qwen3's,
#      prints its IR, generates tokens, compiles it and answers a text prompt.
# Run as root or with sudo. Re-running it is cheap: apt and ninja skip done work.
set -euo pipefail

cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

PACKAGES=(
  # toolchain and build
  build-essential cmake ninja-build git ca-certificates
  # MLIR/LLVM 16 (libMLIR.so, mlir-tblgen, FileCheck, lit) and clang-16 for the fuzzers
  llvm-16-dev llvm-16-tools libmlir-16-dev mlir-16-tools clang-16 libclang-rt-16-dev lld-16
  # libraries
  nlohmann-json3-dev libfmt-dev libgtest-dev libgmock-dev
  # ed25519 artifact signatures (q3c compile --sign, q3run --require-signature);
  # XXH3 checksums of the weights an artifact embeds (q3c compile --embed-weights)
  libsodium-dev libxxhash-dev
  # Vulkan: headers, loader, the lavapipe CPU device (the Vulkan tests run on
  # it), the Khronos validation layer (a test runs a generation under it),
  # GLSL/SPIR-V tools (spirv-val checks every generated module)
  libvulkan-dev mesa-vulkan-drivers vulkan-validationlayers glslc glslang-tools spirv-tools
  libshaderc-dev
  # the independent numpy reference used by the parity tests
  python3 python3-numpy
  # memcheck of the interpreter and passes (tests/unit/CMakeLists.txt)
  valgrind
  # the Unicode Character Database: the tokenizer's tables (scripts/gen_unicode_tables.py)
  # and the NFC conformance test; Jinja renders the chat template's references
  unicode-data python3-jinja2
)

install_packages() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "setup: all ${#PACKAGES[@]} packages already installed"
    return
  fi
  echo "setup: installing ${missing[*]}"
  as_root apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

build() {
  local werror=OFF
  [ "${CI:-}" = "true" ] && werror=ON
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DQ3_WERROR=$werror
  cmake --build "$BUILD_DIR" -j "$(nproc)"
}

run_default_model() {
  local q3c="$BUILD_DIR/tools/q3c/q3c" q3run="$BUILD_DIR/tools/q3run/q3run" model="$BUILD_DIR/models/tiny"
  "$q3c" random-model --config tiny --seed 0 -o "$model" --tokenizer models/qwen3-tokenizer
  "$q3c" dump "$model" -o "$model.mlir"
  echo "--- q3c dump $model: the dispatches of the first layer (all IR in $model.mlir) ---"
  grep -m 7 -E 'q3.dispatch' "$model.mlir"
  echo "--- q3c dump $model --stats ---"
  "$q3c" dump "$model" --stats
  echo "--- q3c eval $model --tokens 1,2,3 -n 16 ---"
  "$q3c" eval "$model" --tokens 1,2,3 -n 16
  echo "--- q3c compile $model -o $model.q3 ---"
  "$q3c" compile "$model" -o "$model.q3"
  echo "--- q3run $model.q3 --prompt \"Why is the sky blue?\" (random weights: the answer is gibberish) ---"
  "$q3run" "$model.q3" --weights "$model" --prompt "Why is the sky blue?" -n 48 --seed 1
}

install_packages
build
run_default_model
