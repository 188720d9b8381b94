#!/usr/bin/env python3
"""layer_dump.py DUMP.mlir LAYER | DUMP.mlir --kernels: excerpts of a q3c dump.

With a layer number, prints the ops of @forward that belong to that layer: from
the first line naming `model.layers.LAYER.` to the line before the first one
naming `model.layers.LAYER+1.` (or the final norm). With --kernels, prints the
kernel functions (`func.func private ... q3.kernel`). Used to keep the listings
in docs/qwen3-0.6b-layer.md in step with the compiler.
"""
import sys


def layer_lines(lines, layer):
    this, following = f"model.layers.{layer}.", f"model.layers.{layer + 1}."
    start = next(i for i, l in enumerate(lines) if this in l)
    end = next(i for i, l in enumerate(lines[start:], start)
               if following in l or "model.norm.weight" in l)
    return [l.strip() for l in lines[start:end]]


def kernel_lines(lines):
    start = next(i for i, l in enumerate(lines) if l.lstrip().startswith("func.func private"))
    end = max(i for i, l in enumerate(lines) if l.strip() == "}")  # the module's brace
    return [l[2:] for l in lines[start:end]]


path, what = sys.argv[1], sys.argv[2]
lines = open(path).read().splitlines()
print("\n".join(kernel_lines(lines) if what == "--kernels" else layer_lines(lines, int(what))))
