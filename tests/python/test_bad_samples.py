"""Exact bad-sample accounting from Python: stats() counts distinct bad
samples apart from bad reads, and loader.bad_samples(epoch) names each
corrupted file once per epoch with its reason (docs/reliability.md)."""

import os
import shutil

import pytest

import sluice
from conftest import dataset_files


def _corrupted_copy(dataset, root):
    """48 of the suite's JPEGs under root/class_0, 3 corrupted; returns the
    sorted paths and the corrupted ones."""
    os.makedirs(os.path.join(root, "class_0"))
    paths = []
    for i, src in enumerate(dataset_files(dataset)[:48]):
        dst = os.path.join(root, "class_0", "img_%03d.jpg" % i)
        shutil.copyfile(src, dst)
        paths.append(dst)
    bad = [paths[5], paths[20], paths[33]]
    with open(bad[0], "r+b") as f:  # truncated
        f.truncate(120)
    open(bad[1], "wb").close()  # empty
    with open(bad[2], "w") as f:  # text
        f.write("not an image\n")
    return paths, bad


def test_bad_samples_are_counted_once_per_epoch(tmp_path, dataset, train_plan_dir):
    paths, bad = _corrupted_copy(dataset, str(tmp_path / "data"))
    # The train plan skips bad samples (max_fraction 0.1); 48 / 16: no remainder.
    plan = sluice.load(train_plan_dir, vars={"DATA": str(tmp_path / "data")})
    loader = plan.loader(threads=2)
    for epoch in (0, 1):
        assert sum(1 for _ in loader) == 3
        listed = loader.bad_samples(epoch)
        assert [b["name"] for b in listed] == bad
        assert [b["sample"] for b in listed] == [paths.index(p) for p in bad]
        for b in listed:
            assert b["epoch"] == epoch
            assert b["reason"] and b["name"] not in b["reason"]
    stats = loader.stats()
    assert stats["bad_samples"] == 6  # 3 distinct per epoch
    assert stats["bad_reads"] >= 6
    assert stats["skipped"] == stats["bad_reads"]
    assert loader.bad_samples(1)  # the epoch before the current one (2)
    with pytest.raises(sluice.InvalidArgumentError):
        loader.bad_samples(0)


def test_names_that_are_not_utf8_are_escaped_not_raised(tmp_path, dataset, train_plan_dir):
    # Older datasets hold Latin-1 file names; a bad one must not turn stats()
    # or bad_samples() into a UnicodeDecodeError (docs/python.md).
    root = tmp_path / "data"
    paths, bad = _corrupted_copy(dataset, str(root))
    latin1 = os.path.join(os.fsencode(str(root)), b"class_0", b"img_020_caf\xe9.jpg")
    os.rename(os.fsencode(bad[1]), latin1)  # the empty file, now sorted after img_020
    plan = sluice.load(train_plan_dir, vars={"DATA": str(root)})
    loader = plan.loader(threads=2)
    assert sum(1 for _ in loader) == 3
    names = [b["name"] for b in loader.bad_samples(0)]
    assert names[1].endswith("img_020_caf\\xe9.jpg")
    last_bad = [name for name, _ in loader.stats()["last_bad"]]
    assert any(name.endswith("caf\\xe9.jpg") for name in last_bad)
