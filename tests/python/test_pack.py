"""sluice.pack from Python, read back by the tar_shards source and by other
tools (Python's tarfile and the webdataset package)."""

import hashlib
import io
import json
import os
import tarfile

import numpy as np
import pytest

import sluice

from conftest import (EVAL_SPEC, FAST_TARGETS, NUM_IMAGES, TRAIN_SPEC, dataset_files,
                      require_module)


def labelled_files(root):
    """(path, label) in image_folder's order: label = the class folder's rank."""
    classes = sorted(os.listdir(root))
    return [(p, classes.index(os.path.basename(os.path.dirname(p)))) for p in dataset_files(root)]


def same_pixels(a, b):
    """PIL decodes both JPEG byte strings to the same pixels (pack stores JPEGs
    re-encoded losslessly with restart markers: other bytes, same image)."""
    from PIL import Image
    return np.array_equal(np.asarray(Image.open(io.BytesIO(a)).convert("RGB")),
                          np.asarray(Image.open(io.BytesIO(b)).convert("RGB")))


def take(loader, n):
    it = iter(loader)
    return [{k: np.array(v) for k, v in next(it).items()} for _ in range(n)]  # copies

SHARDS_SPEC = EVAL_SPEC.replace("name: py_eval", "name: py_eval_shards").replace(
    'source: {format: image_folder, path: "${DATA}"}',
    'source: {format: tar_shards, path: "${SHARDS}"}')


@pytest.fixture(scope="module")
def packed(tmp_root, dataset):
    out = os.path.join(tmp_root, "packed")
    info = sluice.pack(dataset, out, shard_size="64k", threads=2)
    return out, info


def test_pack_summary_and_manifest(packed, dataset):
    out, info = packed
    assert info["samples"] == NUM_IMAGES
    assert info["skipped"] == 0
    assert len(info["shards"]) > 1
    with open(os.path.join(out, info["manifest"])) as f:
        manifest = json.load(f)
    assert manifest["samples"] == NUM_IMAGES
    assert manifest["class_names"] == ["class_0", "class_1", "class_2"]
    assert sum(s["samples"] for s in manifest["shards"]) == NUM_IMAGES
    for s in manifest["shards"]:
        with open(os.path.join(out, s["name"]), "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == s["sha256"]


def test_python_tarfile_reads_the_members(packed, dataset):
    out, info = packed
    files = labelled_files(dataset)
    seen = 0
    for name in info["shards"]:
        with tarfile.open(os.path.join(out, name)) as tar:
            for member in tar.getmembers():
                key, ext = member.name.split(".", 1)
                i = int(key)
                data = tar.extractfile(member).read()
                if ext == "jpg":
                    with open(files[i][0], "rb") as f:
                        assert same_pixels(data, f.read())
                    seen += 1
                elif ext == "cls":
                    assert int(data) == files[i][1]
                elif ext == "json":
                    assert json.loads(data)["label"] == files[i][1]
    assert seen == NUM_IMAGES


def test_webdataset_reads_the_shards(packed, dataset):
    webdataset = require_module("webdataset")
    out, info = packed
    files = labelled_files(dataset)
    urls = [os.path.join(out, name) for name in info["shards"]]
    count = 0
    for sample in webdataset.WebDataset(urls, shardshuffle=False):
        i = int(sample["__key__"])
        assert int(sample["cls"]) == files[i][1]
        with open(files[i][0], "rb") as f:
            assert same_pixels(sample["jpg"], f.read())
        count += 1
    assert count == NUM_IMAGES


def test_pack_can_keep_the_jpeg_bytes(tmp_root, dataset):
    """restart_markers=False stores the source's bytes; the default re-encodes
    them (other bytes, the same pixels) and says so in the manifest."""
    files = labelled_files(dataset)
    for restart in (False, True):
        out = os.path.join(tmp_root, f"packed_restart_{restart}")
        info = sluice.pack(dataset, out, shard_size="1MB", threads=1, restart_markers=restart)
        with open(os.path.join(out, info["manifest"])) as f:
            assert json.load(f)["options"]["restart_markers"] is restart
        with tarfile.open(os.path.join(out, info["shards"][0])) as tar:
            data = tar.extractfile("000000000.jpg").read()
        with open(files[0][0], "rb") as f:
            original = f.read()
        assert (data == original) is (not restart)
        assert same_pixels(data, original)


def test_shards_give_the_folders_batches(packed, dataset, tmp_root, eval_plan):
    """pack keeps the source's order, so the same seed gives the same batches."""
    out, _ = packed
    plan_dir = os.path.join(tmp_root, "eval_shards.plan")
    sluice.compile(SHARDS_SPEC, plan_dir, cpu_targets=FAST_TARGETS, cuda=False)
    shards_plan = sluice.load(plan_dir, vars={"SHARDS": out})
    folder = take(eval_plan.loader(threads=2), NUM_IMAGES // 8)
    shards = take(shards_plan.loader(threads=2), NUM_IMAGES // 8)
    for a, b in zip(folder, shards):
        np.testing.assert_array_equal(a["label"], b["label"])
        np.testing.assert_array_equal(a["image"], b["image"])


def test_random_crops_of_restart_marked_shards_equal_the_folders(packed, tmp_root, train_plan):
    """PIL's JPEGs, packed with restart markers: the decoder splices each random
    crop out of the restart tiles, and every batch is the folder's, bit for bit."""
    out, _ = packed
    spec = TRAIN_SPEC.replace("name: py_train", "name: py_train_shards").replace(
        'source: {format: image_folder, path: "${DATA}"}',
        'source: {format: tar_shards, path: "${SHARDS}"}')
    assert "tar_shards" in spec
    plan_dir = os.path.join(tmp_root, "train_shards.plan")
    sluice.compile(spec, plan_dir, cpu_targets=FAST_TARGETS, cuda=False)
    shards_plan = sluice.load(plan_dir, vars={"SHARDS": out})
    folder = take(train_plan.loader(threads=2), NUM_IMAGES // 16)  # batches of 16
    shards = take(shards_plan.loader(threads=2), NUM_IMAGES // 16)
    for a, b in zip(folder, shards):
        np.testing.assert_array_equal(a["label"], b["label"])
        np.testing.assert_array_equal(a["image"], b["image"])


def test_pack_errors_are_raised(tmp_root, dataset):
    with pytest.raises(sluice.InvalidArgumentError, match="not empty"):
        sluice.pack(dataset, dataset)
    with pytest.raises(sluice.InvalidArgumentError, match="not a size"):
        sluice.pack(dataset, os.path.join(tmp_root, "never"), shard_size="lots")


def test_pack_spec_error_carries_file_line_col(tmp_root):
    # Like sluice.compile: each mistake with its position, the first one's
    # in the exception's fields, and no position-less "error: ..." text.
    spec = os.path.join(tmp_root, "bad_pack.yaml")
    with open(spec, "w") as f:
        f.write("sluice: 1\nname: bad_pack\n"
                "source: {format: image_folder, path: /nowhere, bogus: 3}\n"
                "graph:\n  - decode_jpeg: {in: jpg, out: image}\n"
                "  - random_resize_crop: {size: [8, 8]}\n"
                "batch: {size: 2, fields: {image: image, label: cls}}\n")
    with pytest.raises(sluice.SpecError) as info:
        sluice.pack(spec, os.path.join(tmp_root, "never_packed"))
    e = info.value
    assert (e.file, e.line, e.column) == (spec, 3, 48), (e.file, e.line, e.column)
    assert e.message == "unknown parameter `bogus` in `source`"
    assert e.hint
    assert [(d.line, d.column) for d in e.diagnostics] == [(3, 48), (6, 5)]
    text = str(e)
    assert text.startswith(spec + ":3:48: error: unknown parameter"), text
    assert spec + ":6:5: error: unknown op `random_resize_crop`" in text


def test_pack_keeps_a_name_that_is_not_utf8(tmp_root, dataset):
    # JSON must be UTF-8: the metadata's path shows U+FFFD for the bad byte
    # (docs/datasets.md), and pack neither aborts nor drops the sample.
    src = os.path.join(tmp_root, "latin1_src")
    os.makedirs(os.path.join(src, "cat"))
    image = dataset_files(dataset)[0]
    for name in (b"caf\xe9.jpg", b"ok.jpg"):
        with open(image, "rb") as f, open(os.path.join(os.fsencode(src), b"cat", name), "wb") as g:
            g.write(f.read())
    out = os.path.join(tmp_root, "latin1_out")
    info = sluice.pack(src, out, threads=1)
    assert info["samples"] == 2
    with tarfile.open(os.path.join(out, "shard-000000.tar")) as tar:
        paths = [json.loads(tar.extractfile(m).read())["path"]
                 for m in tar.getmembers() if m.name.endswith(".json")]
    assert sorted(paths) == ["cat/caf\ufffd.jpg", "cat/ok.jpg"]
