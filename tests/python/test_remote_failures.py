"""Remote tar shards under failure, end to end through the loader (issue 16
item 4; docs/remote.md "Failure behaviour"), against real servers on loopback
(tests/remote/fixtures/serve.py): a flaky proxy in front of HTTP and of S3
(moto, IAM auth on) yields the exact batches of local shards with the
retries counted; a stalled request is hedged; a stalled shard stream is
resumed from its first undelivered byte; a dead server hits the
deadline with an error naming the URL, or, under on_error: skip, makes each
sample of its shard a bad sample counted once; destroying a loader with
requests in flight returns promptly; two processes share one shard cache,
downloading each shard once, within max_bytes."""

import glob
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import sluice
from conftest import FAST_TARGETS, require_module

NUM = 18
PER_SHARD = 6
SHARDS = NUM // PER_SHARD
BATCH = 3  # NUM is a multiple: no remainder, every sample in every epoch
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "remote", "fixtures")
PATTERN = "shard-{000000..000002}.tar"


def load_serve():
    sys.path.insert(0, os.path.abspath(FIXTURES))
    import serve
    return serve


def spec(path, order, policy="fail", remote="", cache=""):
    source = 'format: tar_shards, path: "%s", read_ahead: 1' % path
    if remote:
        source += ", remote: {%s}" % remote
    if cache:
        source += ", cache: {%s}" % cache
    return ("sluice: 1\nname: py_remote_failures\n"
            "source: {%s}\n"
            "sampling: {order: %s}\ngraph:\n"
            "  - decode_image: {in: jpg, out: image, color: rgb}\n"
            "  - center_crop: {size: [16, 16]}\n"
            "batch: {size: %d, fields: {image: image, label: cls}}\n"
            "output: {device: cpu, prefetch: 2, on_error: {policy: %s, max_fraction: 1.0}}\n"
            % (source, order, BATCH, policy))


def compile_spec(tmp_root, name, text):
    out = os.path.join(tmp_root, name)
    sluice.compile(text, out, cpu_targets=FAST_TARGETS, cuda=False)
    return out


def epoch(plan_path, threads=2):
    loader = sluice.load(plan_path, vars={"DATA": "unused"}).loader(threads=threads)
    out = [(np.asarray(b["image"]).copy(), np.asarray(b["label"]).copy()) for b in loader]
    return out, loader.stats()


def same(a, b):
    assert len(a) == len(b) == NUM // BATCH
    for (ia, la), (ib, lb) in zip(a, b):
        assert np.array_equal(ia, ib) and np.array_equal(la, lb)


@pytest.fixture(scope="module")
def data(tmp_root):
    """NUM JPEG samples in SHARDS tar shards (PIL + tarfile: not our writer);
    sample i's label is i, so a batch's labels name its samples."""
    import io
    import tarfile
    from PIL import Image

    root = os.path.join(tmp_root, "failure_data")
    shards = os.path.join(root, "shards")
    os.makedirs(shards, exist_ok=True)
    for k in range(SHARDS):
        with tarfile.open(os.path.join(shards, "shard-%06d.tar" % k), "w",
                          format=tarfile.USTAR_FORMAT) as tar:
            for j in range(PER_SHARD):
                i = k * PER_SHARD + j
                buf = io.BytesIO()
                a = np.full((24 + i % 3, 28, 3), (i * 13) % 256, np.uint8)
                a[:, :, 1] = np.arange(28, dtype=np.uint8) * (i + 1)
                Image.fromarray(a).save(buf, format="JPEG", quality=90)
                for ext, blob in (("jpg", buf.getvalue()), ("cls", str(i).encode())):
                    info = tarfile.TarInfo("s%05d.%s" % (i, ext))
                    info.size = len(blob)
                    tar.addfile(info, io.BytesIO(blob))
    return root


@pytest.fixture()
def env(monkeypatch, tmp_root, request):
    """A clean AWS environment and a fresh index cache per test."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL_S3",
                 "AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.path.join(tmp_root, "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.path.join(tmp_root, "no-aws-credentials"))
    monkeypatch.setenv("SLUICE_CACHE_DIR",
                       os.path.join(tmp_root, "failure_index_" + request.node.name))
    return monkeypatch


@pytest.fixture()
def local_batches(tmp_root, data):
    def get(order):
        path = compile_spec(tmp_root, "failure_local_%s.plan" % order,
                            spec(os.path.join(data, "shards"), order))
        return epoch(path)[0]
    return get


@pytest.fixture()
def http(data):
    with load_serve().HttpServer(data) as server:
        yield server


@pytest.fixture(scope="module")
def s3(data):
    require_module("moto")
    require_module("boto3")
    with load_serve().S3Server(os.path.join(data, "shards"), "sluice-failures") as server:
        yield server


def use_s3(env, s3, endpoint):
    env.setenv("AWS_ACCESS_KEY_ID", s3.access_key)
    env.setenv("AWS_SECRET_ACCESS_KEY", s3.secret_key)
    env.setenv("AWS_REGION", s3.region)
    env.setenv("AWS_ENDPOINT_URL", endpoint)
    return "s3://sluice-failures/" + PATTERN


FLAKY = [("503", 5, 1), ("429", 5, 3), ("reset", 7, 2), ("truncate", 11, 5)]
RETRIES = "max_retries: 8, backoff_initial_s: 0.01, backoff_max_s: 0.05, hedge_delay_s: 0"


@pytest.mark.parametrize("order", ["shuffle", "shard_shuffle"])
@pytest.mark.parametrize("server", ["http", "s3"])
def test_a_flaky_proxy_gives_the_same_batches_with_retries_counted(
        tmp_root, env, http, s3, local_batches, order, server):
    serve = load_serve()
    want = local_batches(order)
    upstream = http if server == "http" else s3
    with serve.FaultProxy(upstream.port, FLAKY) as proxy:
        if server == "http":
            url = proxy.url + "/shards/" + PATTERN
        else:
            url = use_s3(env, s3, proxy.url)  # signatures hold through the proxy
        got, stats = epoch(compile_spec(tmp_root, "flaky_%s_%s.plan" % (server, order),
                                        spec(url, order, remote=RETRIES)))
        faulted = proxy.counter
    same(want, got)
    assert faulted > 5, "the proxy saw too few requests to inject every fault"
    assert stats["remote_retries"] > 0
    assert stats["bad_samples"] == 0
    assert stats["remote_failures"] == 0


def build_index(tmp_root, url, order, name):
    """Opens a loader once, while the server is healthy, so the index is cached."""
    loader = sluice.load(compile_spec(tmp_root, name, spec(url, order)),
                         vars={"DATA": "unused"}).loader(threads=1)
    del loader


def test_a_stalled_request_is_hedged(tmp_root, env, http, local_batches):
    serve = load_serve()
    want = local_batches("shuffle")
    delay = 10.0
    with serve.FaultProxy(http.port, delay_s=delay) as proxy:
        url = proxy.url + "/shards/" + PATTERN
        build_index(tmp_root, url, "shuffle", "hedge_index.plan")
        plan = compile_spec(tmp_root, "hedge.plan",
                            spec(url, "shuffle", remote="hedge_delay_s: 0.1, max_retries: 0"))
        # Three range reads of the shards stall for `delay`; their hedges do not.
        proxy.set_faults([("delay", 1000, 0), ("delay", 1000, 4), ("delay", 1000, 9)],
                         match=".tar", methods=("GET",))
        start = time.monotonic()
        got, stats = epoch(plan)
        took = time.monotonic() - start
        reads = proxy.counter
    same(want, got)
    assert reads > 9, "fewer range reads than stalls"
    assert stats["remote_hedges"] >= 3 and stats["remote_hedge_wins"] >= 3
    assert stats["remote_retries"] == 0 and stats["bad_samples"] == 0
    # Unhedged, the epoch cannot end before a stalled read answers (delay s).
    assert took < delay / 2, took


def test_a_stalled_shard_stream_is_resumed_not_waited_out(tmp_root, env, http, local_batches):
    serve = load_serve()
    want = local_batches("shard_shuffle")
    deadline = 30.0
    with serve.FaultProxy(http.port) as proxy:
        url = proxy.url + "/shards/" + PATTERN
        build_index(tmp_root, url, "shard_shuffle", "stall_index.plan")
        plan = compile_spec(tmp_root, "stall.plan", spec(
            url, "shard_shuffle", remote="stall_timeout_s: 0.5, deadline_s: %g, max_retries: 3, "
            "backoff_initial_s: 0.01, hedge_delay_s: 0" % deadline))
        # The first and third shard GETs send half their body, then nothing.
        proxy.set_faults([("stall", 1000, 0), ("stall", 1000, 2)], match=".tar",
                         methods=("GET",))
        start = time.monotonic()
        got, stats = epoch(plan)
        took = time.monotonic() - start
        stalled = [r for r in proxy.requests if r[0] == "GET" and ".tar" in r[1]]
    same(want, got)
    assert len(stalled) >= 5, stalled  # 3 shards + 2 resumed streams
    assert any(r[2] and not r[2].startswith("bytes=0-") for r in stalled), stalled
    assert stats["remote_timeouts"] >= 2 and stats["remote_retries"] >= 2, stats
    assert stats["bad_samples"] == 0 and stats["remote_failures"] == 0
    # Without stall detection a stalled stream holds its shard until the deadline.
    assert took < deadline / 3, took


def test_nothing_listening_fails_within_the_deadline_naming_the_url(tmp_root, env):
    serve = load_serve()
    port = serve._free_port()
    url = "http://127.0.0.1:%d/shards/%s" % (port, PATTERN)
    plan = compile_spec(tmp_root, "dead_port.plan", spec(
        url, "shuffle", remote="connect_timeout_s: 1, deadline_s: 2, max_retries: 2"))
    start = time.monotonic()
    with pytest.raises(Exception) as err:
        sluice.load(plan, vars={"DATA": "unused"}).loader(threads=1)
    assert time.monotonic() - start < 15
    assert "127.0.0.1:%d" % port in str(err.value)


def hang_shard(tmp_root, env, http, order, policy, name):
    """A proxy whose GETs of shard 1 never answer, after the index is cached."""
    serve = load_serve()
    proxy = serve.FaultProxy(http.port)
    url = proxy.url + "/shards/" + PATTERN
    build_index(tmp_root, url, order, name + "_index.plan")
    plan = compile_spec(tmp_root, name + ".plan", spec(
        url, order, policy=policy,
        # A deadline the healthy shards' requests meet even on a loaded 2-core
        # machine (the proxy is Python); no hedges: they would only hang too.
        remote="connect_timeout_s: 2, deadline_s: 3, max_retries: 0, hedge_delay_s: 0"))
    proxy.set_faults([("hang", 1, 0)], match="shard-000001.tar", methods=("GET",))
    return proxy, plan


@pytest.mark.parametrize("order", ["shuffle", "shard_shuffle"])
def test_a_dead_shard_hits_the_deadline_and_fails_naming_the_url(tmp_root, env, http, order):
    proxy, plan = hang_shard(tmp_root, env, http, order, "fail", "dead_fail_" + order)
    host = "127.0.0.1:%d" % proxy.port
    with proxy:
        start = time.monotonic()
        with pytest.raises(Exception) as err:
            epoch(plan)
        took = time.monotonic() - start
    # deadline_s bounds each sample's request; a few samples may wait at once.
    assert took < 30, took
    message = str(err.value)
    assert "shard-000001.tar" in message and host in message, message
    assert "deadline" in message or "timed out" in message or "timeout" in message, message


@pytest.mark.parametrize("order", ["shuffle", "shard_shuffle"])
def test_a_dead_shard_under_skip_counts_each_of_its_samples_once(
        tmp_root, env, http, local_batches, order):
    want = local_batches(order)
    proxy, plan = hang_shard(tmp_root, env, http, order, "skip", "dead_skip_" + order)
    with proxy:
        got, stats = epoch(plan)
    assert stats["bad_samples"] == PER_SHARD
    assert stats["skipped"] >= PER_SHARD  # passed over; batches are refilled
    assert len(got) == NUM // BATCH
    # The batches hold exactly the other shards' samples (a bad slot takes a
    # replacement from them), and a good sample keeps its slot, bit for bit.
    good = set(range(NUM)) - set(range(PER_SHARD, 2 * PER_SHARD))
    assert set(np.concatenate([labels for _, labels in got]).tolist()) == good
    for (wi, wl), (gi, gl) in zip(want, got):
        for k in range(len(wl)):
            if int(wl[k]) in good:
                assert gl[k] == wl[k] and np.array_equal(gi[k], wi[k])
    assert stats["last_bad"]
    for name, reason in stats["last_bad"]:
        assert "shard-000001.tar" in name, name
        assert "shard-000001.tar" in reason and "timed out" in reason, reason


def test_destroying_a_loader_with_requests_in_flight_returns_promptly(tmp_root, env, http):
    serve = load_serve()
    with serve.FaultProxy(http.port) as proxy:
        url = proxy.url + "/shards/" + PATTERN
        build_index(tmp_root, url, "shuffle", "shutdown_index.plan")
        plan = compile_spec(tmp_root, "shutdown.plan",
                            spec(url, "shuffle", remote="deadline_s: 60, hedge_delay_s: 0"))
        proxy.set_faults([("hang", 1, 0)], match=".tar", methods=("GET",))
        loader = sluice.load(plan, vars={"DATA": "unused"}).loader(threads=2)
        for _ in range(200):  # until the loader's requests are stuck in the proxy
            if proxy.counter >= 2:
                break
            time.sleep(0.05)
        assert proxy.counter >= 2
        start = time.monotonic()
        del loader
        assert time.monotonic() - start < 5


CHILD = r"""
import hashlib, json, sys
import numpy as np
import sluice
loader = sluice.load(sys.argv[1], vars={"DATA": "unused"}).loader(threads=1)
digest = hashlib.sha256()
for b in loader:
    digest.update(np.ascontiguousarray(b["image"]).tobytes())
    digest.update(np.ascontiguousarray(b["label"]).tobytes())
s = loader.stats()
print(json.dumps({"digest": digest.hexdigest(), "hits": s["cache_hits"],
                  "misses": s["cache_misses"], "bad": s["bad_samples"],
                  "passthrough": s["cache_passthrough"], "no_space": s["cache_no_space"]}))
"""


def run_children(plan, n):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, plan], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(n)]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=120)
        assert p.returncode == 0, stderr
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


def digest_of(batches):
    import hashlib
    d = hashlib.sha256()
    for image, label in batches:
        d.update(np.ascontiguousarray(image).tobytes())
        d.update(np.ascontiguousarray(label).tobytes())
    return d.hexdigest()


def test_two_processes_share_one_cache_and_download_each_shard_once(
        tmp_root, env, http, data, local_batches):
    serve = load_serve()
    want = digest_of(local_batches("shard_shuffle"))
    shard_bytes = [os.path.getsize(p) for p in sorted(glob.glob(os.path.join(data, "shards",
                                                                               "*.tar")))]
    cache = os.path.join(tmp_root, "shared_shard_cache")
    with serve.FaultProxy(http.port) as proxy:
        url = proxy.url + "/shards/" + PATTERN
        plan = compile_spec(tmp_root, "shared_cache.plan", spec(
            url, "shard_shuffle", cache="dir: %s, max_bytes: %d" % (cache, sum(shard_bytes))))
        results = run_children(plan, 2)
        gets = [p for m, p, r in proxy.requests if m == "GET" and ".tar" in p]
    for r in results:
        assert r["digest"] == want and r["bad"] == 0
    # Each shard crossed the wire once, for both processes (index and reads).
    assert sorted(gets) == sorted("/shards/shard-%06d.tar" % k for k in range(SHARDS))
    assert sum(r["misses"] for r in results) == SHARDS
    assert all(r["passthrough"] == 0 and r["no_space"] == 0 for r in results)
    names = os.listdir(cache)
    assert not [n for n in names if n.startswith(".partial")], names
    kept = [os.path.getsize(os.path.join(cache, n)) for n in names if n.endswith(".shard")]
    assert sorted(kept) == sorted(shard_bytes)

    # A budget of two shards: the third evicts the least recently used, and
    # the directory never holds more than max_bytes of shards.
    small = os.path.join(tmp_root, "small_shard_cache")
    budget = sorted(shard_bytes)[-1] + sorted(shard_bytes)[-2]
    with serve.FaultProxy(http.port) as proxy:
        url = proxy.url + "/shards/" + PATTERN
        plan = compile_spec(tmp_root, "small_cache.plan", spec(
            url, "shard_shuffle", cache="dir: %s, max_bytes: %d" % (small, budget)))
        stop = threading.Event()
        peak = [0]

        def watch():
            while not stop.is_set():
                try:
                    used = sum(os.path.getsize(os.path.join(small, n))
                               for n in os.listdir(small)
                               if n.endswith(".shard") or n.startswith(".partial"))
                except OSError:
                    continue
                peak[0] = max(peak[0], used)
                time.sleep(0.005)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            results = run_children(plan, 2)
        finally:
            stop.set()
            watcher.join()
    for r in results:
        assert r["digest"] == want and r["bad"] == 0
    assert peak[0] <= budget
    names = os.listdir(small)
    assert not [n for n in names if n.startswith(".partial")], names
    assert sum(os.path.getsize(os.path.join(small, n)) for n in names
               if n.endswith(".shard")) <= budget
