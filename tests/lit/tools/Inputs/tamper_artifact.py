#!/usr/bin/env python3
"""tamper_artifact.py IN OUT EDIT: rewrite a q3c artifact's manifest and reseal it.

EDIT is Python applied to the manifest dict `m`, e.g. "m['format_version'] = 9",
with `sections` ([kind, name, bytes] lists) in scope to edit other sections.
The file layout (docs/artifact.md) is rebuilt with the new manifest and a
fresh checksum, so the runtime's manifest checks are what gets exercised.
"""
import json
import struct
import sys

MAGIC = b"Q3CART\r\n"
src, dst, edit = sys.argv[1], sys.argv[2], sys.argv[3]
blob = open(src, "rb").read()
version = struct.unpack_from("<I", blob, 8)[0]
count, table = struct.unpack_from("<QQ", blob, 24)
sections = []
for i in range(count):
    kind, flags, offset, size, name = struct.unpack_from("<IIQQ40s", blob, table + 64 * i)
    sections.append([kind, name, blob[offset:offset + size]])
m = json.loads(next(s[2] for s in sections if s[0] == 1))
exec(edit)
for s in sections:
    if s[0] == 1:
        s[2] = json.dumps(m).encode()
out = bytearray(64 + 64 * len(sections))
for i, (kind, name, data) in enumerate(sections):
    offset = (len(out) + 63) // 64 * 64
    out += b"\0" * (offset - len(out)) + data
    struct.pack_into("<IIQQ40s", out, 64 + 64 * i, kind, 0, offset, len(data), name)
struct.pack_into("<8sIIQQQQ", out, 0, MAGIC, version, 64, len(out), len(sections), 64, 0)
h = 0xcbf29ce484222325
for b in bytes(out):
    h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
struct.pack_into("<Q", out, 40, h)
open(dst, "wb").write(out)
