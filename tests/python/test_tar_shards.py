"""tar_shards end to end from Python: shards written by the `webdataset`
package's ShardWriter (JPEG and PNG samples, integer labels, a metadata
member) read through a compiled spec with `source: {format: tar_shards}`,
against PIL's decode of the same bytes.

The first load scans the shards and caches an index beside them; a second
load uses that index. A brace range selects a subset of the shards."""

import glob
import io
import os

import numpy as np
import pytest

import sluice
from conftest import FAST_TARGETS, require_module

wds = require_module("webdataset")

CROP = 32
NUM = 20
PER_SHARD = 7


def spec(path, source_extra="", order="sequential"):
    return ("sluice: 1\nname: py_tar_shards\n"
            "source: {format: tar_shards, path: \"%s\"%s}\n"
            "sampling: {order: %s, remainder: pad}\ngraph:\n"
            "  - decode_image: {in: jpg, out: image, color: rgb, alpha: drop}\n"
            "  - center_crop: {size: [%d, %d]}\n"
            "batch: {size: 4, fields: {image: image, label: cls}}\n"
            "output: {device: cpu, prefetch: 2, on_error: {policy: fail}}\n"
            % (path, source_extra, order, CROP, CROP))


def picture(i):
    from PIL import Image

    w, h = 40 + 2 * (i % 5), 36 + 4 * (i % 3)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    c = np.stack([xx / w * 220, yy / h * 200 + 3 * i, (xx + 2 * yy) / (w + 2 * h) * 180], -1)
    return Image.fromarray(np.clip(c, 0, 255).astype(np.uint8), "RGB")


@pytest.fixture(scope="module")
def shards(tmp_root):
    """NUM samples in shards of PER_SHARD written by webdataset.ShardWriter:
    even samples JPEG, odd ones PNG; label i % 4; a json member each."""
    root = os.path.join(tmp_root, "wds_shards")
    os.makedirs(root, exist_ok=True)
    encoded = []
    with wds.ShardWriter(os.path.join(root, "shard-%06d.tar"), maxcount=PER_SHARD,
                         verbose=0) as sink:
        for i in range(NUM):
            buf = io.BytesIO()
            ext = "jpg" if i % 2 == 0 else "png"
            picture(i).save(buf, format="JPEG" if ext == "jpg" else "PNG", quality=90)
            encoded.append((ext, buf.getvalue()))
            sink.write({"__key__": "sample%05d" % i, ext: buf.getvalue(), "cls": i % 4,
                        "json": {"i": i}})
    return root, encoded


def center_crop(a, size):
    h, w = a.shape[:2]
    top, left = int(round((h - size) / 2.0)), int(round((w - size) / 2.0))
    return a[top:top + size, left:left + size]


def read_all(plan, n):
    images = np.zeros((n, CROP, CROP, 3), np.uint8)
    labels = np.full(n, -1, np.int64)
    seen = np.zeros(n, bool)
    for b in plan.loader(threads=2):
        a = np.asarray(b["image"])
        lab = np.asarray(b["label"])
        for slot, idx in enumerate(b["image"].sample_indices):
            images[idx], labels[idx], seen[idx] = a[slot], lab[slot], True
    assert seen.all()
    return images, labels


def test_webdataset_shards_match_pil(tmp_root, shards):
    from PIL import Image

    root, encoded = shards
    assert len(glob.glob(os.path.join(root, "shard-*.tar"))) == 3
    out = os.path.join(tmp_root, "tar_shards.plan")
    sluice.compile(spec("${DATA}"), out, cpu_targets=FAST_TARGETS, cuda=False)
    for attempt in range(2):  # the first load builds the index, the second reuses it
        plan = sluice.load(out, vars={"DATA": root})
        images, labels = read_all(plan, NUM)
        indexes = glob.glob(os.path.join(root, "sluice-index-*.sluice"))
        assert len(indexes) == 1, indexes
        for i, (ext, data) in enumerate(encoded):
            want = center_crop(np.asarray(Image.open(io.BytesIO(data)).convert("RGB")), CROP)
            diff = np.abs(images[i].astype(int) - want.astype(int)).max()
            assert diff <= (0 if ext == "png" else 1), (i, ext, diff)
            assert labels[i] == i % 4


def test_brace_range_selects_shards(tmp_root, shards):
    root, encoded = shards
    out = os.path.join(tmp_root, "tar_shards_range.plan")
    sluice.compile(spec("${DATA}/shard-{000001..000002}.tar"), out, cpu_targets=FAST_TARGETS,
                   cuda=False)
    plan = sluice.load(out, vars={"DATA": root})
    _, labels = read_all(plan, NUM - PER_SHARD)
    assert list(labels) == [i % 4 for i in range(PER_SHARD, NUM)]


def test_missing_shard_is_a_clear_error(tmp_root, shards):
    root, _ = shards
    out = os.path.join(tmp_root, "tar_shards_missing.plan")
    sluice.compile(spec("${DATA}/shard-{000000..000009}.tar"), out, cpu_targets=FAST_TARGETS,
                   cuda=False)
    plan = sluice.load(out, vars={"DATA": root})
    with pytest.raises(Exception, match="shard-000003.tar"):
        for _ in plan.loader(threads=1):
            pass


def evict(paths):
    """Drops the files' clean pages from the page cache (tmpfs keeps them)."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


@pytest.mark.parametrize("prefetch", ["true", "false"])
def test_an_evicted_page_cache_gives_the_same_batches(tmp_root, shards, prefetch):
    """Shuffled reads of shards just evicted from the page cache, with the
    page-cache prefetch on (members announced ahead, read by the kernel) and
    off: every batch is the one read with the shards resident, bit for bit."""
    root, _ = shards
    out = os.path.join(tmp_root, "tar_shards_prefetch_%s.plan" % prefetch)
    sluice.compile(spec("${DATA}", ", page_cache_prefetch: %s" % prefetch, order="shuffle"), out,
                   cpu_targets=FAST_TARGETS, cuda=False)
    plan = sluice.load(out, vars={"DATA": root})
    warm = [(np.asarray(b["image"]).copy(), list(b["image"].sample_indices))
            for b in plan.loader(threads=2)]
    evict(glob.glob(os.path.join(root, "shard-*.tar")))
    cold = [(np.asarray(b["image"]).copy(), list(b["image"].sample_indices))
            for b in plan.loader(threads=2)]
    assert len(cold) == len(warm) == (NUM + 3) // 4
    for (wi, wx), (ci, cx) in zip(warm, cold):
        assert wx == cx
        assert np.array_equal(wi, ci)
