"""A spec not in fusion normal form (color_jitter before the crop) compiles,
loads and yields batches: the field runs on the reference implementations,
and the loader says so once."""

import json
import os

import numpy as np

import sluice
from conftest import FAST_TARGETS

JITTER_FIRST_SPEC = """\
sluice: 1
name: py_jitter_first
source: {format: image_folder, path: "${DATA}"}
sampling: {order: shuffle, seed: 4, remainder: drop}
graph:
  - decode_jpeg: {in: jpg, out: image, color: rgb}
  - color_jitter: {brightness: 0.4, contrast: 0.4, saturation: 0.4}
  - random_resized_crop: {size: [20, 20], scale: [0.2, 1.0]}
  - normalize: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225], scale: 255}
  - layout: {to: CHW}
  - cast: {dtype: float16}
batch: {size: 8, fields: {image: image, label: cls}}
output: {device: cpu, prefetch: 2, on_error: {policy: fail}}
"""


def test_unfused_spec_loads_and_yields_batches(tmp_root, dataset):
    out = os.path.join(tmp_root, "jitter_first.plan")
    sluice.compile(JITTER_FIRST_SPEC, out, cpu_targets=FAST_TARGETS, cuda=False)
    with open(os.path.join(out, "report.txt")) as f:
        assert "batch field `image` runs per sample on the reference implementations" in f.read()
    with open(os.path.join(out, "plan.json")) as f:
        written = json.load(f)
    assert written["fusion_groups"] == []  # nothing fused
    assert [r["batch_field"] for r in written["reference_chains"]] == ["image"]
    plan = sluice.load(out, vars={"DATA": dataset})
    assert plan.fused_fields == []
    assert list(plan.reference_fields) == ["image"]
    assert "color_jitter" in plan.reference_fields["image"]
    loader = plan.loader(threads=2)
    batches = []
    for i, b in enumerate(loader):
        img = np.asarray(b["image"])
        assert img.dtype == np.float16 and img.shape == (8, 3, 20, 20)
        assert np.isfinite(img.astype(np.float32)).all()
        assert img.std() > 0.05  # normalized pixels, not zeros
        assert np.asarray(b["label"]).shape == (8,)
        batches.append(img.copy())
        if i == 2:
            break
    assert len(batches) == 3
    warnings = loader.stats()["warnings"]
    assert len(warnings) == 1
    assert "batch field `image` is not fused" in warnings[0]
    assert "reference implementations" in warnings[0]
    # Deterministic: a second loader gives the same first batch.
    again = np.asarray(next(iter(plan.loader(threads=1)))["image"])
    assert np.array_equal(again, batches[0])
