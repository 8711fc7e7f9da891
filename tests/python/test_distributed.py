"""Multi-rank as torchrun runs it: 4 processes on loopback with
torch.distributed (gloo), started with the environment torchrun would set
(Debian's torchrun fails on Python 3.11, so the test launches them itself):
disjoint samples, equal batch counts, a deterministic union per epoch."""

import json
import os
import socket
import subprocess
import sys

from conftest import require_module

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(world, script, args, tmp_path, timeout=240):
    """Starts `world` ranks of `script` like torchrun --nproc-per-node world."""
    port = free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                   LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   OMP_NUM_THREADS="1")
        log = open(os.path.join(str(tmp_path), "rank%d.log" % rank), "w")
        procs.append((subprocess.Popen([sys.executable, script] + args, env=env, stdout=log,
                                       stderr=subprocess.STDOUT), log))
    codes = []
    for p, log in procs:
        try:
            codes.append(p.wait(timeout=timeout))
        except subprocess.TimeoutExpired:
            for q, _ in procs:
                q.kill()
            raise
        finally:
            log.close()
    for rank, code in enumerate(codes):
        assert code == 0, open(os.path.join(str(tmp_path), "rank%d.log" % rank)).read()


def run_ranks(world, plan_dir, data, tmp_path, name):
    out = os.path.join(str(tmp_path), name + ".json")
    launch(world, os.path.join(HERE, "dist_worker.py"), [plan_dir, data, out], tmp_path)
    with open(out) as f:
        return json.load(f)


def test_four_ranks_on_loopback_share_each_epoch(train_plan_dir, dataset, tmp_path):
    require_module("torch.distributed")
    first = run_ranks(4, train_plan_dir, dataset, tmp_path, "first")
    assert [r["local_rank"] for r in first] == [0, 1, 2, 3]
    assert all(r["device"] in ("cpu", "cuda:%d" % i) for i, r in enumerate(first))
    per_rank = 240 // (4 * 16)  # 240 images, batches of 16, remainder drop
    for epoch in range(2):
        batches = [r["epochs"][epoch]["batches"] for r in first]
        assert batches == [per_rank] * 4
        assert all(r["len"] == per_rank for r in first)
        samples = [r["epochs"][epoch]["samples"] for r in first]
        union = set()
        for s in samples:
            assert len(s) == per_rank * 16
            assert union.isdisjoint(s)
            union.update(s)
        assert len(union) == 4 * per_rank * 16
    # Epochs reshuffle; the same job again gives the same union and split.
    assert first[0]["epochs"][0]["samples"] != first[0]["epochs"][1]["samples"]
    again = run_ranks(4, train_plan_dir, dataset, tmp_path, "again")
    for a, b in zip(first, again):
        assert a["epochs"] == b["epochs"]
    # After two whole epochs the gathered state is the start of epoch 2, on every rank.
    states = [r["state"] for r in first]
    assert all(s == states[0] for s in states)
    assert (states[0]["epoch"], states[0]["position"], states[0]["world_size"]) == (2, 0, 0)
