#!/usr/bin/python3
"""A read-only passthrough FUSE file system that behaves like slow, cold
storage (a network file system or a cold disk): every open() and every read
request pays a fixed latency, and all reads share one link of limited
bandwidth. A benchmark tool (bench/shards/run.sh STORAGE=slowfs), not product
code.

    bench/shards/slowfs.py ROOT MOUNTPOINT [--open-ms 1.5] [--read-ms 0.5]
                           [--mbps 200]

Model, per request the kernel sends to this daemon:
  - open:    sleeps --open-ms, then opens ROOT/path read-only.
  - read:    the request queues on one shared link (--mbps MB/s, 10^6 bytes),
             whose transfer of `size` bytes starts when the link is free; the
             reply comes --read-ms after the transfer ends. Concurrent requests
             overlap their latencies (the daemon is multithreaded) but not
             their transfers, like a single network link or disk head.
  - getattr, readdir, readlink, statfs, release: no added latency (the kernel
    caches attributes and entries for 1 s, as NFS clients do).
Writes are refused (EROFS). The kernel's page cache sits above the daemon: a
page read once is served from memory while the file stays open (without
fusepy's kernel_cache option, which this does not set, FUSE drops a file's
pages when it is opened again). Unmounting (`umount`) drops everything, which
is how run.sh makes each slow run cold. Kernel read-ahead applies (requests of up to
128 KiB), so a sequential reader pays one latency per 128 KiB, a reader of
many small files pays one open and at least one read per file.

Runs in the foreground until the mount point is unmounted (run.sh starts it
in the background, polls `mountpoint -q`, and unmounts it after each run),
then prints "SLOWFS opens=N reads=N read_mb=X daemon_cpu_s=S": the requests it
served and its own CPU time (user + system), which the loader's cpu_s omits.
Needs /dev/fuse, root (or fusermount) and Debian's python3-fusepy (module
`fusepy`; PyPI's fusepy names it `fuse`).
"""

import argparse
import errno
import os
import resource
import threading
import time

try:
    import fusepy as fuse  # Debian's python3-fusepy
except ImportError:  # PyPI's fusepy
    import fuse


class SlowFs(fuse.Operations):
    """Passthrough of ROOT with the latency and bandwidth model above."""

    use_ns = True  # fusepy: getattr times are integer nanoseconds

    def __init__(self, root, open_s, read_s, bytes_per_s):
        self.root = os.path.realpath(root)
        self.open_s = open_s
        self.read_s = read_s
        self.bytes_per_s = bytes_per_s
        self.link_lock = threading.Lock()
        self.link_free_at = 0.0  # monotonic time at which the link is idle
        self.opens = self.reads = self.read_bytes = 0  # counted under link_lock

    def _full(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def getattr(self, path, fh=None):
        st = os.lstat(self._full(path))  # times in ns (use_ns): index caches key on mtime_ns
        out = {k: getattr(st, k) for k in ("st_gid", "st_mode", "st_nlink", "st_size", "st_uid")}
        out.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
        return out

    def readdir(self, path, fh):
        return [".", ".."] + os.listdir(self._full(path))

    def readlink(self, path):
        return os.readlink(self._full(path))

    def statfs(self, path):
        st = os.statvfs(self._full(path))
        return {k: getattr(st, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize",
                                              "f_favail", "f_ffree", "f_files", "f_flag",
                                              "f_frsize", "f_namemax")}

    def open(self, path, flags):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_TRUNC):
            raise fuse.FuseOSError(errno.EROFS)
        time.sleep(self.open_s)
        fd = os.open(self._full(path), os.O_RDONLY)
        with self.link_lock:
            self.opens += 1
        return fd

    def read(self, path, size, offset, fh):
        data = os.pread(fh, size, offset)
        now = time.monotonic()
        with self.link_lock:
            start = max(now, self.link_free_at)
            self.link_free_at = start + len(data) / self.bytes_per_s
            done = self.link_free_at
            self.reads += 1
            self.read_bytes += len(data)
        time.sleep(max(0.0, done - now) + self.read_s)
        return data

    def release(self, path, fh):
        os.close(fh)
        return 0

    def create(self, path, mode, fi=None):
        raise fuse.FuseOSError(errno.EROFS)

    def write(self, path, data, offset, fh):
        raise fuse.FuseOSError(errno.EROFS)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root")
    ap.add_argument("mountpoint")
    ap.add_argument("--open-ms", type=float, default=1.5, help="latency per open() [1.5]")
    ap.add_argument("--read-ms", type=float, default=0.5, help="latency per read request [0.5]")
    ap.add_argument("--mbps", type=float, default=200.0, help="link bandwidth, MB/s [200]")
    args = ap.parse_args()
    fs = SlowFs(args.root, args.open_ms / 1e3, args.read_ms / 1e3, args.mbps * 1e6)
    # foreground: run.sh owns the process (starts it with &, stops it by unmounting).
    fuse.FUSE(fs, args.mountpoint, foreground=True, nothreads=False, ro=True,
              fsname="slowfs", default_permissions=True)
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    print(f"SLOWFS opens={fs.opens} reads={fs.reads} read_mb={fs.read_bytes / 1e6:.1f} "
          f"daemon_cpu_s={cpu.ru_utime + cpu.ru_stime:.3f}", flush=True)


if __name__ == "__main__":
    main()
