#!/usr/bin/env python3
"""Shuffle quality of Sluice's orders against MosaicML Streaming's py1e.

Scores one epoch's training order (bench/README.md, "Shuffle quality"):

* Streaming's metric (their simulation/core/shuffle_quality.py): the Shannon
  entropy, in bits, of the distribution of |id[k+1] - id[k]| over the order,
  once over sample ids and once over shard ids, combined by harmonic mean.
  Higher is better; a uniform random permutation of n samples scores about
  log2(n) - 0.28 on sample ids.
* Batch label concentration (ours): the data are class-sorted (label =
  id * classes // n, as when an image_folder is packed in folder order), the
  order is cut into batches of --batch, and we count the pairs of samples of
  one batch that share a label. The figure is that fraction of pairs divided by
  its expectation for a uniform random permutation,
  sum_c n_c (n_c - 1) / (n (n - 1)). 1.0 means batches are as mixed as a
  global shuffle; k means k times more same-class pairs (class-clumped
  batches, which hurt SGD and BatchNorm statistics).

Contenders, on the same shard layout (shards of S consecutive ids):
  sequential, shuffle (global) and shard_shuffle at each --buffers value, from
  the sluice_shuffle_order binary; py1e from `mosaicml-streaming` with
  shuffle_block_size = the same values (one canonical node), when installed.
"""

import argparse
import subprocess
import sys

import numpy as np


def entropy(order):
    diffs = np.abs(np.diff(order))
    freqs = np.bincount(diffs)
    freqs = freqs[freqs != 0]
    p = freqs / (order.shape[0] - 1)
    return max(0.0, float(-np.sum(p * np.log2(p))))


def streaming_metric(order, shard_size):
    sample = entropy(order)
    shard = entropy(order // shard_size)
    q = 2 * sample * shard / (sample + shard) if sample + shard > 0 else 0.0
    return q + 0.0, sample + 0.0, shard + 0.0


def label_concentration(order, n, classes, batch):
    labels = order * classes // n
    nb = order.shape[0] // batch
    rows = np.repeat(np.arange(nb, dtype=np.int64), batch)
    counts = np.bincount(rows * classes + labels[: nb * batch], minlength=nb * classes)
    same_pairs = float(np.sum(counts * (counts - 1) / 2))
    observed = same_pairs / (nb * batch * (batch - 1) / 2)
    sizes = np.bincount(np.arange(n, dtype=np.int64) * classes // n, minlength=classes)
    expected = float(np.sum(sizes * (sizes - 1))) / (n * (n - 1))
    return observed / expected


def sluice_order(binary, n, shard_size, order, buffer, seed, epoch):
    cmd = [binary, "--n", str(n), "--shard-size", str(shard_size), "--order", order,
           "--buffer", str(buffer), "--seed", str(seed), "--epoch", str(epoch),
           "--format", "int64"]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE).stdout
    return np.frombuffer(out, dtype=np.int64)


def py1e_order(n, shard_size, block, seed, epoch):
    from streaming.base.shuffle import get_shuffle  # mosaicml-streaming

    sizes = np.full(n // shard_size, shard_size, dtype=np.int64)
    if n % shard_size:
        sizes = np.append(sizes, n % shard_size)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "block size smaller than shard size"
        return get_shuffle("py1e", sizes, 1, seed, epoch, block)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default="build/sluice_shuffle_order")
    ap.add_argument("--n", type=int, default=1_281_167)
    ap.add_argument("--shard-sizes", default="256,2500,10000")
    ap.add_argument("--buffers", default="1000,10000,100000")
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--epoch", type=int, default=0)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=256)
    args = ap.parse_args()
    try:
        import streaming  # noqa: F401

        have_streaming = True
    except ImportError:
        have_streaming = False
        print("note: mosaicml-streaming is not installed; py1e rows skipped", file=sys.stderr)

    print(f"n={args.n} seed={args.seed} epoch={args.epoch} classes={args.classes} "
          f"batch={args.batch}")
    print("| shard size | order | budget (samples) | Streaming metric | sample H | shard H "
          "| label conc. |")
    print("|---:|---|---:|---:|---:|---:|---:|")

    def row(shard_size, name, budget, order):
        assert np.array_equal(np.sort(order), np.arange(args.n)), name + " is not a permutation"
        q, hs, hh = streaming_metric(order, shard_size)
        lc = label_concentration(order, args.n, args.classes, args.batch)
        print(f"| {shard_size} | {name} | {budget} | {q:.3f} | {hs:.3f} | {hh:.3f} | {lc:.2f} |",
              flush=True)

    for shard_size in [int(s) for s in args.shard_sizes.split(",")]:
        common = (args.n, shard_size)
        row(shard_size, "sequential", "-",
            sluice_order(args.binary, *common, "sequential", 1, args.seed, args.epoch))
        row(shard_size, "shuffle (global)", "-",
            sluice_order(args.binary, *common, "shuffle", 1, args.seed, args.epoch))
        for b in [int(x) for x in args.buffers.split(",")]:
            row(shard_size, "shard_shuffle", b,
                sluice_order(args.binary, *common, "shard_shuffle", b, args.seed, args.epoch))
            if have_streaming:
                row(shard_size, "py1e", b, py1e_order(*common, b, args.seed, args.epoch))


if __name__ == "__main__":
    main()
