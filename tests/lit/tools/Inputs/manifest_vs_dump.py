#!/usr/bin/env python3
"""manifest_vs_dump.py ARTIFACT DUMP.mlir: the manifest says what the IR says.

Reads the manifest of a q3c artifact and a `q3c dump --target cpu` of the same
model and compares, with their own parsers: every kernel's lowering (grid,
matmul, tile, chunking, prefetch distance, workspace, thread scratch) and weight operand types; the weight plan as a
multiset of (kind, name, dtype, shape, layout); the order of dispatches.
Prints one summary line per part, or exits 1 naming the first difference.
"""
import collections
import json
import re
import struct
import sys


def manifest_of(path):
    blob = open(path, "rb").read()
    count, table = struct.unpack_from("<QQ", blob, 24)
    for i in range(count):
        kind, _, offset, size, _ = struct.unpack_from("<IIQQ40s", blob, table + 64 * i)
        if kind == 1:
            return json.loads(blob[offset:offset + size])
    sys.exit("no manifest section")


def tensor_type(text):
    """'tensor<4x8xbf16, #q3.column_blocks>' -> (dtype, shape, layout); None if dynamic."""
    m = re.fullmatch(r"tensor<([0-9x]+)x(bf16|f16|f32)(, #q3.column_blocks)?>", text.strip())
    if not m:
        return None
    shape = [int(d) for d in m.group(1).split("x")]
    return m.group(2), shape, "column_blocks" if m.group(3) else "row_major"


def split_top(text):
    """Splits on commas outside <>, [] and ()."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "<[(" and 1 or 0
        depth -= ch in ">])" and 1 or 0
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return parts + [cur] if cur.strip() else parts


def lowering_of(text):
    fields = {}
    grid = re.search(r"grid = (fixed|per_row) (\d+)", text)
    if grid:
        fields["grid"] = {"kind": grid.group(1), "count": int(grid.group(2))}
    for key in ("matmul", "weight_packing"):
        m = re.search(key + r" = (\w+)", text)
        if m:
            fields[key] = m.group(1)
    tile = re.search(r"tile = \[([\d, ]+)\]", text)
    if tile:
        fields["tile"] = [int(x) for x in tile.group(1).split(",")]
    for key in ("prefill_chunks", "decode_chunks", "prefetch_bytes", "decode_streams",
                "decode_accumulators", "workspace_bytes"):
        m = re.search(key + r" = (\d+|none)", text)
        if m:
            fields[key] = m.group(1) if m.group(1) == "none" else int(m.group(1))
    scratch = re.search(r"thread_scratch = (\d+) \+ (\d+) \* rows", text)
    if scratch:  # the manifest leaves out what is 0
        for key, value in zip(("thread_scratch_bytes", "thread_scratch_row_bytes"),
                              scratch.groups()):
            if int(value):
                fields[key] = int(value)
    return fields


def dump_kernels(lines):
    kernels = {}
    for line in lines:
        m = re.match(r"\s*func\.func private @(\w+)\((.*)\) -> .* attributes \{q3\.kernel, "
                     r"q3\.lowering = #q3\.lowering<(.*)>\}", line)
        if not m:
            continue
        args = [a.split(":", 1)[1].strip() for a in split_top(m.group(2))]
        weights = [tensor_type(a) for a in args]
        kernels[m.group(1)] = (lowering_of(m.group(3)), weights)
    return kernels


def dump_weights(lines):
    plan = []
    for line in lines:
        # The weight plan is @forward's; a kernel's own concat_rows
        # (cpu-sink-weight-concat) is read in place, never materialized.
        if re.match(r"\s*func\.func private @", line):
            break
        m = re.match(r'\s*%\S+ = q3\.param "([^"]+)" : (.*)$', line)
        if m:
            plan.append(("param", m.group(1)) + flatten(tensor_type(m.group(2))))
            continue
        m = re.match(r"\s*%\S+ = q3\.(concat_rows|pack_column_blocks|fold_gain) .* -> (.*)$", line)
        if m:
            plan.append((m.group(1), "") + flatten(tensor_type(m.group(2))))
    return collections.Counter(plan)


def flatten(t):
    dtype, shape, layout = t
    return (dtype, tuple(shape), layout)


def fail(what):
    sys.exit("manifest and dump differ: " + what)


def main():
    m = manifest_of(sys.argv[1])
    lines = open(sys.argv[2]).read().splitlines()

    kernels = dump_kernels(lines)
    if sorted(kernels) != sorted(k["name"] for k in m["kernels"]):
        fail(f"kernel names {sorted(kernels)} vs {[k['name'] for k in m['kernels']]}")
    for k in m["kernels"]:
        lowering, arg_types = kernels[k["name"]]
        for key in ("grid", "matmul", "tile", "weight_packing", "prefill_chunks",
                    "decode_chunks", "prefetch_bytes", "decode_streams", "decode_accumulators",
                    "workspace_bytes", "thread_scratch_bytes", "thread_scratch_row_bytes"):
            if lowering.get(key) != k.get(key):
                fail(f"kernel {k['name']} {key}: dump {lowering.get(key)}, manifest {k.get(key)}")
        for i, operand in enumerate(k["operands"]):
            if operand["kind"] == "weight":
                want = (operand["dtype"], operand["shape"], operand["layout"])
                if arg_types[i] != want:
                    fail(f"kernel {k['name']} operand {i}: dump {arg_types[i]}, manifest {want}")
    print("kernels agree:", len(kernels))

    manifest_plan = collections.Counter(
        (w["kind"], w.get("name", "")) + (w["dtype"], tuple(w["shape"]), w["layout"])
        for w in m["weights"])
    plan = dump_weights(lines)
    if set(manifest_plan) != set(plan):
        fail(f"weights only in the dump {set(plan) - set(manifest_plan)}, "
             f"only in the manifest {set(manifest_plan) - set(plan)}")
    print("weights agree:", len(m["weights"]))

    dispatched = re.findall(r"q3\.dispatch @(\w+)\(", "\n".join(lines))
    scheduled = [s["kernel"] for s in m["schedule"]]
    if dispatched != scheduled:
        fail(f"schedule {scheduled} vs dispatches {dispatched}")
    cache = re.search(r"!q3\.kv_cache<[^>]*element = (\w+)>", "\n".join(lines))
    if (cache.group(1) if cache else "f32") != m["kv_cache"]["element"]:
        fail("kv_cache element")
    print("schedule agrees:", len(scheduled), "dispatches")


main()
