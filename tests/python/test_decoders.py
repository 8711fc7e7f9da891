"""decode_image over a folder mixing PNG and JPEG, and decode_jpeg with
`orientation: exif`, end to end from a spec, against PIL.

The main chains are decode + center_crop with a uint8 HWC output, so the
expected batch is exactly PIL's decode cropped the same way: PNG pixels must
be equal, JPEG pixels within one step (the same libjpeg-turbo decodes both;
ours may decode only the crop's region). One more chain resizes, so the
loader's DCT-scaled decode runs through the orientation too.

They run through the loader's dispatch of the plan's decode op (MakeDecoder).
Only `alpha: drop` runs end to end here: plans reject chains whose input has
2 or 4 channels (runtime/plan), so `alpha: keep` is covered by the decoder
unit tests (tests/runtime/decode) only."""

import os

import numpy as np
import pytest

import sluice
from conftest import FAST_TARGETS, dataset_files

CROP = 32

MIXED_SPEC = """\
sluice: 1
name: py_mixed_decode
source: {format: image_folder, path: "${DATA}"}
sampling: {order: shuffle, seed: 5, remainder: drop}
graph:
  - decode_image: {in: jpg, out: image, color: rgb, alpha: drop}
  - center_crop: {size: [%d, %d]}
batch: {size: 4, fields: {image: image, label: cls}}
output: {device: cpu, prefetch: 2, on_error: {policy: fail}}
""" % (CROP, CROP)

RESIZE = 16
EXIF_RESIZE_SPEC = """\
sluice: 1
name: py_exif_resize
source: {format: image_folder, path: "${DATA}"}
sampling: {order: shuffle, seed: 9, remainder: drop}
graph:
  - decode_jpeg: {in: jpg, out: image, color: rgb, orientation: exif}
  - resize: {size: %d, interpolation: bilinear, antialias: true}
  - center_crop: {size: [%d, %d]}
batch: {size: 4, fields: {image: image, label: cls}}
output: {device: cpu, prefetch: 2, on_error: {policy: fail}}
""" % (RESIZE, RESIZE, RESIZE)

EXIF_SPEC = """\
sluice: 1
name: py_exif
source: {format: image_folder, path: "${DATA}"}
sampling: {order: shuffle, seed: 7, remainder: drop}
graph:
  - decode_jpeg: {in: jpg, out: image, color: rgb, orientation: exif}
  - center_crop: {size: [%d, %d]}
batch: {size: 4, fields: {image: image, label: cls}}
output: {device: cpu, prefetch: 2, on_error: {policy: fail}}
""" % (CROP, CROP)


def picture(w, h, seed):
    """A smooth RGB picture with distinct corners (so turns and flips show)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    c = np.stack([xx / w * 220, yy / h * 200, (xx + 2 * yy) / (w + 2 * h) * 180 + 30], axis=-1)
    c += rng.normal(0, 6, size=c.shape)
    c[:6, :6] = (250, 10, 10)
    c[-6:, -6:] = (10, 10, 250)
    return Image.fromarray(np.clip(c, 0, 255).astype(np.uint8), "RGB")


def center_crop(a, size):
    h, w = a.shape[:2]
    top, left = int(round((h - size) / 2.0)), int(round((w - size) / 2.0))
    return a[top:top + size, left:left + size]


def collect(plan, n, shape, **knobs):
    out = np.zeros((n,) + shape, np.uint8)
    seen = np.zeros(n, bool)
    for b in plan.loader(threads=2, **knobs):
        a = np.asarray(b["image"])
        for slot, idx in enumerate(b["image"].sample_indices):
            out[idx] = a[slot]
            seen[idx] = True
    assert seen.all()
    return out


@pytest.fixture(scope="module")
def mixed_folder(tmp_root):
    """Two classes of PNGs (RGB, RGBA, palette with transparency, gray, gray +
    alpha) and JPEGs, all even-sized so the centre crop is unambiguous."""
    from PIL import Image

    root = os.path.join(tmp_root, "mixed")
    for i in range(16):
        d = os.path.join(root, "class_%d" % (i % 2))
        os.makedirs(d, exist_ok=True)
        im = picture(40 + 2 * (i % 5), 36 + 4 * (i % 3), i)
        kind = i % 8
        if kind == 0:
            im.save(os.path.join(d, "img_%02d.jpg" % i), quality=90)
        elif kind == 1:
            im.save(os.path.join(d, "img_%02d.JPEG" % i), quality=85)
        elif kind == 2:
            im.save(os.path.join(d, "img_%02d.png" % i))
        elif kind == 3:
            rgba = im.copy()
            rgba.putalpha(Image.fromarray((np.arange(im.width * im.height) % 251)
                                          .reshape(im.height, im.width).astype(np.uint8)))
            rgba.save(os.path.join(d, "img_%02d.PNG" % i))
        elif kind == 4:
            im.quantize(32).save(os.path.join(d, "img_%02d.png" % i), transparency=3)
        elif kind == 5:
            im.convert("L").save(os.path.join(d, "img_%02d.png" % i))
        elif kind == 6:
            im.convert("LA").save(os.path.join(d, "img_%02d.png" % i))
        else:
            im.save(os.path.join(d, "img_%02d.png" % i), optimize=True)
    return root


def test_decode_image_mixed_folder_matches_pil(tmp_root, mixed_folder):
    from PIL import Image

    out = os.path.join(tmp_root, "mixed.plan")
    sluice.compile(MIXED_SPEC, out, cpu_targets=FAST_TARGETS, cuda=False)
    plan = sluice.load(out, vars={"DATA": mixed_folder})
    files = dataset_files(mixed_folder)
    assert len(files) == 16
    ours = collect(plan, len(files), (CROP, CROP, 3))
    for idx, f in enumerate(files):
        want = center_crop(np.asarray(Image.open(f).convert("RGB")), CROP)
        diff = np.abs(ours[idx].astype(int) - want.astype(int)).max()
        if f.lower().endswith(".png"):
            assert diff == 0, (f, diff)
        else:
            assert diff <= 1, (f, diff)


@pytest.fixture(scope="module")
def exif_folder(tmp_root):
    """JPEGs with EXIF orientation 1..8 (twice each), 60 x 44 stored."""
    from PIL import Image

    root = os.path.join(tmp_root, "exif")
    for i in range(16):
        n = i % 8 + 1
        d = os.path.join(root, "class_%d" % (i // 8))
        os.makedirs(d, exist_ok=True)
        exif = Image.Exif()
        exif[0x0112] = n
        picture(60, 44, 100 + i).save(os.path.join(d, "img_%02d_o%d.jpg" % (i, n)), quality=90,
                                      exif=exif)
    return root


def test_decode_jpeg_exif_orientation_matches_pil(tmp_root, exif_folder):
    from PIL import Image, ImageOps

    out = os.path.join(tmp_root, "exif.plan")
    sluice.compile(EXIF_SPEC, out, cpu_targets=FAST_TARGETS, cuda=False)
    plan = sluice.load(out, vars={"DATA": exif_folder})
    files = dataset_files(exif_folder)
    ours = collect(plan, len(files), (CROP, CROP, 3))
    for idx, f in enumerate(files):
        turned = ImageOps.exif_transpose(Image.open(f)).convert("RGB")
        want = center_crop(np.asarray(turned), CROP)
        diff = np.abs(ours[idx].astype(int) - want.astype(int)).max()
        assert diff <= 1, (f, diff)
        # The orientation matters here (the test can fail): the stored image's
        # crop differs from the turned one for every tag but 1.
        stored = center_crop(np.asarray(Image.open(f).convert("RGB")), CROP)
        if not f.endswith("_o1.jpg"):
            assert np.abs(stored.astype(int) - want.astype(int)).max() > 20, f


def test_exif_orientation_with_resize_and_dct_scaling(tmp_root, exif_folder):
    """Resize after an oriented decode, with and without DCT-scaled decoding
    (scale 1/2 here: the 44-pixel side resizes to 16), against PIL's
    exif_transpose + resize (antialiased bilinear) + centre crop."""
    from PIL import Image, ImageOps

    out = os.path.join(tmp_root, "exif_resize.plan")
    sluice.compile(EXIF_RESIZE_SPEC, out, cpu_targets=FAST_TARGETS, cuda=False)
    plan = sluice.load(out, vars={"DATA": exif_folder})
    files = dataset_files(exif_folder)

    def pil(img):
        w, h = img.size
        size = (RESIZE, int(RESIZE * h / w)) if w <= h else (int(RESIZE * w / h), RESIZE)
        return center_crop(np.asarray(img.resize(size, Image.BILINEAR)), RESIZE).astype(float)

    want = [pil(ImageOps.exif_transpose(Image.open(f)).convert("RGB")) for f in files]
    stored = [pil(Image.open(f).convert("RGB")) for f in files]
    for dct in (False, True):
        ours = collect(plan, len(files), (RESIZE, RESIZE, 3), dct_scaling=dct)
        for idx, f in enumerate(files):
            err = np.abs(ours[idx] - want[idx]).mean()
            assert err < 2, (f, dct, err)  # measured: at most 0.15 (0.6 with DCT scaling)
            if not f.endswith("_o1.jpg"):
                assert np.abs(ours[idx] - stored[idx]).mean() > 3 * err, (f, dct)
