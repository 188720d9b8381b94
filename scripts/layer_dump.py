#!/usr/bin/env python3
"""layer_dump.py DUMP.mlir LAYER: the lines of @forward that belong to one layer.

Reads a `q3c dump` (any --emit stage) and prints the ops of layer LAYER: from
the first line naming `model.layers.LAYER.` to the line before the first one
naming `model.layers.LAYER+1.` (or the final norm). Used to keep the layer
listing in docs/qwen3-0.6b-layer.md in step with the compiler.
"""
import sys

path, layer = sys.argv[1], int(sys.argv[2])
lines = open(path).read().splitlines()
this, following = f"model.layers.{layer}.", f"model.layers.{layer + 1}."
start = next(i for i, l in enumerate(lines) if this in l)
end = next(i for i, l in enumerate(lines[start:], start)
           if following in l or "model.norm.weight" in l)
print("\n".join(l.strip() for l in lines[start:end]))
