#!/usr/bin/env python3
"""compare_npy.py ACTUAL EXPECTED --atol X: fail unless shapes match and max |a - b| <= X."""
import argparse
import sys

import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("actual")
parser.add_argument("expected")
parser.add_argument("--atol", type=float, required=True)
args = parser.parse_args()
a, b = np.load(args.actual), np.load(args.expected)
if a.shape != b.shape:
    sys.exit(f"shape mismatch: {a.shape} vs {b.shape}")
diff = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))
print(f"max abs diff {diff:.3g} (bound {args.atol:g}), max |logit| {float(np.max(np.abs(b))):.3g}")
sys.exit(0 if diff <= args.atol else 1)
