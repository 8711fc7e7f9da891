#!/usr/bin/env python3
"""Writes an image_folder (ROOT/CLASS/NAME.JPEG, classes sorted) as
WebDataset-style tar shards with Python's tarfile, for machines without the
`sluice` CLI (bench/remote/device_kit.sh): sample i, in sorted class then
file order, becomes KEY.jpg and KEY.cls (the class number as text), KEY the
nine-digit i; a new shard-NNNNNN.tar starts when the current one would pass
--shard-size bytes. No Sluice index: tar_shards builds one on first open.

    bench/remote/tar_folder.py FOLDER OUT_DIR [--shard-size BYTES]
"""

import argparse
import io
import os
import tarfile


def samples(folder):
    classes = sorted(d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d)))
    for label, name in enumerate(classes):
        for f in sorted(os.listdir(os.path.join(folder, name))):
            yield os.path.join(folder, name, f), label


def add(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("out")
    ap.add_argument("--shard-size", type=int, default=32 << 20)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    shard, size, tar = 0, 0, None
    for i, (path, label) in enumerate(samples(a.folder)):
        with open(path, "rb") as f:
            jpg = f.read()
        if tar is None or size + len(jpg) > a.shard_size:
            if tar is not None:
                tar.close()
                shard += 1
            tar = tarfile.open(os.path.join(a.out, "shard-%06d.tar" % shard), "w", format=tarfile.USTAR_FORMAT)
            size = 0
        key = "%09d" % i
        add(tar, key + ".jpg", jpg)
        add(tar, key + ".cls", str(label).encode())
        size += len(jpg) + 3 * 512  # two headers, and the .cls member padded to a block
    if tar is not None:
        tar.close()
    print("tar_folder: %d shard(s) in %s" % (shard + 1, a.out))


if __name__ == "__main__":
    main()
