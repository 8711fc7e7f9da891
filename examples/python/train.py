#!/usr/bin/env python3
"""A short real training loop fed by Sluice: a small CNN (PyTorch) on a
generated image_folder data set, printing images/s and the time it waited for
data.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/train.py \
        [--data DIR] [--epochs 2] [--plan DIR] [--threads N]

Without --data it writes a synthetic set with build/sluice_make_dataset (or
PIL when that tool is missing). Without --plan it compiles the spec below
(one CPU target: a quick compile). Stops with an error message (not a trace)
on Sluice errors.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import sluice
import sluice.torch

SPEC = """\
sluice: 1
name: small_cnn_train
source: {format: image_folder, path: "${DATA}"}
sampling: {order: shuffle, seed: 0, remainder: drop}
graph:
  - decode_jpeg: {in: jpg, out: image, color: rgb}
  - random_resized_crop: {size: [64, 64], scale: [0.25, 1.0], ratio: [0.75, 1.3333]}
  - random_flip: {horizontal: 0.5}
  - normalize: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225], scale: 255}
  - layout: {to: CHW}
  - cast: {dtype: float32}
batch: {size: 64, fields: {image: image, label: cls}}
output: {device: cpu, on_error: {policy: skip, max_fraction: 0.01}}
"""


class SmallCNN(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, padding=1)
        self.c2 = nn.Conv2d(16, 32, 3, padding=1)
        self.c3 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        x = F.relu(self.c3(x))
        return self.fc(x.mean(dim=(2, 3)))


def make_data(root, images, classes):
    here = os.path.dirname(os.path.abspath(__file__))
    tool = os.path.join(os.environ.get("SLUICE_BUILD_DIR", os.path.join(here, "..", "..", "build")),
                        "sluice_make_dataset")
    if os.path.exists(tool):
        subprocess.run([tool, root, "--images", str(images), "--classes", str(classes)], check=True,
                       stdout=subprocess.DEVNULL)
        return
    from PIL import Image
    import numpy as np

    rng = np.random.default_rng(0)
    for i in range(images):
        d = os.path.join(root, "c%04d" % (i % classes))
        os.makedirs(d, exist_ok=True)
        base = np.array([40 + 60 * (i % classes), 200 - 50 * (i % classes), 120], np.float32)
        img = base + rng.normal(0, 30, size=(96 + i % 64, 128, 3))
        Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(os.path.join(d, "%06d.jpg" % i))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data")
    ap.add_argument("--plan")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--images", type=int, default=1280)
    ap.add_argument("--classes", type=int, default=4)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()

    tmp = tempfile.TemporaryDirectory(prefix="sluice_train_")
    data = args.data
    if data is None:
        data = os.path.join(tmp.name, "data")
        print("writing %d synthetic images to %s" % (args.images, data), flush=True)
        make_data(data, args.images, args.classes)
    classes = len([d for d in os.listdir(data) if os.path.isdir(os.path.join(data, d))])

    try:
        if args.plan:
            plan = sluice.load(args.plan, vars={"DATA": data})
        else:
            t0 = time.perf_counter()
            plan = sluice.compile(SPEC, os.path.join(tmp.name, "train.plan"),
                                  cpu_targets=["x86-64-linux-sse41", "x86-64-linux-avx-avx2-f16c-fma-sse41"],
                                  cuda=False).bind(DATA=data)
            print("compiled the plan in %.1f s" % (time.perf_counter() - t0), flush=True)
        overrides = {} if args.threads is None else {"threads": args.threads}
        loader = sluice.torch.loader(plan, **overrides)
    except sluice.SluiceError as e:
        print("train.py: %s" % e, file=sys.stderr)
        return 1

    torch.manual_seed(0)
    model = SmallCNN(classes)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for epoch in range(args.epochs):
        loader.set_epoch(epoch)
        seen, correct, wait, loss_sum, steps = 0, 0, 0.0, 0.0, 0
        t_epoch = time.perf_counter()
        t_wait = time.perf_counter()
        for batch in loader:
            wait += time.perf_counter() - t_wait
            x, y = batch["image"], batch["label"]
            out = model(x)
            loss = F.cross_entropy(out, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            seen += y.shape[0]
            correct += (out.argmax(1) == y).sum().item()
            loss_sum += loss.item()
            steps += 1
            del x, y, batch  # hand the buffer back before waiting for the next
            t_wait = time.perf_counter()
        dt = time.perf_counter() - t_epoch
        print("epoch %d: %d images in %.2f s = %.0f images/s; waited for data %.2f s (%.0f%%); "
              "loss %.3f, train accuracy %.1f%%" % (epoch, seen, dt, seen / dt, wait, 100 * wait / dt,
                                                     loss_sum / max(steps, 1), 100.0 * correct / max(seen, 1)),
              flush=True)
    s = loader.stats()
    print("loader: %.0f images/s on %d threads; p50 batch latency %.1f ms; bad samples %d"
          % (s["images_per_second"], s["threads"], 1e3 * s["latency_p50"], s["bad_samples"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
