"""Checks a `q3run bench --json` report: peak RSS over the weights' bytes is
under a bound. A KV cache on huge pages is resident from the first token for
the capacity it has (256 positions of the context until it grows): not the
weights' doing, so it is left out. Prints 'ok POSITIONS CONTEXT'."""
import json
import sys

report = json.load(open(sys.argv[1]))
bound = float(sys.argv[2])
kv = report["kv_cache"]
used = kv["bytes"] * kv["positions"] // report["context_length"] if kv["huge_pages"] else 0
ratio = (report["peak_rss_bytes"] - used) / report["weight_bytes"]
assert ratio < bound, f"peak RSS {ratio:.2f}x the weights, bound {bound}"
print("ok", kv["positions"], report["context_length"])
