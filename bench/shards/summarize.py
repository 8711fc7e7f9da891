#!/usr/bin/python3
"""Summarizes bench/shards/run.sh's log into a Markdown table: per contender
and cache state, the median images/s over the rounds (and the range), the ratio
of medians to the folder in the same cache state, images per CPU-second
(user + system time: what each image costs, less disturbed by machine load)
and its ratio, and the largest peak RSS;
then issue 15's targets (shards >= 1.15x the folder warm, and more than that
cold: evicted, and on the slowfs mount when run.sh ran with STORAGE=slowfs).

    bench/shards/summarize.py build-bench/shards/results.log
    bench/shards/summarize.py --first-batch build-bench/scale/results.log   (scale.sh)
"""

import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
from summarize import parse  # noqa: E402  (bench/e2e/summarize.py: the RESULT log format)


def first_batch(path):
    """scale.sh's table: time to the first batch and RSS then, per source."""
    runs, _, header = parse(path)
    for h in header:
        print(h)
    print("\n| source | first batch (median s) | range | RSS at first batch (median MB) |")
    print("|---|---|---|---|")
    for name, rs in runs.items():
        fb = [float(r["first_batch_s"]) for r in rs]
        rss = [float(r["first_batch_rss_mb"]) for r in rs]
        print(f"| {name} | {statistics.median(fb):.3f} | {min(fb):.3f}-{max(fb):.3f} "
              f"| {statistics.median(rss):.0f} |")


def slowfs_counts(path):
    """Medians of run.sh's "SLOWFS NAME opens=.. reads=.. read_mb=.. daemon_cpu_s=.." lines."""
    seen = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) > 2 and parts[0] == "SLOWFS":
                fields = dict(p.split("=", 1) for p in parts[2:])
                for k, v in fields.items():
                    seen.setdefault(parts[1], {}).setdefault(k, []).append(float(v))
    return {n: {k: statistics.median(v) for k, v in c.items()} for n, c in seen.items()}


def main():
    if sys.argv[1] == "--first-batch":
        first_batch(sys.argv[2])
        return
    runs, loads, header = parse(sys.argv[1])
    for h in header:
        print(h)
    if loads:
        print(f"1-min load average during the run: {min(loads):.1f} to {max(loads):.1f}")
    med = {k: statistics.median(float(r["images_per_s"]) for r in v) for k, v in runs.items()}
    print()
    # Images per CPU-second: batch * batches / (user + system seconds).
    cpu = {k: statistics.median(float(r["batch"]) * float(r["batches"]) / float(r["cpu_s"])
                                for r in v)
           for k, v in runs.items() if all("cpu_s" in r for r in v)}
    print("| contender | cache | images/s (median) | range | vs folder | images per CPU-s (median) | vs folder | peak RSS |")
    print("|---|---|---|---|---|---|---|---|")
    for cache in ["warm", "cold", "slowfs"]:
        for name in ["folder", "shards", "shards512", "shards_nopf", "shards_raw", "shards_ss"]:
            key = f"{name}_{cache}"
            if key not in runs:
                continue
            rates = [float(r["images_per_s"]) for r in runs[key]]
            base = med.get(f"folder_{cache}")
            ratio = f"{med[key] / base:.2f}x" if base else "-"
            rss = max(float(r["peak_rss_mb"]) for r in runs[key])
            cbase = cpu.get(f"folder_{cache}")
            c = f"{cpu[key]:.0f}" if key in cpu else "-"
            cratio = f"{cpu[key] / cbase:.2f}x" if key in cpu and cbase else "-"
            print(f"| {name} | {cache} | {med[key]:.1f} | {min(rates):.1f}-{max(rates):.1f} "
                  f"| {ratio} | {c} | {cratio} | {rss:.0f} MB |")
    slow = slowfs_counts(sys.argv[1])
    if slow:
        print("\nslowfs daemon per run (medians): "
              + "; ".join(f"{n}: {c['opens']:.0f} opens, {c['reads']:.0f} reads, "
                          f"{c['read_mb']:.0f} MB, {c['daemon_cpu_s']:.2f} CPU-s"
                          for n, c in slow.items()))
    print()
    for cache, target in [("warm", 1.15), ("cold", None), ("slowfs", None)]:
        base = med.get(f"folder_{cache}")
        shards = med.get(f"shards_{cache}")
        if base and shards:
            ratio = shards / base
            goal = f">= {target}x" if target else "> the warm ratio"
            extra = ""
            if f"shards_{cache}" in cpu and f"folder_{cache}" in cpu:
                extra = f"; per CPU-second {cpu[f'shards_{cache}'] / cpu[f'folder_{cache}']:.2f}x"
            print(f"target ({cache}): shards / folder = {ratio:.2f}x ({goal}){extra}")


if __name__ == "__main__":
    main()
