#!/bin/bash
# Builds .dev/ in the repository root: what scripts/device/run.sh needs on a
# lent GPU machine (q3run and its libraries, Vulkan and CPU artifacts, small
# models with their expected outputs, Debian's Vulkan loader in .gl/). Run
# from the repository root after the build; then, with the device tool:
#   run: bash scripts/device/run.sh   carry: [".dev", ".gl"]
# LLAMA_BUILD=DIR (a llama.cpp build's bin/ with llama-bench) and
# LLAMA_SRC=DIR (its source, for gguf-py) add llama.cpp beside q3c.
# docs/vulkan-backend.md, "Measured on an NVIDIA H200", has what it found.
set -euo pipefail
grep -qx '/.dev/' .git/info/exclude 2>/dev/null || echo '/.dev/' >> .git/info/exclude
grep -qx '/.gl/' .git/info/exclude 2>/dev/null || echo '/.gl/' >> .git/info/exclude
D=.dev; rm -rf $D; mkdir -p $D/bin $D/lib $D/art $D/models $D/expect
Q3C=build/tools/q3c/q3c; REF="/usr/bin/python3 scripts/qwen3_reference.py"
cp build/tools/q3run/q3run $D/bin/; strip $D/bin/q3run
for l in libfmt.so.9 libsodium.so.23 libxxhash.so.0; do cp -L /lib/x86_64-linux-gnu/$l $D/lib/; done
if [ "${PARITY:-1}" = 1 ]; then # PARITY=0: only the 0.6B shape (room for llama.cpp)
# A. goldens: Vulkan artifacts (expected outputs travel in tests/golden)
for c in gqa2_untied_f32 mqa_hdlarger_tied_bf16 mha_hdsmaller_untied_f16 gqa4_tied_bf16 gqa8_untied_f32 mqa6_untied_f16 mha_hdlarger_tied_f32 sharded_gqa2_bf16 tied_redundant_lmhead_bf16 gqa2_hdsmaller_tied_f16; do
  $Q3C compile tests/golden/$c --target vulkan --no-tokenizer -o $D/art/$c.vk.q3 > /dev/null
done
# longer greedy runs equal the CPU backend's (computed here)
for c in gqa4_tied_bf16 mqa6_untied_f16; do
  $Q3C compile tests/golden/$c --target cpu --cpu=x86-64-v3 --no-tokenizer -o ${TMPDIR:-/tmp}/kit-$c.cpu.q3 > /dev/null
  build/tools/q3run/q3run ${TMPDIR:-/tmp}/kit-$c.cpu.q3 --weights tests/golden/$c --tokens 9,1,2,3,40,50,60,7,8,9,10,11 -n 16 > $D/expect/$c.long.ids
done
# B. independent-reference configs, with KV cache variants
I=tests/lit/tools/Inputs
gen() { # name config seed dtype tokens greedy
  $REF random-model --config $I/$2 --seed $3 --dtype $4 -o $D/models/$1 > /dev/null
  for kv in f32 f16 bf16; do
    extra=""; [ $kv != f32 ] && extra="--kv-cache $kv"
    $REF logits --model $D/models/$1 --tokens $5 -o $D/expect/$1.$kv.npy --greedy $6 $extra > $D/expect/$1.$kv.ids
    $Q3C compile $D/models/$1 --target vulkan --kv-cache=$kv --no-tokenizer -o $D/art/$1.$kv.vk.q3 > /dev/null 2>&1
  done
  echo "$5 $6" > $D/expect/$1.args
}
gen gqa3 gqa3-hd24.json 7 bf16 5,299,0,17,17,42,8 6
gen mqa8 mqa8-f32.json 3 f32 1,2,3,210,4 6
gen nohd no-head-dim-f16.json 11 f16 9,8,7,6 5
fi
# C. the 0.6B shape: the device regenerates the checkpoint with the same
# numpy generator (md5 checked); artifacts and expected outputs from here.
R=${TMPDIR:-/tmp}/q3-device-0.6b
[ -f $R/model.safetensors ] || { mkdir -p $R; $Q3C random-model --config qwen3-0.6b --seed 1 --dtype bf16 -o $R.q3c > /dev/null;
  $REF random-model --config $R.q3c/config.json --seed 1 --dtype bf16 -o $R > /dev/null; rm -rf $R.q3c; }
mkdir -p $D/q06; cp $R/config.json $D/q06/
md5sum < $R/model.safetensors | cut -d' ' -f1 > $D/expect/r06.md5
$Q3C compile $R --target vulkan --no-tokenizer -o $D/art/q06.vk.q3 > /dev/null
$Q3C compile $R --target vulkan --kv-cache=f16 --no-tokenizer -o $D/art/q06.vk.kvf16.q3 > /dev/null
# Settings to compare with the default, gzipped for the transfer (run.sh
# unpacks them): decode attention's runs per KV head (default 32), one
# subgroup per decode column, prefill GEMM tiles (default 32,64,16,4,4).
sweep() { $Q3C compile $R --target vulkan --no-tokenizer "$2" -o ${TMPDIR:-/tmp}/kit-sweep.q3 > /dev/null
  gzip -9 -c ${TMPDIR:-/tmp}/kit-sweep.q3 > $D/art/q06.vk.$1.q3.gz; }
for s in 1 8 64; do sweep split$s --decode-splits=$s; done
sweep col1 --decode-column-subgroups=1
for t in 64,64,16,8,4 64,128,16,8,8 128,64,16,8,8 64,64,8,4,4; do sweep tile$t --prefill-tile=$t; done
$Q3C compile $R --cpu=x86-64-v4 --no-tokenizer -o $D/art/q06.v4.q3 > /dev/null
$Q3C compile $R --cpu=x86-64-v3 --no-tokenizer -o $D/art/q06.v3.q3 > /dev/null
$REF logits --model $R --tokens 9,1,2,3 -o $D/expect/r06.ref.npy > /dev/null
$Q3C compile $R --cpu=x86-64-v3 --no-tokenizer -o ${TMPDIR:-/tmp}/kit-r06.f32.q3 > /dev/null
build/tools/q3run/q3run ${TMPDIR:-/tmp}/kit-r06.f32.q3 --weights $R --tokens 9,1,2,3,40,50,60,7,8,9,10,11 -n 16 > $D/expect/r06.long.ids
# D. Debian's Vulkan loader for the device's image (docs: the device tool's README).
mkdir -p .gl ${TMPDIR:-/tmp}/amd64/partial
o="-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=${TMPDIR:-/tmp}/amd64"
apt-get $o update > /dev/null 2>&1 || true
(cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 > /dev/null 2>&1)
# E. llama.cpp, when given: llama-bench, its libraries (the Vulkan one gzipped
# for the transfer limit) and gguf-py for scripts/bench/hf_to_gguf.py.
if [ -n "${LLAMA_BUILD:-}" ]; then
  mkdir -p $D/llama/bin; B=$LLAMA_BUILD
  cp $B/llama-bench $B/libllama-bench-impl.so $D/llama/bin/
  for l in libllama.so.0 libllama-common.so.0 libggml.so.0 libggml-base.so.0; do cp -L $B/$l $D/llama/bin/; done
  for v in x64 haswell skylakex icelake sapphirerapids zen4; do [ -f $B/libggml-cpu-$v.so ] && cp $B/libggml-cpu-$v.so $D/llama/bin/; done
  [ -f $B/libggml-vulkan.so ] && gzip -c $B/libggml-vulkan.so > $D/llama/bin/libggml-vulkan.so.gz
  cp -L /lib/x86_64-linux-gnu/libgomp.so.1 $D/lib/
  cp -r ${LLAMA_SRC:?LLAMA_SRC: the llama.cpp source, for gguf-py}/gguf-py $D/llama/ && rm -rf $D/llama/gguf-py/tests
fi
# F. VALIDATION=1: the Khronos validation layer (7.5 MB gzipped; with llama.cpp
# the transfer would pass its 64 MiB limit).
if [ "${VALIDATION:-0}" = 1 ]; then
  mkdir -p $D/vvl
  gzip -1 -c /usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so > $D/vvl/libVkLayer_khronos_validation.so.gz
  cp /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json $D/vvl/
fi
du -sh $D .gl
total=$(du -sm --exclude=.git --exclude=build . | cut -f1)
[ $total -gt 60 ] && echo "warning: ${total} MB would travel (the device tool takes 64 MiB): PARITY=0 leaves out the small configs' artifacts"
true
