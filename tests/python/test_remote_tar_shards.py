"""tar_shards over URLs from Python (docs/remote.md): file:// URLs, read
through the same ObjectStore path as s3:// and https://, give the very
batches of the same shards named by a local path, in every order, and the
stats dict reports the requests. Then the same shards served over HTTP (a
Range-capable loopback server) and S3 (moto with IAM auth, uploaded with
boto3): the same batches, bit for bit, in every order; resume from S3; a
wrong secret is a clear 403 that does not print the secret."""

import io
import os
import sys
import tarfile

import numpy as np
import pytest

import sluice
from conftest import FAST_TARGETS, require_module

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


# ---- Against real servers on loopback (tests/remote/fixtures/serve.py) ----

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "remote", "fixtures")


def load_serve():
    sys.path.insert(0, os.path.abspath(FIXTURES))
    import serve
    return serve


def compile_spec(tmp_root, name, path, order):
    out = os.path.join(tmp_root, name)
    sluice.compile(spec(path, order), out, cpu_targets=FAST_TARGETS, cuda=False)
    return out


def same(a, b):
    assert len(a) == len(b)
    for (ia, la), (ib, lb) in zip(a, b):
        assert np.array_equal(ia, ib) and np.array_equal(la, lb)


@pytest.fixture(scope="module")
def s3(shards):
    """One moto server for the module (moto keeps its IAM state per process)."""
    require_module("moto")
    require_module("boto3")
    with load_serve().S3Server(shards, "sluice-e2e") as server:
        yield server


@pytest.fixture()
def s3_env(monkeypatch, tmp_root):
    """A clean AWS environment (no profile files, no ambient credentials)."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.path.join(tmp_root, "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.path.join(tmp_root, "no-aws-credentials"))
    return monkeypatch


@pytest.mark.parametrize("order", ["shuffle", "shard_shuffle", "sequential"])
def test_http_and_s3_give_the_batches_of_local_shards(tmp_root, shards, order, s3, s3_env):
    serve = load_serve()
    s3_env.setenv("SLUICE_CACHE_DIR", os.path.join(tmp_root, "e2e_cache_" + order))
    want, _ = batches(compile_spec(tmp_root, "e2e_local_%s.plan" % order, "${DATA}", order),
                      shards)
    with serve.HttpServer(os.path.dirname(shards)) as http:
        url = http.url + "/remote_shards/shard-{000000..000002}.tar"
        got, stats = batches(compile_spec(tmp_root, "e2e_http_%s.plan" % order, url, order),
                             shards)
    same(want, got)
    assert stats["remote"] and stats["remote_requests"] > 0 and stats["remote_retries"] == 0
    # Looking up the absent index.sluice and manifest.json (HEAD, 404) is
    # not a failure.
    assert stats["remote_failures"] == 0
    s3_env.setenv("AWS_ACCESS_KEY_ID", s3.access_key)
    s3_env.setenv("AWS_SECRET_ACCESS_KEY", s3.secret_key)
    s3_env.setenv("AWS_REGION", s3.region)
    s3_env.setenv("AWS_ENDPOINT_URL", s3.url)
    # A prefix: the bucket is listed (ListObjectsV2).
    plan = compile_spec(tmp_root, "e2e_s3_%s.plan" % order, "s3://sluice-e2e/", order)
    got, stats = batches(plan, shards)
    same(want, got)
    assert stats["remote_bytes_fetched"] > 0
    with open(os.path.join(plan, "plan.json")) as f:
        assert s3.secret_key not in f.read()
    assert s3.secret_key not in repr(stats)


def test_resume_from_s3_and_a_wrong_secret(tmp_root, shards, s3, s3_env):
    s3_env.setenv("SLUICE_CACHE_DIR", os.path.join(tmp_root, "e2e_resume_cache"))
    s3_env.setenv("AWS_ACCESS_KEY_ID", s3.access_key)
    s3_env.setenv("AWS_SECRET_ACCESS_KEY", s3.secret_key)
    s3_env.setenv("AWS_REGION", s3.region)
    s3_env.setenv("AWS_ENDPOINT_URL", s3.url)
    for order in ("shuffle", "shard_shuffle"):
        path = compile_spec(tmp_root, "e2e_resume_%s.plan" % order,
                            "s3://sluice-e2e/shard-{000000..000002}.tar", order)
        loader = sluice.load(path, vars={"DATA": shards}).loader(threads=2)
        it = iter(loader)
        next(it), next(it)
        state = loader.state_dict()
        rest = [np.asarray(b["image"]).copy() for b in it]
        again = sluice.load(path, vars={"DATA": shards}).loader(threads=1)
        again.load_state_dict(state)
        resumed = [np.asarray(b["image"]).copy() for b in again]
        assert len(rest) == len(resumed) > 0
        for a, b in zip(rest, resumed):
            assert np.array_equal(a, b)
    s3_env.setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-value")
    s3_env.setenv("SLUICE_CACHE_DIR", os.path.join(tmp_root, "e2e_resume_cache_2"))
    path = compile_spec(tmp_root, "e2e_wrong.plan", "s3://sluice-e2e/shard-000000.tar",
                        "shuffle")
    with pytest.raises(Exception) as err:
        for _ in sluice.load(path, vars={"DATA": shards}).loader(threads=1):
            pass
    assert "403" in str(err.value)
    assert "wrong-secret-value" not in str(err.value)


def test_auto_read_ahead_is_sized_and_logged(tmp_root, shards, monkeypatch, capfd):
    monkeypatch.setenv("SLUICE_CACHE_DIR", os.path.join(tmp_root, "remote_cache_auto"))
    text = spec("file://${DATA}/shard-{000000..000002}.tar", "shard_shuffle").replace(
        ", read_ahead: 1", "")
    path = os.path.join(tmp_root, "remote_auto_read_ahead.plan")
    sluice.compile(text, path, cpu_targets=FAST_TARGETS, cuda=False)
    want, _ = batches(compile_spec(tmp_root, "remote_auto_local.plan", "${DATA}",
                                   "shard_shuffle"), shards)
    got, stats = batches(path, shards)
    same(want, got)
    # Three tiny shards: 2 ahead to start with, room for 16.
    assert 2 <= stats["read_ahead"] <= 16
    assert stats["read_ahead_stalls"] >= 0
    err = capfd.readouterr().err
    assert "tar_shards: read-ahead 2 shard(s), growing on stalls up to 16 within" in err, err


def test_a_query_string_is_kept_on_every_request_and_out_of_messages(tmp_root, shards,
                                                                     monkeypatch):
    """A presigned / SAS / token URL: the query is no glob (the shards are
    Stat-ed, not listed), goes on every request for the shards and the index
    beside them, and never shows in a message or the stats."""
    serve = load_serve()
    monkeypatch.setenv("SLUICE_CACHE_DIR", os.path.join(tmp_root, "e2e_query_cache"))
    order = "shard_shuffle"
    want, _ = batches(compile_spec(tmp_root, "e2e_query_local.plan", "${DATA}", order), shards)
    query = "sv=2024&sig=S3CRET%2Fab/cd&se=2099"  # a '/' in the query: not a directory
    with serve.HttpServer(os.path.dirname(shards)) as http, serve.FaultProxy(http.port) as proxy:
        url = proxy.url + "/remote_shards/shard-{000000..000002}.tar?" + query
        got, stats = batches(compile_spec(tmp_root, "e2e_query.plan", url, order), shards)
        same(want, got)
        assert "S3CRET" not in repr(stats)
        seen = [path for _, path, _ in proxy.requests]
        shard_requests = [p for p in seen if "/shard-" in p]
        assert len(shard_requests) >= 6  # a HEAD and a GET (index scan) per shard at least
        assert all(p.endswith(".tar?" + query) for p in shard_requests), shard_requests
        assert "/remote_shards/index.sluice?" + query in seen
        assert "/remote_shards/manifest.json?" + query in seen  # looked for, with the query
        # A shard that does not exist: the error names its URL, the query hidden.
        missing = proxy.url + "/remote_shards/shard-{000000..000003}.tar?" + query
        plan = compile_spec(tmp_root, "e2e_query_missing.plan", missing, order)
        with pytest.raises(Exception) as failed:
            sluice.load(plan, vars={"DATA": shards}).loader(threads=2)
        message = str(failed.value)
        assert "shard-000003.tar?***" in message, message
        assert "S3CRET" not in message and "sv=2024" not in message, message
