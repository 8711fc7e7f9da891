#!/usr/bin/env python3
"""Trainer-side throughput and consumer wait: preprocessing in-process against
preprocessing in Ray actors (and Ray Data read tasks) at equal total cores, with
a fast trainer (consumes as fast as batches come) and a simulated slow trainer
(sleeps --trainer-ms per batch). Contenders alternate within each round; the
report gives per-contender medians over --rounds epochs and the ratio to
in-process.

    PYTHONPATH=build/python /usr/bin/python3 bench/ray/ray_overhead.py \
        [--cores 2] [--images 1024] [--batch 32] [--size 224] [--rounds 3] [--trainer-ms 0,40] [--epochs 2]

Contenders (each uses --cores loader threads in total):
  inprocess  plan.loader(threads=cores), torch.from_dlpack of the images
  actors     sluice.ray.ActorLoader(num_actors=cores, threads=1, output="torch")
             (actors created once, outside the timing; each round is the loader's
             next epoch, which the actors start filling as the previous one ends)
  raydata    ray.data.read_datasource(SluiceDatasource(plan, epoch)) +
             iter_batches(batch_size) (a new Dataset per epoch, as Ray Train runs one)
Timing: --epochs epochs per contender per round, from the first next() to the
end of the last; consumer wait = time the trainer spent blocked waiting for
batches. The in-process loader and the actor loader are persistent (each
fills its next epoch's first batches as an epoch ends, like a training job).
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import sluice

SPEC = """\
sluice: 1
name: ray_bench
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


def timed_epoch(batches, trainer_s, consume):
    """Consumes an iterator of batches; returns (seconds, images,
    wait seconds). Wait = time blocked in next(); the trainer step is simulated
    by consume() plus a sleep of trainer_s."""
    it = iter(batches)
    t0 = time.perf_counter()
    wait = 0.0
    images = 0
    while True:
        w0 = time.perf_counter()
        try:
            b = next(it)
        except StopIteration:
            break
        wait += time.perf_counter() - w0
        images += consume(b)
        if trainer_s:
            time.sleep(trainer_s)
    return time.perf_counter() - t0, images, wait


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--images", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=2, help="epochs per contender per round")
    ap.add_argument("--trainer-ms", default="0,40")
    ap.add_argument("--contenders", default="inprocess,actors,raydata")
    ap.add_argument("--build", default=os.environ.get("SLUICE_BUILD_DIR", "build"))
    args = ap.parse_args()
    import numpy as np
    import ray
    import torch

    import sluice.ray as sray

    tmp = tempfile.TemporaryDirectory(prefix="sluice_ray_bench_")
    data = os.path.join(tmp.name, "data")
    subprocess.run([os.path.join(args.build, "sluice_make_dataset"), data, "--images",
                    str(args.images), "--classes", "10"], check=True, stdout=subprocess.DEVNULL)
    plan = sluice.compile(SPEC.format(size=args.size, batch=args.batch),
                          os.path.join(tmp.name, "bench.plan"),
                          cpu_targets=["x86-64-linux-sse41", "x86-64-linux-avx-avx2-f16c-fma-sse41"],
                          cuda=False).bind(DATA=data)
    # Logical CPUs: the actors hold `cores` of them for the whole run, and Ray
    # Data's read tasks (one loader thread each) get the other `cores`; only one
    # contender runs at a time, so each uses `cores` loader threads.
    ray.init(num_cpus=2 * args.cores, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    actors = sray.ActorLoader(plan, num_actors=args.cores, threads=1, output="torch")
    local = plan.loader(threads=args.cores)
    for loader in (actors, local):  # warm: started, plan loaded, one epoch read
        for _ in loader:
            pass
    epoch = [1]

    def to_torch(b):
        return len(torch.from_dlpack(b["image"]))

    def epochs(loader):  # --epochs epochs of a persistent loader, back to back
        for _ in range(args.epochs):
            yield from loader

    def inprocess(trainer_s):
        return timed_epoch(epochs(local), trainer_s, to_torch)

    def via_actors(trainer_s):
        return timed_epoch(epochs(actors), trainer_s, lambda b: len(b["image"]))

    def raydata(trainer_s):
        def batches():
            for _ in range(args.epochs):
                src = sray.SluiceDatasource(plan, epoch=epoch[0])
                epoch[0] += 1
                ds = ray.data.read_datasource(src, override_num_blocks=4 * args.cores,
                                              concurrency=args.cores)
                yield from ds.iter_batches(batch_size=args.batch, batch_format="numpy")
        return timed_epoch(batches(), trainer_s,
                           lambda b: len(torch.from_numpy(np.ascontiguousarray(b["image"]))))

    run = {"inprocess": inprocess, "actors": via_actors, "raydata": raydata}
    names = args.contenders.split(",")
    results = {}
    for trainer_ms in [float(x) for x in args.trainer_ms.split(",")]:
        for r in range(args.rounds):
            order = names[r % len(names):] + names[:r % len(names)]  # rotate who goes first
            for name in order:
                secs, images, wait = run[name](trainer_ms / 1000.0)
                results.setdefault((trainer_ms, name), []).append((images / secs, wait / secs))
                print("trainer %4.0f ms  round %d  %-9s %7.1f images/s  wait %5.1f%%"
                      % (trainer_ms, r, name, images / secs, 100 * wait / secs), flush=True)
    print("\nmedians over %d rounds (%d cores, %d images, batch %d, %dx%d float16; load %s)"
          % (args.rounds, args.cores, args.images, args.batch, args.size, args.size,
             " ".join("%.1f" % x for x in os.getloadavg())))
    print("| trainer step | contender | images/s | consumer wait | vs in-process |")
    print("|---|---|---|---|---|")
    for (trainer_ms, name), xs in results.items():
        ips = statistics.median(x[0] for x in xs)
        wait = statistics.median(x[1] for x in xs)
        base = statistics.median(x[0] for x in results[(trainer_ms, "inprocess")]) \
            if (trainer_ms, "inprocess") in results else ips
        print("| %s | %s | %.1f | %.1f%% | %.2fx |"
              % ("none" if trainer_ms == 0 else "%.0f ms" % trainer_ms, name, ips, 100 * wait,
                 ips / base))
    actors.shutdown()
    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
