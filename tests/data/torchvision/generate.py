#!/usr/bin/python3
"""Generates the torchvision parity data for tests/compiler/codegen/torchvision_parity_test.cc.

Run once with Debian's python3 (torch 1.13, torchvision 0.14) from any directory:

    /usr/bin/python3 tests/data/torchvision/generate.py

It writes, next to this script, a few small deterministic uint8 HWC input images
(inputs/*.u8), torchvision's output for each case (expected/*.u8 or *.f32, raw
little-endian, in the Sluice chain's output layout) and manifest.json, which
lists per case: the Sluice op chain (op names and params as a spec would give
them), the input file and shape, the expected file, its dtype, layout and shape,
and the torchvision calls that produced it. The files are checked in; rerunning
the script must reproduce them byte for byte (everything is seeded and the
torchvision ops used are deterministic).

torchvision is run on uint8 CHW tensors (the tensor backend, not PIL):
F.resize / F.resized_crop with antialias=True (unless the case says otherwise),
F.center_crop, F.hflip / F.vflip, F.pad, F.rgb_to_grayscale, and
F.normalize(F.convert_image_dtype(x, float32)) for ToTensor + Normalize.
"""
import json
import os

import numpy as np
import torch
import torchvision
import torchvision.transforms.functional as F
from torchvision.transforms import InterpolationMode

HERE = os.path.dirname(os.path.abspath(__file__))
BIL = InterpolationMode.BILINEAR
BIC = InterpolationMode.BICUBIC
MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


def photo_like(h, w, seed, gray=False):
    """Smooth gradients + a few soft blobs + sharp edges + noise, uint8 HWC."""
    rng = np.random.RandomState(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.zeros((h, w, 3))
    for c in range(3):
        a, b = rng.uniform(-2.0, 2.0, size=2)
        img[..., c] = 128 + 60 * np.sin(a * x / w * np.pi + b * y / h * np.pi + c)
        for _ in range(3):
            cy, cx = rng.uniform(0, h), rng.uniform(0, w)
            r = rng.uniform(3, max(4, min(h, w) / 3))
            img[..., c] += rng.uniform(-80, 80) * np.exp(-((y - cy) ** 2 + (x - cx) ** 2) / r**2)
    # a hard-edged rectangle (ringing of bicubic, clamping)
    t, l = h // 4, w // 3
    img[t : t + h // 3, l : l + w // 4, :] = rng.choice([5.0, 250.0])
    img += rng.normal(0, 6, size=img.shape)
    img = np.clip(np.rint(img), 0, 255).astype(np.uint8)
    if gray:
        img = np.repeat(img[..., :1], 3, axis=2)
    return np.ascontiguousarray(img)


INPUTS = {
    "a_37x53": photo_like(37, 53, 1),
    "b_120x90": photo_like(120, 90, 2),
    "c_64x64": photo_like(64, 64, 3),
    "d_50x70_gray": photo_like(50, 70, 4, gray=True),
}


def chw(a):
    return torch.from_numpy(a).permute(2, 0, 1).contiguous()


def hwc(t):
    return t.permute(1, 2, 0).contiguous().numpy()


def short_side(h, w, s):
    # torchvision: shorter side s, longer side int(s * long / short)
    if h <= w:
        return s, int(s * w / h)
    return int(s * h / w), s


# Each case: (name, input, torchvision function on a CHW uint8 tensor, Sluice
# chain, output layout ("HWC" or "CHW"), description).
def cases():
    out = []

    def add(name, inp, fn, chain, layout, tv):
        out.append((name, inp, fn, chain, layout, tv))

    h, w = INPUTS["a_37x53"].shape[:2]
    sh, sw = short_side(h, w, 24)
    add("resize_short_bilinear_down", "a_37x53",
        lambda t: F.resize(t, [24], BIL, antialias=True),
        [{"op": "resize", "params": {"size": [24]}},
         {"op": "center_crop", "params": {"size": [sh, sw]}}],  # no-op: makes the shape static
        "HWC", "F.resize(x, [24], BILINEAR, antialias=True)")
    add("resize_exact_bilinear_down", "b_120x90",
        lambda t: F.resize(t, [45, 70], BIL, antialias=True),
        [{"op": "resize", "params": {"size": [45, 70]}}],
        "HWC", "F.resize(x, [45, 70], BILINEAR, antialias=True)")
    add("resize_exact_bilinear_up", "a_37x53",
        lambda t: F.resize(t, [50, 80], BIL, antialias=True),
        [{"op": "resize", "params": {"size": [50, 80]}}],
        "HWC", "F.resize(x, [50, 80], BILINEAR, antialias=True)")
    add("resize_exact_bicubic_down", "b_120x90",
        lambda t: F.resize(t, [45, 70], BIC, antialias=True),
        [{"op": "resize", "params": {"size": [45, 70], "interpolation": "bicubic"}}],
        "HWC", "F.resize(x, [45, 70], BICUBIC, antialias=True)")
    add("resize_exact_bicubic_up", "c_64x64",
        lambda t: F.resize(t, [100, 80], BIC, antialias=True),
        [{"op": "resize", "params": {"size": [100, 80], "interpolation": "bicubic"}}],
        "HWC", "F.resize(x, [100, 80], BICUBIC, antialias=True)")
    h, w = INPUTS["d_50x70_gray"].shape[:2]
    sh, sw = short_side(h, w, 32)
    add("resize_short_bicubic_gray", "d_50x70_gray",
        lambda t: F.resize(t, [32], BIC, antialias=True),
        [{"op": "resize", "params": {"size": [32], "interpolation": "bicubic"}},
         {"op": "center_crop", "params": {"size": [sh, sw]}}],
        "HWC", "F.resize(x, [32], BICUBIC, antialias=True)")
    add("resize_bilinear_no_antialias", "b_120x90",
        lambda t: F.resize(t, [30, 20], BIL, antialias=False),
        [{"op": "resize", "params": {"size": [30, 20], "antialias": False}}],
        "HWC", "F.resize(x, [30, 20], BILINEAR, antialias=False)")
    add("resize_bicubic_no_antialias_up", "c_64x64",
        lambda t: F.resize(t, [100, 80], BIC, antialias=False),
        [{"op": "resize", "params": {"size": [100, 80], "interpolation": "bicubic",
                                     "antialias": False}}],
        "HWC", "F.resize(x, [100, 80], BICUBIC, antialias=False)")
    add("resize_nearest_down", "b_120x90",
        lambda t: F.resize(t, [50, 40], InterpolationMode.NEAREST),
        [{"op": "resize", "params": {"size": [50, 40], "interpolation": "nearest",
                                     "antialias": False}}],
        "HWC", "F.resize(x, [50, 40], NEAREST)")
    add("center_crop", "b_120x90",
        lambda t: F.center_crop(t, [64, 48]),
        [{"op": "center_crop", "params": {"size": [64, 48]}}],
        "HWC", "F.center_crop(x, [64, 48])")
    add("center_crop_larger_pads", "a_37x53",
        lambda t: F.center_crop(t, [48, 60]),
        [{"op": "center_crop", "params": {"size": [48, 60]}}],
        "HWC", "F.center_crop(x, [48, 60])  (image 37x53: zero padding)")
    add("resized_crop_bilinear", "b_120x90",
        lambda t: F.resized_crop(t, 10, 7, 80, 60, [32, 32], BIL, antialias=True),
        [{"op": "crop", "params": {"top": 10, "left": 7, "height": 80, "width": 60}},
         {"op": "resize", "params": {"size": [32, 32]}}],
        "HWC", "F.resized_crop(x, 10, 7, 80, 60, [32, 32], BILINEAR, antialias=True)")
    add("resized_crop_bicubic_up", "c_64x64",
        lambda t: F.resized_crop(t, 5, 20, 40, 30, [56, 56], BIC, antialias=True),
        [{"op": "crop", "params": {"top": 5, "left": 20, "height": 40, "width": 30}},
         {"op": "resize", "params": {"size": [56, 56], "interpolation": "bicubic"}}],
        "HWC", "F.resized_crop(x, 5, 20, 40, 30, [56, 56], BICUBIC, antialias=True)")
    add("hflip_resize", "b_120x90",
        lambda t: F.resize(F.hflip(t), [40, 30], BIL, antialias=True),
        [{"op": "random_flip", "params": {"horizontal": 1.0, "vertical": 0.0}},
         {"op": "resize", "params": {"size": [40, 30]}}],
        "HWC", "F.resize(F.hflip(x), [40, 30], BILINEAR, antialias=True)")
    add("vflip_center_crop", "c_64x64",
        lambda t: F.center_crop(F.vflip(t), [50, 40]),
        [{"op": "random_flip", "params": {"horizontal": 0.0, "vertical": 1.0}},
         {"op": "center_crop", "params": {"size": [50, 40]}}],
        "HWC", "F.center_crop(F.vflip(x), [50, 40])")
    h, w = INPUTS["a_37x53"].shape[:2]
    add("pad_constant", "a_37x53",
        lambda t: F.pad(t, [2, 3, 4, 1], fill=17, padding_mode="constant"),
        [{"op": "pad", "params": {"padding": [2, 3, 4, 1], "fill": 17}},
         # an identity resize makes the shape static (a crop would add a zero
         # fill, which CheckFusable refuses next to pad's fill 17)
         {"op": "resize", "params": {"size": [h + 4, w + 6]}}],
        "HWC", "F.pad(x, [2, 3, 4, 1], fill=17)  (left, top, right, bottom)")
    add("eval_normalize_chw", "b_120x90",
        lambda t: F.normalize(F.convert_image_dtype(
            F.center_crop(F.resize(t, [48], BIL, antialias=True), [40, 40]), torch.float32),
            MEAN, STD),
        [{"op": "resize", "params": {"size": [48]}},
         {"op": "center_crop", "params": {"size": [40, 40]}},
         {"op": "normalize", "params": {"mean": MEAN, "std": STD, "scale": 255.0}},
         {"op": "layout", "params": {"to": "CHW"}},
         {"op": "cast", "params": {"dtype": "float32"}}],
        "CHW", "F.normalize(F.convert_image_dtype(F.center_crop(F.resize(x, [48], BILINEAR, "
               "antialias=True), [40, 40]), float32), imagenet mean, std)")
    add("grayscale", "c_64x64",
        lambda t: F.rgb_to_grayscale(F.center_crop(t, [60, 60]), num_output_channels=3),
        [{"op": "center_crop", "params": {"size": [60, 60]}},
         {"op": "grayscale", "params": {"num_output_channels": 3}}],
        "HWC", "F.rgb_to_grayscale(F.center_crop(x, [60, 60]), num_output_channels=3)")
    add("resize_grayscale", "a_37x53",
        lambda t: F.rgb_to_grayscale(F.resize(t, [30, 40], BIL, antialias=True), 1),
        [{"op": "resize", "params": {"size": [30, 40]}},
         {"op": "grayscale", "params": {"num_output_channels": 1}}],
        "HWC", "F.rgb_to_grayscale(F.resize(x, [30, 40], BILINEAR, antialias=True), 1)")
    return out


def main():
    torch.manual_seed(0)
    os.makedirs(os.path.join(HERE, "inputs"), exist_ok=True)
    os.makedirs(os.path.join(HERE, "expected"), exist_ok=True)
    manifest = {
        "generator": "tests/data/torchvision/generate.py",
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "inputs": {},
        "cases": [],
    }
    for name, arr in INPUTS.items():
        path = f"inputs/{name}.u8"
        arr.tofile(os.path.join(HERE, path))
        manifest["inputs"][name] = {"file": path, "shape": list(arr.shape), "dtype": "uint8",
                                    "layout": "HWC"}
    for name, inp, fn, chain, layout, tv in cases():
        res = fn(chw(INPUTS[inp]))
        if res.dtype == torch.uint8:
            dtype, ext = "uint8", "u8"
        else:
            dtype, ext = "float32", "f32"
            res = res.to(torch.float32)
        arr = hwc(res) if layout == "HWC" else res.contiguous().numpy()
        if dtype == "float32":
            arr = arr.astype("<f4")
        path = f"expected/{name}.{ext}"
        np.ascontiguousarray(arr).tofile(os.path.join(HERE, path))
        manifest["cases"].append({"name": name, "input": inp, "torchvision": tv, "chain": chain,
                                  "expected": path, "dtype": dtype, "layout": layout,
                                  "shape": list(arr.shape)})
    with open(os.path.join(HERE, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
