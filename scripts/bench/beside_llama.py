#!/usr/bin/env python3
"""Benchmarks q3run beside llama.cpp in the same minutes, alternating, so a
shared VM's drifting bandwidth hits both alike.

Each round runs llama-bench (prefill, then decode) and `q3run bench` once; each
process runs in a new session (so its own scheduler autogroup) and, when the
script is root, at autogroup nice -20, so background work on the machine takes
less from the measured process. Prints every round and the medians.

  beside_llama.py --llama-bench BIN --gguf MODEL.gguf --q3run BIN \
      --artifact MODEL.q3 [--weights MODEL_DIR] [-p 128] [-g 64] [--rounds 3] \
      [--depth 0] [--threads 2] [--q3run-arg=--kv-cache ...]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def run_in_own_autogroup(command, nice):
    def prepare():
        os.setsid()  # a new session is a new autogroup
        if nice is not None:
            try:
                with open("/proc/self/autogroup", "w") as autogroup:
                    autogroup.write(str(nice))
            except OSError:
                pass
    result = subprocess.run(command, capture_output=True, text=True, preexec_fn=prepare)
    if result.returncode != 0:
        sys.exit(f"beside_llama: {' '.join(command)} failed ({result.returncode}):\n{result.stderr}")
    return result.stdout


def llama_rate(args, prompt, generated):
    command = [args.llama_bench, "-m", args.gguf, "-t", str(args.threads), "-r", "1", "-o", "json",
               "-p", str(prompt), "-n", str(generated)]
    if args.depth and prompt == 0:  # decode after a cached prompt, as q3run's decode follows its prompt
        command += ["-d", str(args.depth)]
    rows = json.loads(run_in_own_autogroup(command, args.nice))
    return rows[0]["avg_ts"]


def q3run_round(args):
    command = [args.q3run, "bench", args.artifact, "-p", str(args.prompt),
               "-g", str(args.generated), "-r", "1", "--threads", str(args.threads), "--json"]
    if args.weights:  # an artifact compiled with --embed-weights carries its own
        command += ["--weights", args.weights]
    if args.context:
        command += ["--ctx", str(args.context)]
    command += args.q3run_arg
    return json.loads(run_in_own_autogroup(command, args.nice))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--llama-bench", required=True)
    parser.add_argument("--gguf", required=True)
    parser.add_argument("--q3run", required=True)
    parser.add_argument("--artifact", required=True)
    parser.add_argument("--weights", default="", help="the checkpoint folder (not for --embed-weights artifacts)")
    parser.add_argument("-p", "--prompt", type=int, default=128)
    parser.add_argument("-g", "--generated", type=int, default=64)
    parser.add_argument("--depth", type=int, default=0,
                        help="llama-bench -d: decode after this many cached tokens (q3run's decode already follows its -p prompt)")
    parser.add_argument("--context", type=int, default=0, help="q3run --ctx")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--nice", type=int, default=-20 if os.geteuid() == 0 else None)
    parser.add_argument("--q3run-arg", action="append", default=[], help="one more q3run bench argument")
    args = parser.parse_args()

    table = {"llama pp": [], "llama tg": [], "q3c pp": [], "q3c tg": [], "q3c floor share": [],
             "q3c best-probe share": [], "q3c share of its weights' read": [], "probe GB/s": [], "llama floor share (weights only)": [],
             "q3c load s": [], "q3c load kernel CPU s": []}
    for round_index in range(args.rounds):
        table["llama pp"].append(llama_rate(args, args.prompt, 0))
        table["llama tg"].append(llama_rate(args, 0, args.generated))
        q3 = q3run_round(args)
        table["q3c pp"].append(q3["prefill_tok_s"])
        table["q3c tg"].append(q3["decode_tok_s"])
        table["q3c floor share"].append(q3["fraction_of_bandwidth"])  # of the median probe
        table["q3c best-probe share"].append(q3["fraction_of_best_bandwidth"])
        # Decode over a plain read of the weights where they lie (the probe
        # reads fresh memory, which may sit on other pages; docs/q3run.md).
        table["q3c share of its weights' read"].append(q3["fraction_of_weights_read"])
        # The bandwidth q3run's probes measured (their median), and llama.cpp's
        # decode against it counting the weights only (the same bytes in BF16;
        # its cache reads left out, so a lower bound): when both sit near the
        # floor, the machine, not a kernel, sets the decode ratio.
        table["probe GB/s"].append(q3["measured_bandwidth_gb_s"])
        table["llama floor share (weights only)"].append(
            table["llama tg"][-1] * q3["decode_bytes_per_token"] / 1e9 / q3["measured_bandwidth_gb_s"])
        table["q3c load s"].append(q3["load_seconds"])
        # CPU time of all threads in the kernel during the load (page faults
        # on fresh memory), so it can exceed the load's wall time.
        table["q3c load kernel CPU s"].append(q3["load_cpu_seconds"]["system"])
        print(f"round {round_index + 1}: " + ", ".join(f"{k} {v[-1]:.3g}" for k, v in table.items()), flush=True)
    medians = {k: statistics.median(v) for k, v in table.items()}
    print("median: " + ", ".join(f"{k} {v:.3g}" for k, v in medians.items()))
    print(f"ratio q3c/llama: prefill {medians['q3c pp'] / medians['llama pp']:.2f}, "
          f"decode {medians['q3c tg'] / medians['llama tg']:.2f}")


if __name__ == "__main__":
    main()
