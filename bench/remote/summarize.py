#!/usr/bin/python3
"""Summarizes bench/remote/run.sh's log into a Markdown table: per contender,
the median images/s over the rounds (and the range), the ratio of medians to
local shards in the same order, and the median over rounds of the trainer's
wait per batch (p50/p99 of Next() over a run's timed batches) and of the
loader's batch latency p99; the median request counters (REMOTE lines:
requests, hedges, hedge wins, retries, request latency p50/p99); then issue
16's two targets.

    bench/remote/summarize.py build-bench/remote/results.log
"""

import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
from summarize import parse  # noqa: E402  (bench/e2e/summarize.py: the RESULT log format)


def median(rs, key):
    return statistics.median(float(r[key]) for r in rs)


def remote_rows(path):
    """{name: [{field: value}]} from the log's REMOTE lines."""
    rows = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) > 2 and parts[0] == "REMOTE":
                rows.setdefault(parts[1], []).append(dict(p.split("=", 1) for p in parts[2:]))
    return rows


def cpu_s(rs):
    """The median loader CPU-seconds per run, or '-' for logs without cpu_s."""
    values = [float(r["cpu_s"]) for r in rs if "cpu_s" in r]
    return f"{statistics.median(values):.2f}" if values else "-"


def main():
    runs, loads, header = parse(sys.argv[1])
    remote = remote_rows(sys.argv[1])
    for h in header:
        print(h)
    if loads:
        print(f"1-min load average during the run: {min(loads):.1f} to {max(loads):.1f}")
    print()
    print("| contender | images/s (median) | range | vs local, same order "
          "| loader CPU-s (median) | wait p50 ms | wait p99 ms | batch latency p99 ms |")
    print("|---|---|---|---|---|---|---|---|")
    base = {"shuffle": "local_shuffle", "shard_shuffle": "local_shard_shuffle"}
    for name, rs in runs.items():
        rates = [float(r["images_per_s"]) for r in rs]
        ref = base["shard_shuffle" if name.endswith("shard_shuffle") else "shuffle"]
        ratio = (f"{median(rs, 'images_per_s') / median(runs[ref], 'images_per_s'):.2f}x"
                 if ref in runs else "-")
        print(f"| {name} | {statistics.median(rates):.1f} | {min(rates):.1f}-{max(rates):.1f} "
              f"| {ratio} | {cpu_s(rs)} | {median(rs, 'take_p50_ms'):.1f} | {median(rs, 'take_p99_ms'):.1f} "
              f"| {median(rs, 'batch_p99_ms'):.1f} |")
    if remote:
        print()
        print("| contender | requests | hedges | hedge wins | retries | request p50 ms "
              "| request p99 ms |")
        print("|---|---|---|---|---|---|---|")
        for name, rs in remote.items():
            print(f"| {name} | {median(rs, 'requests'):.0f} | {median(rs, 'hedges'):.0f} "
                  f"| {median(rs, 'hedge_wins'):.0f} | {median(rs, 'retries'):.0f} "
                  f"| {median(rs, 'latency_p50_ms'):.2f} | {median(rs, 'latency_p99_ms'):.2f} |")
    print()
    pairs = [(f"{src}_{order}", f"local_{order}")
             for src in ("s3", "http", "moto") for order in ("shuffle", "shard_shuffle")]
    for s3, local in pairs:
        if s3 in runs and local in runs:
            r = median(runs[s3], "images_per_s") / median(runs[local], "images_per_s")
            # Round by round (the contenders alternate), the median of the ratios.
            per_round = [float(a["images_per_s"]) / float(b["images_per_s"])
                         for a, b in zip(runs[s3], runs[local])]
            target = s3.startswith(("s3", "moto"))  # http_* only shows what signing costs
            what = "target S3 >= 0.9x local" if target else "vs local"
            verdict = f", {'met' if r >= 0.9 else 'NOT met'}" if target else ""
            print(f"- {what} ({s3}): {r:.2f}x by medians{verdict}; per round "
                  f"{', '.join(f'{x:.2f}' for x in per_round)} "
                  f"(median {statistics.median(per_round):.2f})")
    if "s3_shuffle" in runs:
        for key, what in [("take_p99_ms", "wait"), ("batch_p99_ms", "batch latency")]:
            clean = median(runs["s3_shuffle"], key)
            for name in ["s3_slow_hedge", "s3_slow_nohedge"]:
                if name in runs:
                    r = median(runs[name], key) / clean
                    verdict = "met" if r <= 1.5 else "NOT met"
                    note = f", {verdict}" if name == "s3_slow_hedge" else ""
                    print(f"- p99 {what} with 1% slow requests, {name}: {r:.2f}x the "
                          f"fault-free p99{note}")

if __name__ == "__main__":
    main()
