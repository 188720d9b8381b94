#!/usr/bin/env python3
"""make_bad_checkpoints.py GOOD_DIR OUT_DIR: writes one broken copy of GOOD_DIR per case.

Each OUT_DIR/<case>/ holds GOOD_DIR's config.json and a model.safetensors
damaged in one way, to check that q3c names the file, tensor and problem.
"""
import json
import os
import shutil
import struct
import sys

good, out = sys.argv[1], sys.argv[2]
with open(os.path.join(good, "model.safetensors"), "rb") as f:
    blob = f.read()
(header_len,) = struct.unpack("<Q", blob[:8])
header = json.loads(blob[8:8 + header_len])
data = blob[8 + header_len:]


def write(case, payload):
    d = os.path.join(out, case)
    os.makedirs(d, exist_ok=True)
    shutil.copy(os.path.join(good, "config.json"), d)
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(payload)


def with_header(h, extra_data=data):
    text = json.dumps(h).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + extra_data


write("truncated", blob[: len(blob) // 2])
write("tiny", blob[:5])
write("lying_length", struct.pack("<Q", 1 << 62) + blob[8:])
write("not_json", struct.pack("<Q", 16) + b"{not json at all" + data)

h = json.loads(json.dumps(header))
h["model.norm.weight"]["shape"] = [h["model.norm.weight"]["shape"][0] + 1]
write("size_mismatch", with_header(h))

h = json.loads(json.dumps(header))
names = sorted(k for k in h if k != "__metadata__")
a, b = names[0], names[1]
h[b]["data_offsets"] = [h[a]["data_offsets"][0], h[a]["data_offsets"][0] + (h[b]["data_offsets"][1] - h[b]["data_offsets"][0])]
write("overlap", with_header(h))

h = json.loads(json.dumps(header))
h["model.norm.weight"]["dtype"] = "I64"
write("bad_dtype", with_header(h))

h = json.loads(json.dumps(header))
del h["model.layers.1.mlp.up_proj.weight"]
write("missing_tensor", with_header(h))

# A transposed gate_proj: same bytes, the shape of a different tensor.
h = json.loads(json.dumps(header))
rows, cols = h["model.layers.0.mlp.gate_proj.weight"]["shape"]
h["model.layers.0.mlp.gate_proj.weight"]["shape"] = [cols, rows]
write("wrong_shape", with_header(h))

# A tensor name that is not UTF-8.
text = json.dumps(header).encode().replace(b'"model.norm.weight"', b'"model.norm.\xff\xfeweight"')
text += b" " * (-len(text) % 8)
write("non_utf8_name", struct.pack("<Q", len(text)) + text + data)
