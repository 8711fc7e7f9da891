"""examples/python/ddp_resume.py: DDP on 2 ranks over loopback (gloo) for a
few steps, a checkpoint holding the loader state, resumed on 1 rank, which
trains on exactly the samples the two ranks had not consumed."""

import json
import os

from conftest import NUM_IMAGES, require_module
from test_distributed import launch

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                       "python", "ddp_resume.py")


def results(tmp_path, world):
    out = []
    for rank in range(world):
        with open(os.path.join(str(tmp_path), "rank%d.log" % rank)) as f:
            lines = [l for l in f if l.startswith("{")]
        out.append(json.loads(lines[-1]))
    return out


def test_ddp_two_ranks_then_resume_on_one(train_plan_dir, dataset, tmp_path):
    require_module("torch.distributed")
    ckpt = os.path.join(str(tmp_path), "ck.pt")
    args = ["--plan", train_plan_dir, "--data", dataset, "--ckpt", ckpt, "--steps", "3"]
    launch(2, EXAMPLE, args, tmp_path)
    first = results(tmp_path, 2)
    assert [r["steps"] for r in first] == [3, 3]
    assert first[0]["state"] == first[1]["state"]
    state = first[0]["state"]
    assert (state["epoch"], state["position"], state["consumed"]) == (0, 2 * 3 * 16, [])
    assert os.path.exists(ckpt)

    launch(1, EXAMPLE, args + ["--resume"], tmp_path)
    (second,) = results(tmp_path, 1)
    remaining = NUM_IMAGES - 2 * 3 * 16
    assert second["world"] == 1
    assert second["samples"] == (remaining // 16) * 16  # the rest, drop: whole batches
    assert second["loss"] == second["loss"]  # finite, not NaN
    assert (second["state"]["epoch"], second["state"]["position"]) == (1, 0)
