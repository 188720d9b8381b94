#!/usr/bin/env bash
# Regenerates tests/golden/ deterministically from scripts/qwen3_reference.py.
# Needs only python3 + numpy.  Usage: scripts/make_goldens.sh [PYTHON]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-${PYTHON:-python3}}
# a python3 without numpy (e.g. a pyenv shim) -> fall back to Debian's interpreter
if ! "$PY" -c 'import numpy' 2>/dev/null && [ -x /usr/bin/python3 ]; then PY=/usr/bin/python3; fi
REF=scripts/qwen3_reference.py
OUT=tests/golden
GREEDY_N=8
# every greedy step's top-1 must beat top-2 by this much (in logits) so that
# float32/bf16 rounding in the system under test cannot flip an argmax.
MIN_MARGIN=0.05
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# mkcfg hidden inter heads kv head_dim vocab theta eps tied
mkcfg() {
  cat <<EOF
{
  "architectures": ["Qwen3ForCausalLM"],
  "model_type": "qwen3",
  "hidden_size": $1,
  "intermediate_size": $2,
  "num_hidden_layers": 2,
  "num_attention_heads": $3,
  "num_key_value_heads": $4,
  "head_dim": $5,
  "vocab_size": $6,
  "max_position_embeddings": 128,
  "rope_theta": $7,
  "rms_norm_eps": $8,
  "tie_word_embeddings": $9,
  "torch_dtype": "float32",
  "hidden_act": "silu",
  "attention_bias": false,
  "attention_dropout": 0.0,
  "rope_scaling": null,
  "use_sliding_window": false,
  "sliding_window": null,
  "bos_token_id": 1,
  "eos_token_id": 2
}
EOF
}

# mkcase NAME DTYPE SEED TOKENS "CFG ARGS..." [extra random-model flags...]
mkcase() {
  local name=$1 dtype=$2 seed=$3 tokens=$4 cfgargs=$5
  shift 5
  local dir=$OUT/$name
  rm -rf "$dir"
  # shellcheck disable=SC2086
  mkcfg $cfgargs > "$TMP/$name.json"
  "$PY" $REF random-model --config "$TMP/$name.json" --seed "$seed" --dtype "$dtype" -o "$dir" "$@"
  echo "$tokens" > "$dir/tokens.txt"
  "$PY" $REF logits --model "$dir" --tokens "$tokens" -o "$dir/logits.npy" \
        --greedy $GREEDY_N --min-margin $MIN_MARGIN > "$dir/greedy.txt"
  echo "$name: $(cat "$dir/greedy.txt")"
}

#      name                    dtype seed tokens                 hidden inter heads kv hd vocab theta     eps   tied
mkcase gqa2_untied_f32         f32   101  "3,17,250,0,99,42"     "64 128 4 2 16 256 1000000.0 1e-06 false"
mkcase mqa_hdlarger_tied_bf16  bf16  102  "1,5,9,31,4"           "32 96 4 1 16 128 10000.0 1e-05 true"
mkcase mha_hdsmaller_untied_f16 f16  103  "7,0,190,5,5,64,2"     "64 80 4 4 8 191 10000.0 1e-06 false"
mkcase gqa4_tied_bf16          bf16  104  "250,1,2,3,200,100"    "64 128 8 2 8 256 1000000.0 1e-06 true"
mkcase gqa8_untied_f32         f32   105  "10,20,30,40,50"       "48 72 16 2 8 100 10000.0 1e-05 false"
mkcase mqa6_untied_f16         f16   106  "96,1,48,12,77,3"      "48 96 6 1 8 97 1000000.0 1e-05 false"
mkcase mha_hdlarger_tied_f32   f32   107  "0,1,2,3,4,5,6"        "32 64 2 2 32 64 10000.0 1e-05 true"
mkcase sharded_gqa2_bf16       bf16  198  "11,22,33,44,55,66"    "64 128 4 2 32 160 1000000.0 1e-06 false" --shards 2
mkcase tied_redundant_lmhead_bf16 bf16 109 "151,0,8,60,120"      "32 96 4 2 16 152 1000000.0 1e-06 true" --write-tied-lm-head
mkcase gqa2_hdsmaller_tied_f16 f16   150  "4,8,15,16,23,42"      "64 112 4 2 8 128 10000.0 1e-06 true"

# Deliberately wrong variants of one case, for tests proving the comparison
# catches each bug class.
WV=$OUT/wrong_variant
rm -rf "$WV"
mkdir -p "$WV"
CASE=gqa2_untied_f32
for v in interleaved-rope norm-after-rope one-plus-gain kv-head-modulo; do
  "$PY" $REF logits --model "$OUT/$CASE" --tokens "$(cat "$OUT/$CASE/tokens.txt")" \
        --variant "$v" -o "$WV/${v//-/_}_logits.npy"
done
echo "$CASE" > "$WV/case.txt"
echo "done: $(du -sh "$OUT" | cut -f1)"
