"""bench/shards/slowfs.py (the slow-storage FUSE mount of bench/shards/run.sh
STORAGE=slowfs) and the slowfs rows of bench/shards/summarize.py.

The latency model is checked with a recorded sleep (no timing); the mount test
needs /dev/fuse and root, and skips without them."""

import errno
import importlib.util
import os
import subprocess
import sys
import time

import pytest

from conftest import require_module

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SLOWFS = os.path.join(ROOT, "bench", "shards", "slowfs.py")
SUMMARIZE = os.path.join(ROOT, "bench", "shards", "summarize.py")


def load_slowfs():
    require_module("fusepy")
    spec = importlib.util.spec_from_file_location("slowfs", SLOWFS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_read_latency_and_shared_link(tmp_path, monkeypatch):
    slowfs = load_slowfs()
    (tmp_path / "a.bin").write_bytes(bytes(range(256)) * 40)  # 10240 bytes
    fs = slowfs.SlowFs(str(tmp_path), open_s=0.002, read_s=0.001, bytes_per_s=1e6)
    slept = []
    monkeypatch.setattr(slowfs.time, "sleep", slept.append)
    monkeypatch.setattr(slowfs.time, "monotonic", lambda: 100.0)
    fh = fs.open("/a.bin", os.O_RDONLY)
    assert slept == [0.002]
    # Two reads at the same instant: the second's 4096 bytes wait for the
    # first's 6144 on the 1 MB/s link; each reply comes read_s after its bytes.
    assert fs.read("/a.bin", 6144, 0, fh) == (bytes(range(256)) * 40)[:6144]
    assert fs.read("/a.bin", 4096, 6144, fh) == (bytes(range(256)) * 40)[6144:]
    assert slept[1] == pytest.approx(0.006144 + 0.001)
    assert slept[2] == pytest.approx(0.006144 + 0.004096 + 0.001)
    assert (fs.opens, fs.reads, fs.read_bytes) == (1, 2, 10240)
    fs.release("/a.bin", fh)
    with pytest.raises(slowfs.fuse.FuseOSError) as err:
        fs.open("/a.bin", os.O_WRONLY)
    assert err.value.errno == errno.EROFS


def test_mount_passes_files_through(tmp_path):
    load_slowfs()
    if not os.access("/dev/fuse", os.R_OK | os.W_OK) or os.geteuid() != 0:
        pytest.skip("needs /dev/fuse and root")
    src, mnt = tmp_path / "src", tmp_path / "mnt"
    (src / "sub").mkdir(parents=True)
    mnt.mkdir()
    data = os.urandom(300_000)
    (src / "sub" / "a.bin").write_bytes(data)
    (src / "b.txt").write_text("hello")
    proc = subprocess.Popen([sys.executable, SLOWFS, str(src), str(mnt), "--open-ms", "1",
                             "--read-ms", "1", "--mbps", "1000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(200):
            if os.path.ismount(mnt) or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert os.path.ismount(mnt), proc.stderr.read() if proc.poll() is not None else ""
        assert sorted(os.listdir(mnt)) == ["b.txt", "sub"]
        assert (mnt / "sub" / "a.bin").read_bytes() == data
        assert (mnt / "b.txt").read_text() == "hello"
        mtime = os.stat(src / "sub" / "a.bin").st_mtime_ns  # ns kept: index caches key on it
        assert os.stat(mnt / "sub" / "a.bin").st_mtime_ns == mtime
        with pytest.raises(OSError) as err:
            open(mnt / "b.txt", "w")
        assert err.value.errno == errno.EROFS
    finally:
        if os.path.ismount(mnt):
            subprocess.run(["umount", str(mnt)], check=True)
        out, _ = proc.communicate(timeout=30)
    fields = dict(p.split("=", 1) for p in out.split()[1:])
    assert out.startswith("SLOWFS ")
    assert int(fields["opens"]) == 2
    assert int(fields["reads"]) >= 2
    assert float(fields["read_mb"]) >= 0.3


def test_summarize_slowfs_rows(tmp_path):
    log = tmp_path / "results.log"
    lines = ["# header", "LOAD 1.5"]
    for name, rate, cpu in [("folder", 400, 2.0), ("shards", 1000, 1.8), ("shards_ss", 900, 1.9)]:
        for k in range(3):
            lines.append(f"RESULT {name}_slowfs images_per_s={rate + k} peak_rss_mb=100 "
                         f"batch=256 batches=8 cpu_s={cpu}")
            lines.append(f"SLOWFS {name} opens={10 + k} reads=20 read_mb=1.5 daemon_cpu_s=0.5")
    log.write_text("\n".join(lines) + "\n")
    out = subprocess.run([sys.executable, SUMMARIZE, str(log)], capture_output=True, text=True,
                         check=True).stdout
    assert "| shards | slowfs | 1001.0 | 1000.0-1002.0 | 2.50x |" in out
    assert "| shards_ss | slowfs | 901.0 |" in out
    assert "folder: 11 opens, 20 reads, 2 MB, 0.50 CPU-s" in out
    assert "target (slowfs): shards / folder = 2.50x" in out
