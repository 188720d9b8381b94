#!/usr/bin/env python3
"""compare_rounding.py ACTUAL ROUNDED EXACT --atol X [--factor F]

Whether ACTUAL (logits of a prefill whose products round their activations to
bf16) computes like ROUNDED (the independent reference rounding the same
activations) rather than like EXACT (the reference without rounding).

A whole model cannot be held to f32 accuracy against ROUNDED: the kernels sum
in another order than NumPy, so an activation a few f32 ulps from a bf16
rounding boundary rounds the other way now and then (about one in 2^15
values), and on a small model one such flip moves the later rows' logits by
~1e-2. So this asserts what a flip cannot hide: the mean |ACTUAL - ROUNDED|
is at most F (default 0.5) times the mean |ACTUAL - EXACT| (kernels that did
not round, or rounded elsewhere, sit nearer EXACT), and max |ACTUAL - ROUNDED|
<= X guards against gross errors. Shapes must match and all values be finite.
"""
import argparse
import sys

import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("actual")
parser.add_argument("rounded")
parser.add_argument("exact")
parser.add_argument("--atol", type=float, required=True)
parser.add_argument("--factor", type=float, default=0.5)
args = parser.parse_args()
arrays = {name: np.load(name).astype(np.float64) for name in (args.actual, args.rounded, args.exact)}
a, r, e = arrays[args.actual], arrays[args.rounded], arrays[args.exact]
if a.shape != r.shape or a.shape != e.shape or a.size == 0:
    sys.exit(f"shapes differ or are empty: {a.shape}, {r.shape}, {e.shape}")
for name, array in arrays.items():
    if not np.all(np.isfinite(array)):
        sys.exit(f"{name}: values that are not finite (NaN or infinity)")
to_rounded, to_exact = np.abs(a - r), np.abs(a - e)
print(f"mean |diff| to rounded {to_rounded.mean():.3g}, to exact {to_exact.mean():.3g} "
      f"(factor {args.factor:g}); max to rounded {to_rounded.max():.3g} (bound {args.atol:g})")
if to_rounded.max() > args.atol:
    sys.exit(1)
if not to_rounded.mean() <= args.factor * to_exact.mean():
    sys.exit(f"not nearer the rounded reference than {args.factor:g} x the exact one")
