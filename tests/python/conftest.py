"""Fixtures for the Python suite: a generated JPEG image_folder data set and
plans compiled once per session (one CPU target, no CUDA: fast Halide builds).

Run by ctest (label `python`) as
    PYTHONPATH=BUILD/python /usr/bin/python3 -m pytest tests/python -q
(python/CMakeLists.txt); `import sluice` must find the built package."""

import os
import random
import shutil
import tempfile

import numpy as np
import pytest

import sluice

HERE = os.path.dirname(os.path.abspath(__file__))
# One SSE4.1 target keeps each compile short; every x86-64 CPU runs it.
FAST_TARGETS = ["x86-64-linux-sse41"]

# The eval chain (deterministic: Resize shorter side / CenterCrop / Normalize),
# shuffled order so resume tests are meaningful. Matches torchvision's
# Resize(40) / CenterCrop(32) / ToTensor / Normalize.
EVAL_SPEC = """\
sluice: 1
name: py_eval
source: {format: image_folder, path: "${DATA}"}
sampling: {order: shuffle, seed: 3, remainder: drop}
graph:
  - decode_jpeg: {in: jpg, out: image, color: rgb}
  - resize: {size: 40, interpolation: bilinear, antialias: true}
  - center_crop: {size: [32, 32]}
  - normalize: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225], scale: 255}
  - layout: {to: CHW}
  - cast: {dtype: float32}
batch: {size: 8, fields: {image: image, label: cls}}
output: {device: cpu, prefetch: 2, on_error: {policy: fail}}
"""

# A training chain with random ops and a float16 output.
TRAIN_SPEC = """\
sluice: 1
name: py_train
source: {format: image_folder, path: "${DATA}"}
sampling: {order: shuffle, seed: 11, remainder: drop}
graph:
  - decode_jpeg: {in: jpg, out: image, color: rgb}
  - random_resized_crop: {size: [24, 24], scale: [0.08, 1.0], ratio: [0.75, 1.3333]}
  - random_flip: {horizontal: 0.5}
  - normalize: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225], scale: 255}
  - layout: {to: CHW}
  - cast: {dtype: float16}
batch: {size: 16, fields: {image: image, label: cls}}
output: {device: cpu, prefetch: 2, on_error: {policy: skip, max_fraction: 0.1}}
"""

# The eval chain with a bfloat16 output (numpy has no bfloat16; DLPack does).
BF16_SPEC = EVAL_SPEC.replace("name: py_eval", "name: py_eval_bf16").replace(
    "cast: {dtype: float32}", "cast: {dtype: bfloat16}")

NUM_IMAGES = 240
NUM_CLASSES = 3


def make_image(i, rng):
    """A photo-like RGB image (gradients, a soft blob, noise), 48..120 px."""
    from PIL import Image

    w = 48 + (i * 37) % 73
    h = 48 + (i * 53) % 73
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    c = np.stack(
        [
            xx / w * 200 + 30 * (i % 3),
            yy / h * 180 + 20 * ((i // 3) % 4),
            (xx + yy) / (w + h) * 160 + 40,
        ],
        axis=-1,
    )
    cx, cy, r = rng.uniform(0, w), rng.uniform(0, h), rng.uniform(8, 30)
    blob = np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / (2 * r * r))[..., None]
    c = c * (1 - 0.6 * blob) + 255 * 0.6 * blob * np.array([rng.random(), rng.random(), rng.random()])
    c += rng.normal(0, 8, size=c.shape)
    return Image.fromarray(np.clip(c, 0, 255).astype(np.uint8), "RGB")


@pytest.fixture(scope="session")
def tmp_root():
    d = tempfile.mkdtemp(prefix="sluice_pytest_")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def dataset(tmp_root):
    """NUM_IMAGES JPEGs in NUM_CLASSES class folders; returns the root."""
    root = os.path.join(tmp_root, "data")
    rng = np.random.default_rng(1234)
    for i in range(NUM_IMAGES):
        d = os.path.join(root, "class_%d" % (i % NUM_CLASSES))
        os.makedirs(d, exist_ok=True)
        make_image(i, rng).save(os.path.join(d, "img_%04d.jpg" % i), quality=92)
    return root


@pytest.fixture(scope="session")
def eval_plan_dir(tmp_root):
    out = os.path.join(tmp_root, "eval.plan")
    sluice.compile(EVAL_SPEC, out, cpu_targets=FAST_TARGETS, cuda=False)
    return out


@pytest.fixture(scope="session")
def train_plan_dir(tmp_root):
    out = os.path.join(tmp_root, "train.plan")
    sluice.compile(TRAIN_SPEC, out, cpu_targets=FAST_TARGETS, cuda=False)
    return out


@pytest.fixture(scope="session")
def bf16_plan(tmp_root, dataset):
    out = os.path.join(tmp_root, "bf16.plan")
    sluice.compile(BF16_SPEC, out, cpu_targets=FAST_TARGETS, cuda=False)
    return sluice.load(out, vars={"DATA": dataset})


@pytest.fixture(scope="session")
def eval_plan(eval_plan_dir, dataset):
    return sluice.load(eval_plan_dir, vars={"DATA": dataset})


@pytest.fixture(scope="session")
def train_plan(train_plan_dir, dataset):
    return sluice.load(train_plan_dir, vars={"DATA": dataset})


def require_module(name):
    """Imports a test-only package that scripts/install_deps.sh installs:
    under CI (CI set) a missing one fails the test; elsewhere it skips."""
    if os.environ.get("CI"):
        import importlib
        return importlib.import_module(name)
    return pytest.importorskip(name)


def dataset_files(root):
    """image_folder's order: class folders sorted, files sorted within."""
    files = []
    for cls in sorted(os.listdir(root)):
        for f in sorted(os.listdir(os.path.join(root, cls))):
            files.append(os.path.join(root, cls, f))
    return files
