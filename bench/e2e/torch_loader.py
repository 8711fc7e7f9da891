#!/usr/bin/python3
"""PyTorch's side of the end-to-end benchmark: DataLoader + torchvision ImageFolder.

    /usr/bin/python3 bench/e2e/torch_loader.py DATA_DIR/train --workers T \
        [--batches N] [--warmup W] [--batch-size 256]

The transforms are those of examples/imagenet_train.yaml, on torchvision's PIL
path (Debian's python3-torch 1.13 / python3-torchvision 0.14; PIL decodes with
libjpeg-turbo):

    RandomResizedCrop(224, scale=(0.08, 1), ratio=(3/4, 4/3), antialias=True)
    RandomHorizontalFlip()
    ToTensor()
    Normalize(ImageNet mean, std)
    .half()            per sample, in the workers (halves what crosses to the main process)

DataLoader(batch_size=B, shuffle=True, drop_last=True, num_workers=T,
persistent_workers=True, pin_memory=False). W warm-up batches (worker start-up
and pipeline fill, not timed), then N timed batches; epochs roll over. Keep W
and N multiples of T: each worker builds a whole batch, so batches arrive in
groups of T, and a partial group would skew the timed window.

Memory: a sampler thread in the main process sums, every 0.1 s, the RSS (and
PSS, which counts pages shared between the forked workers once) of the main
process and all its children, and keeps the peak of each sum. Sampled, so the
true peak can only be higher. With psutil when available, else /proc.

Last line, machine-readable:

    RESULT torch images_per_s=X peak_rss_mb=Y peak_pss_mb=Z workers=T batch=B batches=N
"""

import argparse
import os
import threading
import time

import torch
import torchvision
from torchvision import datasets, transforms

try:
    import psutil
except ImportError:  # fall back to /proc
    psutil = None


def to_half(tensor):
    return tensor.half()


def _proc_children(pid):
    kids = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids += [int(x) for x in f.read().split()]
    except OSError:
        pass
    out = list(kids)
    for k in kids:
        out += _proc_children(k)
    return out


def _proc_mem_mb(pid):
    """(rss, pss) in MB of one process from /proc; zeros if it is gone."""
    rss = pss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1])
    except OSError:
        pass
    return rss / 1024.0, pss / 1024.0


class MemorySampler(threading.Thread):
    """Peak of the summed RSS / PSS of this process and its descendants."""

    def __init__(self, period=0.1):
        super().__init__(daemon=True)
        self.period = period
        self.peak_rss = 0.0
        self.peak_pss = 0.0
        self._done = threading.Event()

    def sample(self):
        me = os.getpid()
        rss = pss = 0.0
        if psutil is not None:
            procs = [psutil.Process(me)]
            try:
                procs += procs[0].children(recursive=True)
            except psutil.Error:
                pass
            for p in procs:
                try:
                    info = p.memory_full_info()
                    rss += info.rss / 2**20
                    pss += getattr(info, "pss", info.rss) / 2**20
                except psutil.Error:
                    pass
        else:
            for pid in [me] + _proc_children(me):
                r, p = _proc_mem_mb(pid)
                rss += r
                pss += p
        self.peak_rss = max(self.peak_rss, rss)
        self.peak_pss = max(self.peak_pss, pss)

    def run(self):
        while not self._done.wait(self.period):
            self.sample()

    def stop(self):
        self._done.set()
        self.join()
        self.sample()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("root", help="image_folder root (class subfolders)")
    ap.add_argument("--workers", type=int, default=os.cpu_count())
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=None, help="default: --workers")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.warmup is None:
        args.warmup = max(1, args.workers)

    torch.manual_seed(args.seed)
    transform = transforms.Compose([
        transforms.RandomResizedCrop(224, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0),
                                     antialias=True),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
        transforms.Lambda(to_half),
    ])
    dataset = datasets.ImageFolder(args.root, transform=transform)
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=args.batch_size, shuffle=True, drop_last=True,
        num_workers=args.workers, persistent_workers=args.workers > 0, pin_memory=False)
    if len(loader) == 0:
        raise SystemExit(f"no batches: {len(dataset)} images, batch size {args.batch_size}")

    sampler = MemorySampler()
    sampler.start()
    it = iter(loader)

    def take():
        nonlocal it
        try:
            return next(it)
        except StopIteration:
            it = iter(loader)
            return next(it)

    for _ in range(args.warmup):
        images, labels = take()
    start = time.perf_counter()
    for _ in range(args.batches):
        images, labels = take()
        assert images.dtype == torch.float16 and tuple(images.shape[1:]) == (3, 224, 224)
    seconds = time.perf_counter() - start
    sampler.stop()
    rate = args.batches * args.batch_size / seconds
    print(f"torch {torch.__version__} torchvision {torchvision.__version__}: "
          f"{len(dataset)} images, {args.warmup} warm-up + {args.batches} timed batches of "
          f"{args.batch_size}, {args.workers} workers, memory via "
          f"{'psutil' if psutil else '/proc'}")
    print(f"RESULT torch images_per_s={rate:.1f} peak_rss_mb={sampler.peak_rss:.1f} "
          f"peak_pss_mb={sampler.peak_pss:.1f} workers={args.workers} "
          f"batch={args.batch_size} batches={args.batches}")
    del it, loader  # shuts the persistent workers down


if __name__ == "__main__":
    main()
