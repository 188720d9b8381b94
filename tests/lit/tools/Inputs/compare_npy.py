#!/usr/bin/env python3
"""compare_npy.py ACTUAL EXPECTED --atol X [--over Y]

Succeeds only when the shapes match, every value of both arrays is finite,
and max |a - b| <= X; with --over Y, also only when max |a - b| > Y (for
checks that a result must differ from another, which `not compare_npy.py`
would also let pass on NaN). A NaN or infinity is always a failure: NumPy's
max of a NaN difference is NaN, and NaN <= X is False, but NaN > Y is False
too, so both directions are checked explicitly.
"""
import argparse
import sys

import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("actual")
parser.add_argument("expected")
parser.add_argument("--atol", type=float, required=True)
parser.add_argument("--over", type=float, default=None)
args = parser.parse_args()
a, b = np.load(args.actual), np.load(args.expected)
if a.shape != b.shape:
    sys.exit(f"shape mismatch: {a.shape} vs {b.shape}")
for name, array in ((args.actual, a), (args.expected, b)):
    bad = int(np.count_nonzero(~np.isfinite(array)))
    if bad:
        sys.exit(f"{name}: {bad} values are not finite (NaN or infinity)")
diff = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.size else 0.0
print(f"max abs diff {diff:.3g} (bound {args.atol:g}), max |logit| {float(np.max(np.abs(b))) if b.size else 0.0:.3g}")
if diff > args.atol:
    sys.exit(1)
if args.over is not None and not diff > args.over:
    sys.exit(f"max abs diff {diff:.3g} is not above {args.over:g}")
