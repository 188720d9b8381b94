#!/usr/bin/env python3
"""expect_error.py [--timeout S] -- COMMAND...

Runs COMMAND (under a timeout, so a hang fails the test instead of CI) and
succeeds only when it ends with exit code 1 -- not a signal, not 0, not 2 --
having written exactly one line to stderr. Prints that line to stdout for
FileCheck. What a hostile input must get: one clear line and exit code 1.
"""
import subprocess
import sys

args = sys.argv[1:]
timeout = 60.0
if args[:1] == ["--timeout"]:
    timeout, args = float(args[1]), args[2:]
if args[:1] == ["--"]:
    args = args[1:]
try:
    done = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          timeout=timeout)
except subprocess.TimeoutExpired:
    sys.exit(f"expect_error: {args[0]} did not finish within {timeout:g} s (a hang)")
err = done.stderr.decode("utf-8", "replace")
lines = err.splitlines()
if done.returncode < 0:
    sys.exit(f"expect_error: killed by signal {-done.returncode}; stderr: {err!r}")
if done.returncode != 1:
    sys.exit(f"expect_error: exit code {done.returncode}, expected 1; stderr: {err!r}")
if len(lines) != 1 or not err.endswith("\n"):
    sys.exit(f"expect_error: expected one line on stderr, found {len(lines)}: {err!r}")
print(lines[0])
