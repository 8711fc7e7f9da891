#!/usr/bin/env python3
"""DALI's side of the end-to-end benchmark: a CPU-only pipeline (no GPU).

    PYTHON_WITH_DALI bench/e2e/dali_loader.py DATA_DIR/train --threads T \
        [--batches N] [--warmup W] [--batch-size 256]

Needs nvidia-dali (e.g. `pip install nvidia-dali-cuda120` into a venv; the CPU
operators run without a GPU or CUDA driver). The pipeline mirrors
examples/imagenet_train.yaml on DALI's CPU operators:

    readers.file(random_shuffle=True)           labels from sorted class subfolders
    decoders.image_random_crop(device="cpu")    RGB; random_area (0.08, 1),
                                                random_aspect_ratio (3/4, 4/3); ROI decode
    resize(224 x 224, linear, antialias)
    crop_mirror_normalize(mirror=coin_flip(0.5), mean/std * 255, CHW, float16)

Pipeline(batch_size=B, num_threads=T, device_id=None, prefetch_queue_depth=2).
W warm-up batches (not timed), then N timed batches; the reader wraps epochs.
Peak RSS: getrusage ru_maxrss of this one process (DALI runs in threads).

Last line, machine-readable:

    RESULT dali images_per_s=X peak_rss_mb=Y threads=T batch=B batches=N
"""

import argparse
import resource
import time

import nvidia.dali as dali
import nvidia.dali.fn as fn
import nvidia.dali.types as types
from nvidia.dali import pipeline_def


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("root", help="image_folder root (class subfolders)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    @pipeline_def(batch_size=args.batch_size, num_threads=args.threads, device_id=None,
                  seed=args.seed, prefetch_queue_depth=2)
    def train_pipeline():
        jpegs, labels = fn.readers.file(file_root=args.root, random_shuffle=True,
                                        name="reader")
        images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB,
                                               random_area=[0.08, 1.0],
                                               random_aspect_ratio=[3.0 / 4.0, 4.0 / 3.0],
                                               num_attempts=10)
        images = fn.resize(images, resize_x=224, resize_y=224,
                           interp_type=types.INTERP_LINEAR, antialias=True)
        images = fn.crop_mirror_normalize(
            images, dtype=types.FLOAT16, output_layout="CHW",
            mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
            std=[0.229 * 255, 0.224 * 255, 0.225 * 255],
            mirror=fn.random.coin_flip(probability=0.5))
        return images, labels

    pipe = train_pipeline()
    pipe.build()
    for _ in range(args.warmup):
        pipe.run()
    start = time.perf_counter()
    for _ in range(args.batches):
        images, labels = pipe.run()
    seconds = time.perf_counter() - start
    shape = images.as_tensor().shape()
    assert tuple(shape) == (args.batch_size, 3, 224, 224), shape
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(f"dali {dali.__version__} CPU pipeline: {args.warmup} warm-up + {args.batches} timed "
          f"batches of {args.batch_size}, {args.threads} threads")
    print(f"RESULT dali images_per_s={args.batches * args.batch_size / seconds:.1f} "
          f"peak_rss_mb={rss_mb:.1f} threads={args.threads} batch={args.batch_size} "
          f"batches={args.batches}")


if __name__ == "__main__":
    main()
