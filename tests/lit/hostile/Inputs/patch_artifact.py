#!/usr/bin/env python3
"""patch_artifact.py IN OUT EDIT...: change bytes of a q3c artifact, then
re-seal file_size and the checksum (docs/artifact.md) as an attacker would,
so that the checks after the checksum are what gets exercised. The checksum
stops where the first mapped (kind 5) payload starts; those payloads are
covered by their XXH3 hash sections, which this does not re-seal.

EDIT is one of
  flip:SECTION:OFFSET     xor 0x01 into byte OFFSET of the named section's payload
  u32:OFFSET:VALUE        write a little-endian u32 at a file offset
  u64:OFFSET:VALUE        write a little-endian u64 at a file offset
  entry-u32:I:FIELD:VALUE write a u32 into field FIELD (0 kind, 4 flags) of table entry I
  entry-u64:I:FIELD:VALUE write a u64 into field FIELD (8 offset, 16 size) of table entry I
  truncate:BYTES          drop the last BYTES bytes
"""
import struct
import sys

src, dst, edits = sys.argv[1], sys.argv[2], sys.argv[3:]
blob = bytearray(open(src, "rb").read())


def sections():
    count, table = struct.unpack_from("<QQ", blob, 24)
    for i in range(count):
        kind, flags, offset, size, name = struct.unpack_from("<IIQQ40s", blob, table + 64 * i)
        yield name.rstrip(b"\0").decode(), offset, size, kind


for edit in edits:
    op, *args = edit.split(":")
    if op == "flip":
        offset = next(o for n, o, s, k in sections() if n == args[0])
        blob[offset + int(args[1])] ^= 0x01
    elif op in ("u32", "u64"):
        struct.pack_into("<I" if op == "u32" else "<Q", blob, int(args[0]), int(args[1], 0))
    elif op in ("entry-u32", "entry-u64"):
        at = 64 + 64 * int(args[0]) + int(args[1])
        struct.pack_into("<I" if op == "entry-u32" else "<Q", blob, at, int(args[2], 0))
    elif op == "truncate":
        del blob[len(blob) - int(args[0]):]
    else:
        sys.exit("unknown edit " + edit)
struct.pack_into("<Q", blob, 16, len(blob))
struct.pack_into("<Q", blob, 40, 0)
h = 0xcbf29ce484222325
end = min([o for n, o, s, k in sections() if k == 5] + [len(blob)])
for b in bytes(blob[:end]):
    h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
struct.pack_into("<Q", blob, 40, h)
open(dst, "wb").write(blob)
