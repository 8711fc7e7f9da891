#!/usr/bin/env python3
"""Per-batch cost of iterating Sluice from Python, against the C++ loader's
throughput measured in the same run on the same plan and data.

    PYTHONPATH=build/python /usr/bin/python3 bench/python/overhead.py \
        [--data DIR] [--images 2048] [--batch 64] [--size 224] [--threads N] [--rounds 3]

Three ways to consume the same epochs, alternated over --rounds:
  native  Loader.drain_native(): Next() in C++, no Python object per batch
  python  `for batch in loader` + numpy.asarray / torch.from_dlpack of every field
Reported:
  - images/s of each and their ratio (the end-to-end cost of Python; noisy on
    a shared machine, so the medians of the rounds);
  - the Python-side time per batch: wall time of the python loop minus the
    time spent blocked inside Next() (LoaderStats.consumer_wait_seconds), i.e.
    what iterating costs the training thread, in microseconds, and as a
    fraction of the C++ per-batch time (the target: < 2%).
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import sluice

SPEC = """\
sluice: 1
name: overhead_bench
source: {{format: image_folder, path: "${{DATA}}"}}
sampling: {{order: shuffle, seed: 0, remainder: drop}}
graph:
  - decode_jpeg: {{in: jpg, out: image, color: rgb}}
  - random_resized_crop: {{size: [{size}, {size}], scale: [0.08, 1.0], ratio: [0.75, 1.3333]}}
  - random_flip: {{horizontal: 0.5}}
  - normalize: {{mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225], scale: 255}}
  - layout: {{to: CHW}}
  - cast: {{dtype: float16}}
batch: {{size: {batch}, fields: {{image: image, label: cls}}}}
output: {{device: cpu, on_error: {{policy: skip, max_fraction: 0.01}}}}
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data")
    ap.add_argument("--images", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--build", default=os.environ.get("SLUICE_BUILD_DIR", "build"))
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        torch = None

    tmp = tempfile.TemporaryDirectory(prefix="sluice_overhead_")
    data = args.data
    if data is None:
        data = os.path.join(tmp.name, "data")
        subprocess.run([os.path.join(args.build, "sluice_make_dataset"), data, "--images",
                        str(args.images), "--classes", "10"], check=True, stdout=subprocess.DEVNULL)
    t0 = time.perf_counter()
    plan = sluice.compile(SPEC.format(size=args.size, batch=args.batch),
                          os.path.join(tmp.name, "bench.plan"),
                          cpu_targets=["x86-64-linux-sse41", "x86-64-linux-avx-avx2-f16c-fma-sse41"],
                          cuda=False).bind(DATA=data)
    print("compiled in %.1f s" % (time.perf_counter() - t0), flush=True)
    knobs = {} if args.threads is None else {"threads": args.threads}

    def native():
        loader = plan.loader(**knobs)
        t = time.perf_counter()
        n = loader._core.drain_native(1 << 62)  # C++ Next() loop, no Python objects
        dt = time.perf_counter() - t
        return n, dt

    def python():
        loader = plan.loader(**knobs)
        wait0 = loader.stats()["consumer_wait_seconds"]
        t = time.perf_counter()
        n = 0
        for batch in loader:
            for name, v in batch.items():
                if torch is not None:
                    torch.from_dlpack(v)
                else:
                    np.asarray(v)
            n += 1
        dt = time.perf_counter() - t
        s = loader.stats()
        return n, dt, dt - (s["consumer_wait_seconds"] - wait0), s["threads"]

    rows_native, rows_py, py_side = [], [], []
    threads = None
    for r in range(args.rounds):
        n, dt = native()
        rows_native.append(n * args.batch / dt)
        n2, dt2, outside, threads = python()
        rows_py.append(n2 * args.batch / dt2)
        py_side.append(outside / n2)
        print("round %d: native %.0f img/s, python %.0f img/s, python-side %.1f us/batch"
              % (r, rows_native[-1], rows_py[-1], 1e6 * py_side[-1]), flush=True)
    # Hand-off cost on a batch already in hand (no loader work in the timing).
    loader = plan.loader(**knobs)
    b = loader.next()
    reps = 20000
    t = time.perf_counter()
    for _ in range(reps):
        np.asarray(b["image"])
    asarray_us = (time.perf_counter() - t) / reps * 1e6
    dlpack_us = None
    if torch is not None:
        t = time.perf_counter()
        for _ in range(reps):
            torch.from_dlpack(b["image"])
        dlpack_us = (time.perf_counter() - t) / reps * 1e6
    del b, loader

    nat, py, side = statistics.median(rows_native), statistics.median(rows_py), statistics.median(py_side)
    per_batch_native = args.batch / nat
    print("\nplan: %dx%d float16 CHW, batch %d, %d images, %d threads; consumer: %s" % (
        args.size, args.size, args.batch, args.images, threads,
        "torch.from_dlpack" if torch is not None else "numpy.asarray"))
    print("native (C++ Next loop):     %.0f images/s (%.2f ms/batch)" % (nat, 1e3 * per_batch_native))
    print("python (for batch in ...):  %.0f images/s (ratio %.3f)" % (py, py / nat))
    print("python-side time per batch: %.1f us = %.3f%% of the C++ per-batch time"
          % (1e6 * side, 100 * side / per_batch_native))
    print("hand-off of one field, batch in hand: numpy.asarray %.1f us%s" % (
        asarray_us, "" if dlpack_us is None else ", torch.from_dlpack %.1f us" % dlpack_us))
    return 0


if __name__ == "__main__":
    sys.exit(main())
