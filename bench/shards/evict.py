#!/usr/bin/python3
"""Evicts files from the page cache: posix_fadvise(POSIX_FADV_DONTNEED) on
every regular file under the given paths, then reports (via fincore(1)) how
many of their bytes are still resident.

    bench/shards/evict.py DIR_OR_FILE...

Prints one line: "EVICT files=N bytes=B resident_after=R" (R from fincore;
-1 when fincore is missing). DONTNEED drops clean pages only, so run it on
data nobody is writing.
"""

import os
import subprocess
import sys


def files_under(paths):
    for p in paths:
        if os.path.isfile(p):
            yield p
        for root, _, names in os.walk(p):
            for n in names:
                yield os.path.join(root, n)


def main():
    files = sorted(set(files_under(sys.argv[1:])))
    total = 0
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            total += os.fstat(fd).st_size
        finally:
            os.close(fd)
    resident = -1
    try:
        out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES"] + files[:2000],
                             capture_output=True, text=True, check=True).stdout
        resident = sum(int(x) for x in out.split())
    except (OSError, subprocess.CalledProcessError):
        pass
    print(f"EVICT files={len(files)} bytes={total} resident_after={resident}"
          + (" (fincore checked the first 2000 files)" if len(files) > 2000 else ""))


if __name__ == "__main__":
    main()
