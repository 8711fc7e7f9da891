"""Device tensors (issue 7, docs/gpu.md, docs/python.md "Device tensors").

A plan whose placement put the normalize/layout/cast tail on the GPU (compiled
with a synthetic fast-GPU profile and a 1-core budget, CUDA kernels built):
- without a CUDA device (CI): plan.loader() falls back to the CPU with a
  warning in stats()["warnings"], the tensors are host tensors equal to an
  all-CPU plan's; device="cuda" raises UnsupportedError;
- with one (torch.cuda.is_available()): fields are CUDA tensors,
  torch.from_dlpack gives a CUDA tensor at the same device pointer, values equal
  to the CPU path's, and the DLPack stream protocol (wait_for_device=False)
  orders the consumer's stream after the batch's device work.
"""

import json
import os

import numpy as np
import pytest

import sluice
from conftest import FAST_TARGETS, TRAIN_SPEC

# A 2-core CPU and a fast GPU: with cpu_budget=1 the cost model moves the
# pointwise tail (normalize, layout, cast) to the GPU (tests/python/test_placement.py).
FAST_GPU_PROFILE = """\
format_version: 1
machine: "synthetic 2-core CPU + fast GPU"
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
gpu:
  name: "synthetic"
  device: 0
  h2d_pinned_gbps: 24.0
  h2d_pageable_gbps: 9.0
  pointwise_gelem_per_s: 300.0
  launch_s: 0.00001
"""

AUTO_SPEC = TRAIN_SPEC.replace("name: py_train", "name: py_train_gpu").replace(
    "device: cpu", "device: auto")


def _cuda_available():
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.fixture(scope="module")
def gpu_plan(tmp_root, dataset):
    """The train chain split at normalize: crop/flip on the CPU, the tail on the GPU."""
    hw = os.path.join(tmp_root, "fast_gpu.yaml")
    with open(hw, "w") as f:
        f.write(FAST_GPU_PROFILE)
    out = os.path.join(tmp_root, "train_gpu.plan")
    sluice.compile(AUTO_SPEC, out, profile=hw, cpu_budget=1, cpu_targets=FAST_TARGETS, cuda=True)
    with open(os.path.join(out, "plan.json")) as f:
        doc = json.load(f)
    if doc["placement"]["device"] != "cuda:0":
        # Halide without the NVPTX backend: no CUDA kernels, so no GPU stage.
        pytest.skip("no GPU stage compiled: " + doc["placement"]["reason"])
    assert doc["fusion_groups"][0]["gpu_from"] == 2  # normalize, layout, cast
    return sluice.load(out, vars={"DATA": dataset})


def _batches(loader, n):
    out = []
    for b in loader:
        out.append(b)
        if len(out) == n:
            break
    return out


# ---- no CUDA device (CI) ----------------------------------------------------------

needs_no_gpu = pytest.mark.skipif(_cuda_available(), reason="a CUDA device is present")


@needs_no_gpu
def test_gpu_plan_falls_back_to_cpu_with_a_warning(gpu_plan, train_plan):
    loader = gpu_plan.loader(threads=2)
    batches = _batches(loader, 3)
    stats = loader.stats()
    assert stats["device"] == "cpu"
    assert len(stats["warnings"]) >= 1
    assert any("CUDA" in w or "cuda" in w for w in stats["warnings"]), stats["warnings"]
    ref = _batches(train_plan.loader(threads=2), 3)
    for b, r in zip(batches, ref):
        img = b["image"]
        assert img.__dlpack_device__() == (1, 0)
        assert img.device == "cpu"
        assert b["label"].__dlpack_device__() == (1, 0)
        # The fallback runs the whole-chain CPU kernel: the all-CPU plan's batches.
        np.testing.assert_array_equal(np.asarray(img), np.asarray(r["image"]))
        np.testing.assert_array_equal(np.asarray(b["label"]), np.asarray(r["label"]))
        assert np.from_dlpack(img).__array_interface__["data"][0] == img.data_ptr


@needs_no_gpu
@pytest.mark.parametrize("device", ["cuda", "cuda:0", "cuda:3"])
def test_forced_cuda_without_a_device_is_a_clear_error(gpu_plan, device):
    with pytest.raises(sluice.UnsupportedError) as e:
        gpu_plan.loader(threads=1, device=device)
    assert "cuda" in str(e.value).lower()
    assert e.value.code == "unsupported"


def test_device_cpu_is_quiet(gpu_plan):
    loader = gpu_plan.loader(threads=2, device="cpu")
    b = next(iter(loader))
    assert b["image"].__dlpack_device__() == (1, 0)
    stats = loader.stats()
    assert stats["device"] == "cpu"
    assert stats["warnings"] == []


def test_cpu_plan_stats_have_device_and_no_warnings(train_plan):
    loader = train_plan.loader(threads=1)
    next(iter(loader))
    stats = loader.stats()
    assert stats["device"] == "cpu" and stats["warnings"] == []


def test_bad_device_string(gpu_plan):
    with pytest.raises(sluice.InvalidArgumentError, match="tpu"):
        gpu_plan.loader(threads=1, device="tpu")


def test_cpu_tensor_rejects_a_stream(train_plan):
    b = next(iter(train_plan.loader(threads=1)))
    with pytest.raises(sluice.InvalidArgumentError, match="stream"):
        b["image"].__dlpack__(stream=1)


# ---- with a CUDA device ----------------------------------------------------------

needs_gpu = pytest.mark.skipif(not _cuda_available(), reason="needs torch with a CUDA device")


@needs_gpu
def test_cuda_tensors_via_dlpack_equal_the_cpu_path(gpu_plan):
    import torch

    loader = gpu_plan.loader(threads=2)
    ref_loader = gpu_plan.loader(threads=2, device="cpu")
    n = 0
    # Lockstep: one batch of each alive at a time (the pools hold prefetch + 1).
    for b, r in zip(loader, ref_loader):
        img = b["image"]
        assert img.__dlpack_device__() == (2, 0)
        assert img.device == "cuda:0"
        t = torch.from_dlpack(img)
        assert t.is_cuda and t.device.index == 0
        assert t.data_ptr() == img.data_ptr  # no copy
        assert t.dtype == torch.float16 and tuple(t.shape) == img.shape
        with pytest.raises(sluice.UnsupportedError, match="device memory"):
            np.asarray(img)
        # Labels stay on the host.
        assert b["label"].__dlpack_device__() == (1, 0)
        want = torch.from_dlpack(r["image"]).float()
        torch.testing.assert_close(t.float().cpu(), want, rtol=1e-3, atol=2e-3)
        np.testing.assert_array_equal(np.asarray(b["label"]), np.asarray(r["label"]))
        del t
        n += 1
    assert n == loader.batches_per_epoch > 0
    stats = loader.stats()
    assert stats["device"] == "cuda:0", stats
    assert stats["warnings"] == []


@needs_gpu
def test_stream_protocol_without_host_wait(gpu_plan):
    import torch

    loader = gpu_plan.loader(threads=2, wait_for_device=False)
    ref_loader = gpu_plan.loader(threads=2, device="cpu")
    side = torch.cuda.Stream()
    n = 0
    for b, r in zip(loader, ref_loader):
        with torch.cuda.stream(side):
            # from_dlpack passes side.cuda_stream: that stream waits on the
            # batch's event (no host sync), so the copy below reads finished data.
            t = torch.from_dlpack(b["image"])
            got = t.float()
        side.synchronize()  # before the batch (and its device memory) is released
        torch.testing.assert_close(got.cpu(), torch.from_dlpack(r["image"]).float(),
                                   rtol=1e-3, atol=2e-3)
        del t, got
        n += 1
        if n == 6:
            break
    assert n == 6
    # The protocol's other handles: legacy (1) and per-thread (2) default
    # streams and -1 (no synchronization) are accepted; 0 is ambiguous.
    b = next(iter(loader))
    for s in (1, 2, -1):
        b["image"].__dlpack__(stream=s)
    with pytest.raises(sluice.InvalidArgumentError, match="ambiguous"):
        b["image"].__dlpack__(stream=0)
    torch.cuda.synchronize()


# ---- sluice.torch: device= reaches plan.loader ---------------------------------------

CUDA_SPEC = TRAIN_SPEC.replace("name: py_train", "name: py_train_cuda").replace(
    "device: cpu", "device: cuda")


@pytest.fixture(scope="module")
def cuda_output_plan(tmp_root, dataset):
    """output.device: cuda, compiled without CUDA kernels (no GPU stage): its
    loader warns that batches stay on the host unless device="cpu" is asked."""
    out = os.path.join(tmp_root, "train_cuda_out.plan")
    sluice.compile(CUDA_SPEC, out, cpu_targets=FAST_TARGETS, cuda=False)
    return sluice.load(out, vars={"DATA": dataset})


@pytest.mark.parametrize("as_torch_device", [False, True])
def test_torch_loader_device_cpu_reaches_plan_loader(cuda_output_plan, as_torch_device):
    torch = pytest.importorskip("torch")
    import sluice.torch

    assert cuda_output_plan.loader(threads=1).stats()["warnings"] != []  # follows the plan
    device = torch.device("cpu") if as_torch_device else "cpu"
    loader = sluice.torch.loader(cuda_output_plan, rank=0, world_size=1, device=device,
                                 threads=2)
    b = next(iter(loader))
    assert b["image"].device.type == "cpu" and b["label"].device.type == "cpu"
    stats = loader.stats()
    # device="cpu" is plan.loader's: the CPU path, asked for, so no warning.
    assert stats["device"] == "cpu"
    assert stats["warnings"] == []


@pytest.mark.parametrize("placement", ["cuda:0", "cpu"])
def test_torch_loader_passes_the_device_to_plan_loader(train_plan, monkeypatch, placement):
    torch = pytest.importorskip("torch")
    import sluice.torch

    seen = []
    real = train_plan.loader

    def spy(*args, **kwargs):
        seen.append(kwargs.get("device"))
        kwargs["device"] = "cpu"  # runs here without a GPU
        return real(*args, **kwargs)

    monkeypatch.setattr(train_plan, "loader", spy)
    # A plan whose placement put a stage on the GPU, on a machine with CUDA.
    monkeypatch.setattr(sluice.Plan, "placement_device", property(lambda self: placement))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    for device in ("cpu", torch.device("cpu"), torch.device("cuda", 0), "cuda:1", "cuda",
                   None):
        sluice.torch.loader(train_plan, rank=0, world_size=1, device=device, threads=1)
    if placement == "cuda:0":
        assert seen == ["cpu", "cpu", "cuda:0", "cuda:1", "cuda", None]
    else:
        # No GPU stage: cuda is torch's copy alone (the C++ loader would warn
        # that batches stay on the host).
        assert seen == ["cpu", "cpu", None, None, None, None]


@needs_gpu
def test_torch_loader_pins_host_tensors_only(gpu_plan):
    import torch
    import sluice.torch

    loader = sluice.torch.loader(gpu_plan, rank=0, world_size=1, pin_memory=True, threads=2)
    b = next(iter(loader))
    assert b["image"].is_cuda  # the GPU stage's output, not pinned
    assert b["label"].is_pinned()
    cpu = sluice.torch.loader(gpu_plan, rank=0, world_size=1, device="cpu", pin_memory=True,
                              threads=2)
    b = next(iter(cpu))
    assert not b["image"].is_cuda and b["image"].is_pinned()
    assert cpu.stats()["device"] == "cpu"
    torch.cuda.synchronize()
