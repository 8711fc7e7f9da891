"""sluice.compile(spec, out, profile=..., cpu_budget=...): the hardware profile
reaches the cost model and the placement pass (docs/cost_model.md)."""

import json
import os

import pytest

import sluice
from conftest import FAST_TARGETS, TRAIN_SPEC

CPU = """\
format_version: 1
machine: "synthetic 2-core CPU"
measured_at: "2026-11-21T22:00:00Z"
sluice_version: "0.1.0"
cpu:
  cores: 2
  model: "synthetic"
  simd: sse41
  decode_mpix_per_s: 100.0
  decode_fixed_s: 0.00005
  resample_ns_per_px: 5.0
  pointwise_ns_per_elem: 0.5
  memory_bandwidth_gbps: 10.0
"""

# The fast-GPU machine's CPU has a very costly pointwise tail (400 ns per
# element: the images are 24x24 but decode is costed at ImageNet size),
# so that moving the tail clears the margin a split must win by (placement.cc).
FAST_GPU = CPU.replace('machine: "synthetic 2-core CPU"',
                       'machine: "synthetic 2-core CPU + fast GPU"').replace(
                           "pointwise_ns_per_elem: 0.5", "pointwise_ns_per_elem: 400.0") + """\
gpu:
  name: "synthetic"
  device: 0
  h2d_pinned_gbps: 24.0
  h2d_pageable_gbps: 9.0
  pointwise_gelem_per_s: 300.0
  launch_s: 0.00001
"""

AUTO_SPEC = TRAIN_SPEC.replace("device: cpu", "device: auto")


def _compile(tmp_path, name, profile_text, spec=AUTO_SPEC, **kw):
    hw = tmp_path / (name + ".yaml")
    hw.write_text(profile_text)
    out = tmp_path / (name + ".plan")
    plan = sluice.compile(spec, str(out), profile=str(hw), cpu_targets=FAST_TARGETS,
                          cuda=False, **kw)
    with open(os.path.join(str(out), "plan.json")) as f:
        doc = json.load(f)
    with open(os.path.join(str(out), "report.txt")) as f:
        report = f.read()
    return plan, doc, report


def test_cpu_profile_predicts_and_keeps_the_cpu(tmp_path, dataset):
    plan, doc, report = _compile(tmp_path, "cpu", CPU)
    placement = doc["placement"]
    assert placement["device"] == "cpu"
    assert "has no GPU" in placement["reason"]
    assert placement["cpu_budget"] == 2  # the profile's cores
    assert placement["profile"] == "synthetic 2-core CPU"
    assert placement["predicted"]["limit"] == "cpu"
    assert placement["predicted"]["images_per_second"] > 0
    assert "alternatives considered" in report
    # The plan still runs.
    loader = sluice.load(str(tmp_path / "cpu.plan"), vars={"DATA": dataset}).loader(threads=1)
    batch = next(iter(loader))
    assert batch["image"].shape == (16, 3, 24, 24)


def test_fast_gpu_and_one_core_choose_the_split(tmp_path):
    _, doc, report = _compile(tmp_path, "gpu", FAST_GPU, cpu_budget=1)
    placement = doc["placement"]
    assert placement["cpu_budget"] == 1
    assert placement["cpu_budget_from"] == "--cpu-budget"
    alts = placement["alternatives"]
    assert [a["name"] for a in alts][0] == "all on cpu"
    chosen = [a for a in alts if a["chosen"]]
    assert len(chosen) == 1 and chosen[0]["gpu_from"] == [2]
    assert chosen[0]["h2d_bytes_per_sample"] == 24 * 24 * 3  # uint8 staging
    assert chosen[0]["images_per_second"] > alts[0]["images_per_second"]
    # Compiled with cuda=False: the split cannot run, so the plan says cpu and why.
    assert placement["device"] == "cpu"
    assert "CUDA kernels were not built" in placement["reason"]
    assert doc["fusion_groups"][0]["gpu_from"] == -1
    assert "<- chosen" in report


def test_cpu_budget_is_validated(tmp_path):
    with pytest.raises(sluice.InvalidArgumentError, match="cpu_budget"):
        _compile(tmp_path, "bad", CPU, cpu_budget=0)


def test_malformed_profile_is_an_error(tmp_path):
    with pytest.raises(sluice.SluiceError):
        _compile(tmp_path, "broken", "format_version: 1\ncpu: [\n")
