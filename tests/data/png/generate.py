#!/usr/bin/python3
"""Writes the PNG fixtures of tests/runtime/decode/png_decoder_test.cc.

Run from anywhere with Debian's python3 and PIL (python3-pil):
    /usr/bin/python3 tests/data/png/generate.py
Each NAME.png comes with NAME.expected: the pixels PIL decodes from that file,
as PIL's convert("RGB"), convert("RGBA"), convert("L") and convert("LA"),
concatenated (uint8 HWC, height x width x 3, then x 4, x 1, x 2).

PIL writes the 8-bit and palette files itself. PIL cannot write 16-bit colour
or interlaced PNGs, so those are written by the small encoder below; their
expected pixels still come from PIL's decoder. 16-bit gray opens in PIL as
mode "I", whose convert("L") clips values above 255; our decoder keeps the
high byte (v >> 8) like PIL's own 16-bit RGB reader, so for that mode the
expected 8-bit plane is PIL's 16-bit plane >> 8.
"""
import os
import struct
import zlib

import numpy as np
from PIL import Image

W, H = 13, 9  # odd sizes: every Adam7 pass is partial
OUT = os.path.dirname(os.path.abspath(__file__))


def pattern(channels, maxval, seed):
    y, x = np.mgrid[0:H, 0:W]
    planes = []
    for c in range(channels):
        v = (x * 37 + y * 71 + c * 53 + seed * 29) * 997 + (x * y * (c + 3))
        planes.append(v % (maxval + 1))
    return np.stack(planes, axis=-1)


def chunk(kind, data):
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))


ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
         (0, 1, 1, 2)]


def raw_png(pixels, color_type, bit_depth, interlaced):
    """PNG bytes of an HxWxC array (filter type 0 on every row)."""
    dtype = ">u2" if bit_depth == 16 else "u1"

    def rows(img):
        return b"".join(b"\0" + img[r].astype(dtype).tobytes() for r in range(img.shape[0]))

    if interlaced:
        data = b""
        for x0, y0, dx, dy in ADAM7:
            sub = pixels[y0::dy, x0::dx]
            if sub.size:
                data += rows(sub)
    else:
        data = rows(pixels)
    ihdr = struct.pack(">IIBBBBB", W, H, bit_depth, color_type, 0, 0, 1 if interlaced else 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(data, 9)) +
            chunk(b"IEND", b""))


def expected(path):
    im = Image.open(path)
    im.load()
    if im.mode in ("I", "I;16", "I;16B"):  # 16-bit gray: high byte, see above
        plane = (np.asarray(im, dtype=np.uint32) >> 8).astype(np.uint8)
        im8 = Image.fromarray(plane, "L")
        if "transparency" in im.info:
            im8.info["transparency"] = im.info["transparency"] >> 8
        im = im8
    parts = [np.asarray(im.convert(mode), dtype=np.uint8) for mode in ("RGB", "RGBA", "L", "LA")]
    for p in parts:
        assert p.shape[:2] == (H, W), (path, p.shape)
    return b"".join(p.tobytes() for p in parts)


def save(name, write):
    path = os.path.join(OUT, name + ".png")
    write(path)
    with open(os.path.join(OUT, name + ".expected"), "wb") as f:
        f.write(expected(path))


def main():
    rgb = pattern(3, 255, 1).astype(np.uint8)
    rgba = pattern(4, 255, 2).astype(np.uint8)
    gray = pattern(1, 255, 3).astype(np.uint8)[..., 0]
    la = pattern(2, 255, 4).astype(np.uint8)
    save("rgb8", lambda p: Image.fromarray(rgb, "RGB").save(p))
    save("rgba8", lambda p: Image.fromarray(rgba, "RGBA").save(p))
    save("gray8", lambda p: Image.fromarray(gray, "L").save(p))
    save("gray_alpha8", lambda p: Image.fromarray(la, "LA").save(p))
    save("gray1", lambda p: Image.fromarray(gray > 127).save(p))
    save("gray_trns8", lambda p: Image.fromarray(gray, "L").save(p, transparency=int(gray[2, 3])))

    def palette(path, bits):
        im = Image.fromarray(pattern(1, (1 << bits) - 1, 5).astype(np.uint8)[..., 0], "P")
        colours = pattern(3, 255, 6).reshape(-1)[: 3 * (1 << bits)]
        im.putpalette([int(v) for v in colours])
        alpha = bytes((i * 37) % 256 for i in range(1 << bits))
        im.save(path, bits=bits, transparency=alpha)

    save("palette8_trns", lambda p: palette(p, 8))
    save("palette4_trns", lambda p: palette(p, 4))

    def write(raw):
        return lambda p: open(p, "wb").write(raw)

    save("gray16", lambda p: Image.fromarray(pattern(1, 65535, 7)[..., 0].astype(np.uint16),
                                             "I;16").save(p))
    save("rgb16", write(raw_png(pattern(3, 65535, 8), 2, 16, False)))
    save("rgba16", write(raw_png(pattern(4, 65535, 9), 6, 16, False)))
    save("gray_alpha16", write(raw_png(pattern(2, 65535, 10), 4, 16, False)))
    save("interlaced_rgb8", write(raw_png(pattern(3, 255, 11), 2, 8, True)))
    save("interlaced_rgba16", write(raw_png(pattern(4, 65535, 12), 6, 16, True)))
    save("interlaced_gray8", write(raw_png(pattern(1, 255, 13), 0, 8, True)))


if __name__ == "__main__":
    main()
