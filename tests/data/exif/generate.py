#!/usr/bin/python3
"""Writes the EXIF orientation fixtures of tests/runtime/decode/exif_test.cc.

Run with Debian's python3 and PIL (python3-pil):
    /usr/bin/python3 tests/data/exif/generate.py
orientN.jpg (N = 1..8) is one 20x12 photo-like image saved by PIL with EXIF
orientation tag (0x0112) N; orientN.expected is what PIL shows for it,
ImageOps.exif_transpose(Image.open(f)).convert("RGB"), as raw uint8 HWC:
12 x 20 x 3 for N = 1..4, 20 x 12 x 3 (turned) for N = 5..8.
stored.expected is the stored (not oriented) decode, the same for every file.
"""
import os

import numpy as np
from PIL import Image, ImageOps

W, H = 20, 12
OUT = os.path.dirname(os.path.abspath(__file__))


def main():
    y, x = np.mgrid[0:H, 0:W]
    # Distinct corners and a smooth body, so every flip and turn differs.
    img = np.stack([x * 255 // (W - 1), y * 255 // (H - 1), (x * 7 + y * 13) % 256], axis=-1)
    img[:3, :3] = (255, 0, 0)
    img[-3:, -3:] = (0, 0, 255)
    src = Image.fromarray(img.astype(np.uint8), "RGB")
    for n in range(1, 9):
        path = os.path.join(OUT, "orient%d.jpg" % n)
        exif = Image.Exif()
        exif[0x0112] = n
        src.save(path, quality=90, exif=exif)
        im = Image.open(path)
        if n == 1:
            with open(os.path.join(OUT, "stored.expected"), "wb") as f:
                f.write(np.asarray(im.convert("RGB"), dtype=np.uint8).tobytes())
        out = ImageOps.exif_transpose(im).convert("RGB")
        want = (H, W) if n < 5 else (W, H)
        assert out.size == want[::-1], (n, out.size)
        with open(os.path.join(OUT, "orient%d.expected" % n), "wb") as f:
            f.write(np.asarray(out, dtype=np.uint8).tobytes())


if __name__ == "__main__":
    main()
