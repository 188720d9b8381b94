#!/usr/bin/env python3
"""vulkan_trace_diff.py A.txt B.txt [--rtol R]: the first dispatch two
Q3_VULKAN_TRACE logs disagree on.

Run the same artifact and command on two Vulkan devices (lavapipe and a GPU,
say) with Q3_VULKAN_TRACE=1, keep stderr, and give both files here. Each
"q3 trace N kernel rows R: [i] sum S abs A nonfinite F ..." line is compared
tensor by tensor: sums within R of the larger absolute sum (default 1e-3,
since devices sum in different orders), absolute sums likewise, non-finite
counts exactly. Prints the first dispatch that differs, both lines, and
exits 1; exits 0 with "no dispatch differs" when the logs agree. Tensors
that are not f32 (printed as "[i] N B") are compared by size only.
"""
import argparse
import re
import sys

LINE = re.compile(r"^q3 trace (\d+) (\S+) rows (\d+):(.*)$")
TENSOR = re.compile(r"\[(\d+)\] (?:sum (\S+) abs (\S+) nonfinite (\d+)|(\d+) B)")


def read(path):
    dispatches = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = LINE.match(line.rstrip("\n"))
            if m:
                tensors = [t.groups() for t in TENSOR.finditer(m.group(4))]
                dispatches.append((m.group(2), int(m.group(3)), tensors, line.strip()))
    return dispatches


def close(a, b, rtol):
    a, b = float(a), float(b)
    return abs(a - b) <= rtol * max(abs(a), abs(b), 1e-30)


def differs(x, y, rtol):
    if x[0] != y[0] or x[1] != y[1] or len(x[2]) != len(y[2]):
        return True
    for p, q in zip(x[2], y[2]):
        if p[4] is not None or q[4] is not None:
            if p[4] != q[4]:
                return True
            continue
        if p[3] != q[3] or not close(p[1], q[1], rtol) or not close(p[2], q[2], rtol):
            return True
    return False


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--rtol", type=float, default=1e-3)
    args = parser.parse_args()
    a, b = read(args.a), read(args.b)
    if not a or not b:
        sys.exit(f"{args.a if not a else args.b}: no 'q3 trace' lines (run with Q3_VULKAN_TRACE=1)")
    for n, (x, y) in enumerate(zip(a, b)):
        if differs(x, y, args.rtol):
            print(f"dispatch {n} ({x[0]}) differs:\n  {args.a}: {x[3]}\n  {args.b}: {y[3]}")
            sys.exit(1)
    if len(a) != len(b):
        print(f"the logs agree on {min(len(a), len(b))} dispatches, then one has {abs(len(a) - len(b))} more")
        sys.exit(1)
    print(f"no dispatch differs ({len(a)} dispatches)")


main()
