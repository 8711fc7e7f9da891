"""tar_shards over URLs from Python (docs/remote.md): file:// URLs, read
through the same ObjectStore path as s3:// and https://, give the very
batches of the same shards named by a local path, in every order, and the
stats dict reports the requests."""

import io
import os
import tarfile

import numpy as np
import pytest

import sluice
from conftest import FAST_TARGETS

NUM = 18
PER_SHARD = 6


def spec(path, order):
    return ("sluice: 1\nname: py_remote_tar\n"
            "source: {format: tar_shards, path: \"%s\", read_ahead: 1}\n"
            "sampling: {order: %s}\ngraph:\n"
            "  - decode_image: {in: jpg, out: image, color: rgb}\n"
            "  - center_crop: {size: [16, 16]}\n"
            "batch: {size: 4, fields: {image: image, label: cls}}\n"
            "output: {device: cpu, prefetch: 2, on_error: {policy: fail}}\n" % (path, order))


@pytest.fixture(scope="module")
def shards(tmp_root):
    from PIL import Image

    root = os.path.join(tmp_root, "remote_shards")
    os.makedirs(root, exist_ok=True)
    for k in range(NUM // PER_SHARD):
        with tarfile.open(os.path.join(root, "shard-%06d.tar" % k), "w",
                          format=tarfile.USTAR_FORMAT) as tar:
            for j in range(PER_SHARD):
                i = k * PER_SHARD + j
                buf = io.BytesIO()
                a = np.full((20 + i % 3, 24, 3), (i * 13) % 256, np.uint8)
                Image.fromarray(a).save(buf, format="PNG")
                for ext, data in (("png", buf.getvalue()), ("cls", str(i % 4).encode())):
                    info = tarfile.TarInfo("s%05d.%s" % (i, ext))
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    return root


def batches(plan_path, data):
    plan = sluice.load(plan_path, vars={"DATA": data})
    loader = plan.loader(threads=2)
    out = [(np.asarray(b["image"]).copy(), np.asarray(b["label"]).copy()) for b in loader]
    return out, loader.stats()


@pytest.mark.parametrize("order", ["shuffle", "shard_shuffle", "sequential"])
def test_file_urls_match_local_paths(tmp_root, shards, order, monkeypatch):
    monkeypatch.setenv("SLUICE_CACHE_DIR", os.path.join(tmp_root, "remote_cache"))
    local_plan = os.path.join(tmp_root, "remote_local_%s.plan" % order)
    url_plan = os.path.join(tmp_root, "remote_url_%s.plan" % order)
    sluice.compile(spec("${DATA}", order), local_plan,
                   cpu_targets=FAST_TARGETS, cuda=False)
    sluice.compile(spec("file://${DATA}/shard-{000000..000002}.tar", order), url_plan,
                   cpu_targets=FAST_TARGETS, cuda=False)
    a, local_stats = batches(local_plan, shards)
    b, url_stats = batches(url_plan, shards)
    assert len(a) == len(b) == NUM // 4
    for (ia, la), (ib, lb) in zip(a, b):
        assert np.array_equal(ia, ib) and np.array_equal(la, lb)
    assert local_stats["remote"] is False and local_stats["remote_requests"] == 0
    assert url_stats["remote"] is True
    assert url_stats["remote_requests"] > 0 and url_stats["remote_bytes_fetched"] > 0
    assert url_stats["remote_latency_p99"] >= url_stats["remote_latency_p50"] > 0
    assert url_stats["remote_retries"] == 0 and url_stats["remote_failures"] == 0
    if order == "shuffle":
        assert url_stats["shards_streamed"] == 0
    else:
        assert url_stats["shards_streamed"] >= 3
