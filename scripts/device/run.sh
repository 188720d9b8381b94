#!/bin/bash
# The device run (after scripts/device/build_kit.sh): Vulkan parity and speed
# on the GPU, the CPU backend on the device's cores, llama.cpp beside both
# when the kit has it. Everything is logged to $OUT/log.txt. DRY=1: a
# rehearsal here on lavapipe with tiny sizes (VK_DRIVER_FILES=lavapipe's).
set -u
T0=$(date +%s); DRY=${DRY:-0}; OUT=${OUT:-/tmp/devout}; mkdir -p $OUT
exec > >(tee -a $OUT/log.txt) 2>&1
el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
step() { local t=$1; shift; el "+ $*"; timeout $t "$@"; local rc=$?; [ $rc != 0 ] && el "rc=$rc"; return $rc; }
left() { echo $(( ${BUDGET:-500} - ($(date +%s) - T0) )); }
if [ $DRY = 0 ]; then
  for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
  lscpu | grep -E "Model name|^CPU\(s\)|Thread|L2|L3"; grep -o -E 'amx[a-z_]*|avx512_bf16|avx512f ' /proc/cpuinfo | sort -u | tr '\n' ' '; echo
  free -g | head -2
fi
export LD_LIBRARY_PATH=$PWD/.dev/lib
Q=.dev/bin/q3run; A=.dev/art; E=.dev/expect; P=/tmp/parity; mkdir -p $P
for f in $A/*.q3.gz; do [ -f "$f" ] && gunzip -c "$f" > "${f%.gz}"; done # build_kit.sh's sweep
ls /usr/local/nvidia/share/vulkan/icd.d/ /usr/share/vulkan/icd.d/ /etc/vulkan/icd.d/ 2>&1 | head; find / -xdev -name 'nvidia_icd*.json' 2>/dev/null | head -5
step 60 $Q --list-devices || VK_LOADER_DEBUG=error,warn,driver timeout 30 $Q --list-devices 2>&1 | head -40
if ! $Q --list-devices 2>/dev/null | grep -q -i nvidia && [ $DRY = 0 ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
  step 60 $Q --list-devices
fi
if ! $Q --list-devices > /dev/null 2>&1; then
  el "no Vulkan device: diagnostics, then stop"
  ldconfig -p | grep -E "libvulkan|GLX_nvidia|GLdispatch|nvidia" | head -20
  ls /usr/local/nvidia /usr/local/nvidia/lib64 2>&1 | head -60; cat /usr/local/nvidia/share/vulkan/icd.d/*.json 2>&1 | head -20
  VK_LOADER_DEBUG=all timeout 30 $Q --list-devices 2>&1 | grep -v -i "layer" | head -60
  exit 1
fi
PASS=0; FAIL=0
ok() { if "$@"; then PASS=$((PASS+1)); else FAIL=$((FAIL+1)); el "FAIL: $*"; fi; }
cmpnpy() { python3 tests/lit/tools/Inputs/compare_npy.py "$@"; }
if [ -f $A/gqa2_untied_f32.vk.q3 ]; then # the kit was built with PARITY=1
el "== parity: goldens (float64 reference, atol 1e-4; greedy ids)"
for c in gqa2_untied_f32 mqa_hdlarger_tied_bf16 mha_hdsmaller_untied_f16 gqa4_tied_bf16 gqa8_untied_f32 mqa6_untied_f16 mha_hdlarger_tied_f32 sharded_gqa2_bf16 tied_redundant_lmhead_bf16 gqa2_hdsmaller_tied_f16; do
  g=tests/golden/$c; echo -n "$c: "
  ok step 60 $Q $A/$c.vk.q3 --weights $g --tokens "$(cat $g/tokens.txt)" --logits $P/$c.npy --ctx 32 > /dev/null
  ok cmpnpy $P/$c.npy $g/logits.npy --atol 1e-4
  timeout 60 $Q $A/$c.vk.q3 --weights $g --tokens "$(cat $g/tokens.txt)" -n 8 --ctx 32 > $P/$c.ids
  ok diff $P/$c.ids $g/greedy.txt
done
for c in gqa4_tied_bf16 mqa6_untied_f16; do
  timeout 60 $Q $A/$c.vk.q3 --weights tests/golden/$c --tokens 9,1,2,3,40,50,60,7,8,9,10,11 -n 16 > $P/$c.long.ids
  ok diff $P/$c.long.ids $E/$c.long.ids && echo "$c: 16 ids after 12 = CPU backend's"
done
el "== parity: independent reference, KV cache f32/f16/bf16"
for m in gqa3 mqa8 nohd; do
  read toks n < $E/$m.args
  for kv in f32 f16 bf16; do
    tol=1e-4; [ $kv = f16 ] && tol=1e-3; [ $kv = bf16 ] && tol=1e-3
    echo -n "$m kv $kv: "
    timeout 60 $Q $A/$m.$kv.vk.q3 --weights .dev/models/$m --tokens $toks --logits $P/$m.$kv.npy --ctx 16 > /dev/null
    ok cmpnpy $P/$m.$kv.npy $E/$m.$kv.npy --atol $tol
    timeout 60 $Q $A/$m.$kv.vk.q3 --weights .dev/models/$m --tokens $toks -n $n --ctx 16 > $P/$m.$kv.ids
    ok diff $P/$m.$kv.ids $E/$m.$kv.ids
  done
done
fi
el "parity so far: $PASS passed, $FAIL failed"
el "== the 0.6B shape (random bf16 weights, numpy generator, seed 1)"
R=/tmp/r06
[ -f $R/model.safetensors ] || step 200 python3 scripts/qwen3_reference.py random-model --config .dev/q06/config.json --seed 1 --dtype bf16 -o $R
cp models/qwen3-tokenizer/tokenizer.json $R/ 2>/dev/null
ok [ "$(md5sum < $R/model.safetensors | cut -d' ' -f1)" = "$(cat $E/r06.md5)" ]
CTX=64; [ $DRY = 1 ] && CTX=32
echo -n "0.6B vk logits vs float64 reference: "
ok step 120 $Q $A/q06.vk.q3 --weights $R --tokens 9,1,2,3 --logits $P/r06.vk.npy --ctx $CTX > /dev/null
ok cmpnpy $P/r06.vk.npy $E/r06.ref.npy --atol 2e-3
if [ $DRY = 0 ]; then
  timeout 120 $Q $A/q06.vk.q3 --weights $R --tokens 9,1,2,3,40,50,60,7,8,9,10,11 -n 16 --ctx 64 > $P/r06.vk.ids
  ok diff $P/r06.vk.ids $E/r06.long.ids && echo "0.6B vk: 16 ids after 12 = CPU backend's (here)"
fi
CPUART=$A/q06.v3.q3; grep -q avx512f /proc/cpuinfo && CPUART=$A/q06.v4.q3
echo -n "0.6B cpu ($CPUART) logits vs reference: "
ok step 120 $Q $CPUART --weights $R --tokens 9,1,2,3 --logits $P/r06.cpu.npy --ctx 64 > /dev/null
cmpnpy $P/r06.cpu.npy $E/r06.ref.npy --atol 2e-1
el "parity: $PASS passed, $FAIL failed"
el "== validation layer (Khronos, Debian 1.3.239)"
if [ $DRY = 0 ] && [ -f .dev/vvl/libVkLayer_khronos_validation.so.gz ]; then
  mkdir -p /tmp/vvl && gunzip -c .dev/vvl/libVkLayer_khronos_validation.so.gz > /tmp/vvl/libVkLayer_khronos_validation.so && cp .dev/vvl/*.json /tmp/vvl/
  ( export VK_LAYER_PATH=/tmp/vvl LD_LIBRARY_PATH=/tmp/vvl:$LD_LIBRARY_PATH Q3_VULKAN_VALIDATION=1
    g=tests/golden/gqa4_tied_bf16
    timeout 60 $Q $A/gqa4_tied_bf16.vk.q3 --weights $g --tokens 9,1,2,3,40,50,60,7,8,9,10,11 -n 16 --ctx 32 > $P/vvl1.txt 2>&1
    timeout 60 $Q $A/gqa3.bf16.vk.q3 --weights .dev/models/gqa3 --tokens 5,299,0,17,17,42,8 -n 6 --ctx 16 >> $P/vvl1.txt 2>&1
    timeout 120 $Q bench $A/q06.vk.q3 --weights $R -p 16 -g 4 -r 1 --ctx 64 --profile >> $P/vvl1.txt 2>&1
    echo "validation messages: $(grep -c 'vulkan validation' $P/vvl1.txt); ids lines: $(grep -c '^ids:' $P/vvl1.txt) (2 expected)"; grep 'vulkan validation' $P/vvl1.txt | sort | uniq -c | sort -rn | head -20 | cut -c1-600 )
fi
if [ $DRY = 0 ]; then
  el "== torch's read bandwidth on this GPU (sum of a 4 GiB f32 tensor)"
  timeout 90 python3 -c "
import torch,time
x=torch.ones(2**30,dtype=torch.float32,device='cuda'); y=torch.empty_like(x); torch.cuda.synchronize()
for name,f,b in (('read (sum)',lambda: x.sum(),4*2**30),('copy (r+w)',lambda: y.copy_(x),8*2**30)):
  f(); torch.cuda.synchronize(); ts=[]
  for i in range(10):
    s=torch.cuda.Event(enable_timing=True); e=torch.cuda.Event(enable_timing=True); s.record(); f(); e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e)/1e3)
  ts.sort(); print(name, 'GB/s best %.0f median %.0f' % (b/ts[0]/1e9, b/ts[5]/1e9))
"
fi
el "== Vulkan bench"
if [ $DRY = 1 ]; then
  step 300 $Q bench $A/q06.vk.q3 --weights $R -p 4 -g 2 -r 1 --ctx 16 --json > $OUT/vk-pp128.json; cat $OUT/vk-pp128.json | head -c 600; echo
  el "dry run done"; exit 0
fi
step 120 $Q bench $A/q06.vk.q3 --weights $R -p 128 -g 64 -r 5
step 120 $Q bench $A/q06.vk.q3 --weights $R -p 128 -g 64 -r 5 --json > $OUT/vk-pp128.json
step 120 $Q bench $A/q06.vk.q3 --weights $R -p 128 -g 64 -r 1 --profile
el "== Vulkan decode, fence waits sleeping (Q3_VULKAN_FENCE_POLL=0) against the default poll"
step 120 env Q3_VULKAN_FENCE_POLL=0 $Q bench $A/q06.vk.q3 --weights $R -p 16 -g 64 -r 5
step 120 $Q bench $A/q06.vk.q3 --weights $R -p 512 -g 64 -r 3
step 180 $Q bench $A/q06.vk.q3 --weights $R -p 2048 -g 32 -r 2
step 180 $Q bench $A/q06.vk.kvf16.q3 --weights $R -p 2048 -g 32 -r 2
el "== CPU backend on this machine's cores"
[ ${SKIPCPU:-0} = 0 ] && step 120 $Q bench $CPUART --weights $R -p 128 -g 64 -r 3
[ ${SKIPCPU:-0} = 0 ] && [ $(left) -gt 150 ] && step 120 $Q bench $CPUART --weights $R -p 2048 -g 32 -r 1
el "== llama.cpp"
L=$PWD/.dev/llama
if [ -x $L/bin/llama-bench ] && [ $(left) -gt 120 ]; then
  [ -f $L/bin/libggml-vulkan.so.gz ] && gunzip -f $L/bin/libggml-vulkan.so.gz
  cp models/qwen3-tokenizer/tokenizer.json $R/
  step 120 python3 scripts/bench/hf_to_gguf.py $R /tmp/r06.gguf --llama-dir $L
  LB="env LD_LIBRARY_PATH=$L/bin:$LD_LIBRARY_PATH $L/bin/llama-bench -m /tmp/r06.gguf"
  step 150 $LB -ngl 99 -p 128,512,2048 -n 64 -r 3 -o md
  step 150 $LB -ngl 99 -p 0 -n 32 -d 2048 -r 2 -o md
  [ $(left) -gt 60 ] && step 120 $LB -ngl 0 -dev none -nopo 1 -t $(nproc) -p 128 -n 64 -r 3 -o md
  [ $(left) -gt 60 ] && step 150 $LB -ngl 0 -dev none -nopo 1 -t $(nproc) -p 2048 -n 0 -r 1 -o md
  [ $(left) -gt 60 ] && step 150 $LB -ngl 0 -dev none -nopo 1 -t $(nproc) -p 0 -n 32 -d 2048 -r 1 -o md
fi
# This part's comparisons (build_kit.sh's sweep), after llama.cpp, each
# while time is left.
el "== Vulkan decode with one subgroup per column in every product (--decode-column-subgroups=1)"
[ -f $A/q06.vk.col1.q3 ] && [ $(left) -gt 40 ] && step 60 $Q bench $A/q06.vk.col1.q3 --weights $R -p 16 -g 64 -r 3
[ $(left) -gt 40 ] && step 60 $Q bench $A/q06.vk.q3 --weights $R -p 16 -g 64 -r 1 --profile
[ -f $A/q06.vk.col1.q3 ] && [ $(left) -gt 40 ] && step 60 $Q bench $A/q06.vk.col1.q3 --weights $R -p 16 -g 64 -r 1 --profile
el "== Vulkan decode after 2048 by decode attention's runs per KV head (default 32 above)"
for s in 1 8 64; do [ -f $A/q06.vk.split$s.q3 ] && [ $(left) -gt 40 ] && step 60 $Q bench $A/q06.vk.split$s.q3 --weights $R -p 2048 -g 32 -r 1; done
[ $(left) -gt 40 ] && step 60 $Q bench $A/q06.vk.q3 --weights $R -p 2048 -g 32 -r 1 --profile
el "== Vulkan prefill by GEMM tile (--prefill-tile; the default 32,64,16,4,4 above)"
for f in $A/q06.vk.tile*.q3; do [ -f "$f" ] && [ $(left) -gt 40 ] && echo "$f" && step 60 $Q bench "$f" --weights $R -p 512 -g 1 -r 2 && step 60 $Q bench "$f" --weights $R -p 128 -g 1 -r 2; done
el "done"
