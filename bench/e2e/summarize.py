#!/usr/bin/python3
"""Summarizes bench/e2e/run.sh's RESULT log into a Markdown table.

    python3 bench/e2e/summarize.py build-bench/e2e/results.log

Per contender: the median images/s over the rounds (and the range), the ratio
of medians to the decode ceiling, Sluice / contender, and the largest peak
memory seen. Then the issue's targets for Sluice: >= 0.9x the decode ceiling,
>= 2.5x PyTorch's DataLoader, peak RSS <= 400 MB at batch 256.
"""

import statistics
import sys

NAMES = {
    "decode_ceiling": "decode-only ceiling (TurboJPEG, full size, RAM)",
    "sluice": "Sluice (imagenet_train plan)",
    "sluice_dct": "Sluice, --dct-scaling",
    "torch": "PyTorch DataLoader + torchvision",
    "dali": "DALI CPU pipeline",
}


def parse(path):
    runs, loads, header = {}, [], []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("#"):
                header.append(line[1:].strip())
            elif line.startswith("LOAD "):
                loads.append(float(line.split()[1]))
            elif line.startswith("RESULT "):
                parts = line.split()
                fields = dict(p.split("=", 1) for p in parts[2:])
                runs.setdefault(parts[1], []).append(fields)
    return runs, loads, header


def main():
    runs, loads, header = parse(sys.argv[1])
    for h in header:
        print(h)
    if loads:
        print(f"1-min load average during the run: {min(loads):.1f} to {max(loads):.1f}")
    med = {}
    rows = []
    for key in ["decode_ceiling", "sluice", "sluice_dct", "torch", "dali"]:
        if key not in runs:
            continue
        rates = [float(r["images_per_s"] if "images_per_s" in r else r["images_per_s_median"])
                 for r in runs[key]]
        med[key] = statistics.median(rates)
        mem = ""
        rss = [float(r["peak_rss_mb"]) for r in runs[key] if "peak_rss_mb" in r]
        pss = [float(r["peak_pss_mb"]) for r in runs[key] if "peak_pss_mb" in r]
        if rss:
            mem = f"{max(rss):.0f} MB"
            if pss:
                mem += f" (PSS {max(pss):.0f} MB)"
        rows.append((key, rates, mem))

    ceiling = med.get("decode_ceiling")
    sluice = med.get("sluice")
    print()
    print("| contender | images/s median (min–max, n) | × ceiling | Sluice ÷ this | peak memory |")
    print("|---|---|---|---|---|")
    for key, rates, mem in rows:
        ratio_c = f"{med[key] / ceiling:.2f}" if ceiling else "–"
        ratio_s = f"{sluice / med[key]:.2f}" if sluice and not key.startswith("sluice") else "–"
        print(f"| {NAMES[key]} | {med[key]:.0f} ({min(rates):.0f}–{max(rates):.0f}, "
              f"{len(rates)}) | {ratio_c} | {ratio_s} | {mem or '–'} |")

    print()
    if sluice is None:
        print("Sluice did not run: no targets to check.")
        return
    checks = []
    if ceiling:
        checks.append((f"Sluice ≥ 0.9× decode ceiling: {sluice / ceiling:.2f}×",
                       sluice >= 0.9 * ceiling))
    if "torch" in med:
        checks.append((f"Sluice ≥ 2.5× PyTorch DataLoader: {sluice / med['torch']:.2f}×",
                       sluice >= 2.5 * med["torch"]))
    rss = max(float(r["peak_rss_mb"]) for r in runs["sluice"])
    batch = runs["sluice"][0].get("batch", "?")
    checks.append((f"Sluice peak RSS ≤ 400 MB at batch {batch}: {rss:.0f} MB", rss <= 400))
    for text, ok in checks:
        print(f"- {text} — {'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    main()
