#!/usr/bin/env python3
"""spirv_sections.py ARTIFACT OUTDIR: writes every SPIR-V section (kind 4) of a
q3c artifact (docs/artifact.md) to OUTDIR/<name>.spv and prints how many."""
import os
import struct
import sys

path, out = sys.argv[1], sys.argv[2]
blob = open(path, "rb").read()
count, table = struct.unpack_from("<QQ", blob, 24)
os.makedirs(out, exist_ok=True)
written = 0
for i in range(count):
    kind, _flags, offset, size, name = struct.unpack_from("<IIQQ40s", blob, table + 64 * i)
    if kind != 4:
        continue
    name = name.rstrip(b"\0").decode()
    with open(os.path.join(out, name + ".spv"), "wb") as f:
        f.write(blob[offset:offset + size])
    written += 1
print(f"{written} SPIR-V modules")
