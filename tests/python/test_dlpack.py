"""Zero-copy hand-off: numpy (array interface and DLPack) and torch (DLPack)."""

import numpy as np
import pytest

import sluice


def first_batch(plan):
    loader = plan.loader(threads=2)
    return loader, next(iter(loader))


def test_numpy_asarray_zero_copy(eval_plan):
    loader, b = first_batch(eval_plan)
    img = b["image"]
    a = np.asarray(img)
    assert a.__array_interface__["data"][0] == img.data_ptr
    assert a.dtype == np.float32 and a.shape == img.shape
    assert a.nbytes == img.nbytes
    lab = np.asarray(b["label"])
    assert lab.dtype == np.int64 and lab.__array_interface__["data"][0] == b["label"].data_ptr


def test_numpy_from_dlpack_zero_copy(eval_plan):
    loader, b = first_batch(eval_plan)
    img = b["image"]
    assert img.__dlpack_device__() == (1, 0)
    d = np.from_dlpack(img)
    assert d.__array_interface__["data"][0] == img.data_ptr
    np.testing.assert_array_equal(d, np.asarray(img))
    # Writes through one view are seen by the other: the same memory.
    np.asarray(img)[0, 0, 0, 0] = 12345.0
    assert d[0, 0, 0, 0] == 12345.0


def _numpy_reads_dlpack_1():
    major, minor = (int(x) for x in np.__version__.split(".")[:2])
    return (major, minor) >= (2, 1)


def test_views_are_writable(eval_plan):
    # The contract (docs/python.md, Lifetime): a batch's memory is the
    # caller's until its last view is gone, and writable through any view.
    loader, b = first_batch(eval_plan)
    a = np.asarray(b["image"])
    assert a.flags.writeable
    a[0, 0, 0, 0] = 7.0
    assert np.asarray(b["image"])[0, 0, 0, 0] == 7.0
    d = np.from_dlpack(b["label"])
    # numpy < 2.1 marks every pre-1.0 DLPack import read-only; numpy >= 2.1
    # asks for DLPack 1.0, whose flags say writable.
    assert d.flags.writeable == _numpy_reads_dlpack_1()
    torch = pytest.importorskip("torch")
    t = torch.from_dlpack(b["image"])
    t[0, 0, 0, 1] = 9.0
    assert a[0, 0, 0, 1] == 9.0


def _versioned_capsule(capsule):
    """(version, flags, data pointer) of a DLPack 1.0 capsule, read with ctypes."""
    import ctypes

    class Version(ctypes.Structure):
        _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]

    class Managed(ctypes.Structure):
        _fields_ = [("version", Version), ("manager_ctx", ctypes.c_void_p),
                    ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64),
                    ("data", ctypes.c_void_p)]  # dl_tensor.data, its first member

    api = ctypes.pythonapi
    api.PyCapsule_IsValid.restype = ctypes.c_int
    api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    if not api.PyCapsule_IsValid(capsule, b"dltensor_versioned"):
        return None
    m = Managed.from_address(api.PyCapsule_GetPointer(capsule, b"dltensor_versioned"))
    return (m.version.major, m.version.minor), m.flags, m.data


def test_dlpack_1_capsule_is_writable(eval_plan):
    loader, b = first_batch(eval_plan)
    img = b["image"]
    version, flags, data = _versioned_capsule(img.__dlpack__(max_version=(1, 0)))
    assert version == (1, 0)
    assert flags == 0  # neither read-only nor a copy
    assert data == img.data_ptr
    # Older consumers (no max_version, or one below 1.0) get the pre-1.0 capsule.
    assert _versioned_capsule(img.__dlpack__()) is None
    assert _versioned_capsule(img.__dlpack__(max_version=(0, 8))) is None
    assert _versioned_capsule(img.__dlpack__(stream=None, max_version=(1, 1), dl_device=(1, 0),
                                             copy=False)) is not None
    with pytest.raises(BufferError):
        img.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError):
        img.__dlpack__(copy=True)


def test_float16_to_numpy(train_plan):
    loader, b = first_batch(train_plan)
    img = b["image"]
    assert img.dtype == "float16"
    a = np.asarray(img)
    assert a.dtype == np.float16 and a.shape == (16, 3, 24, 24)
    assert np.isfinite(a.astype(np.float32)).all()
    np.testing.assert_array_equal(np.from_dlpack(img), a)


def test_unconsumed_capsule_is_freed(eval_plan):
    loader, b = first_batch(eval_plan)
    caps = b["image"].__dlpack__()
    assert type(caps).__name__ == "PyCapsule"
    del caps  # the capsule's destructor runs the DLPack deleter; no leak, no crash


def test_dlpack_stream_rejected_on_cpu(eval_plan):
    loader, b = first_batch(eval_plan)
    with pytest.raises(sluice.InvalidArgumentError):
        b["image"].__dlpack__(stream=1)


def test_torch_from_dlpack_zero_copy(eval_plan, train_plan):
    torch = pytest.importorskip("torch")
    loader, b = first_batch(eval_plan)
    img = b["image"]
    t = torch.from_dlpack(img)
    assert t.data_ptr() == img.data_ptr
    assert t.dtype == torch.float32 and tuple(t.shape) == img.shape
    assert torch.equal(t, torch.from_numpy(np.asarray(img)))
    lab = torch.from_dlpack(b["label"])
    assert lab.dtype == torch.int64 and lab.data_ptr() == b["label"].data_ptr
    loader2, b2 = first_batch(train_plan)
    h = torch.from_dlpack(b2["image"])
    assert h.dtype == torch.float16 and h.data_ptr() == b2["image"].data_ptr


def test_sluice_torch_loader(eval_plan, monkeypatch):
    torch = pytest.importorskip("torch")
    import sluice.torch as st

    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert st.distributed_rank_world() == (None, None)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert st.distributed_rank_world() == (1, 2)
    loader = st.loader(eval_plan, threads=2)
    n = 0
    for b in loader:
        assert isinstance(b["image"], torch.Tensor) and isinstance(b["label"], torch.Tensor)
        assert b["image"].shape == (8, 3, 32, 32) and b["image"].dtype == torch.float32
        assert b["label"].dtype == torch.int64
        n += 1
    assert n == len(loader) == 240 // 2 // 8  # rank 1 of 2 from the environment
    # Torch tensors alone keep their buffers: holding one across the epoch is fine.
    it = iter(loader)
    first = next(it)["image"]
    keep = first.clone()
    for b in it:
        pass
    assert torch.equal(first, keep)
    if not torch.cuda.is_available():
        with pytest.raises(sluice.UnsupportedError, match="pin_memory"):
            st.loader(eval_plan, pin_memory=True)


def test_bfloat16_numpy_error_torch_ok(bf16_plan, eval_plan):
    loader, b = first_batch(bf16_plan)
    img = b["image"]
    assert img.dtype == "bfloat16"
    with pytest.raises(sluice.UnsupportedError, match="numpy has no type") as info:
        np.asarray(img)
    assert "torch.from_dlpack" in str(info.value)  # the hint
    torch = pytest.importorskip("torch")
    t = torch.from_dlpack(img)
    assert t.dtype == torch.bfloat16 and t.data_ptr() == img.data_ptr
    # Same plan but float32: same samples (same seed), values within bfloat16 rounding.
    _, ref = first_batch(eval_plan)
    assert ref["image"].sample_indices == img.sample_indices
    want = torch.from_dlpack(ref["image"])
    assert torch.allclose(t.float(), want, rtol=2 ** -7, atol=1e-2)
