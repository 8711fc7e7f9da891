"""Elastic resume from Python (docs/distributed.md): N ranks' state_dict()s,
merged with sluice.merge_states, restore on M ranks, which deliver every
sample not yet delivered exactly once with equal batch counts. Over an image
folder (shuffle) and tar shards written by sluice.pack (shard_shuffle), with
strict and relaxed ordering, 4 -> 2, 2 -> 3 and 3 -> 3 at several positions."""

import collections
import os

import pytest

import sluice
from conftest import EVAL_SPEC, FAST_TARGETS, NUM_IMAGES

SHARD_SPEC = (EVAL_SPEC.replace("name: py_eval", "name: py_elastic_shards")
              .replace('source: {format: image_folder, path: "${DATA}"}',
                       'source: {format: tar_shards, path: "${DATA}"}')
              .replace("sampling: {order: shuffle, seed: 3, remainder: drop}",
                       "sampling: {order: shard_shuffle, seed: 3, remainder: drop, "
                       "shuffle_buffer: 16}"))


@pytest.fixture(scope="module")
def shard_plan(tmp_root, dataset):
    shards = os.path.join(tmp_root, "elastic_shards")
    if not os.path.isdir(shards):
        sluice.pack(dataset, shards, shard_size="64k", threads=2)
    out = os.path.join(tmp_root, "elastic_shards.plan")
    sluice.compile(SHARD_SPEC, out, cpu_targets=FAST_TARGETS, cuda=False)
    return sluice.load(out, vars={"DATA": shards})


def run(plan, world, take, state=None, relaxed=False):
    """Each of `world` ranks restores `state` (if any) and delivers `take`
    batches (None: the rest of the epoch). Returns (sample counts, batches per
    rank, state_dicts)."""
    counts = collections.Counter()
    batches, states = [], []
    for rank in range(world):
        loader = plan.loader(rank=rank, world_size=world, threads=1, prefetch=3,
                             relaxed_ordering=relaxed)
        if state is not None:
            loader.load_state_dict(state)
        got = 0
        it = iter(loader)
        for batch in it:
            counts.update(int(i) for i in batch["label"].sample_indices)
            got += 1
            if take is not None and got == take:
                break
        batches.append(got)
        states.append(loader.state_dict())
    return counts, batches, states


@pytest.mark.parametrize("relaxed", [False, True])
@pytest.mark.parametrize("source", ["folder", "shards"])
def test_resume_on_another_world_size_delivers_the_rest_once(eval_plan, shard_plan, source,
                                                               relaxed):
    plan = eval_plan if source == "folder" else shard_plan
    n = plan.loader(threads=1).dataset_size
    assert n == NUM_IMAGES
    for old, new in ((4, 2), (2, 3), (3, 3)):
        for take in (1, 3):
            before, _, states = run(plan, old, take, relaxed=relaxed)
            if relaxed:
                assert all(s["world_size"] == old for s in states)  # rank states
            else:
                assert all(s == states[0] for s in states)  # the same on every rank
            merged = sluice.merge_states(states)
            assert merged["world_size"] == 0
            consumed = merged["position"] + sum(e - b for b, e in merged["consumed"])
            assert consumed == sum(before.values()) == old * take * 8
            after, batches, _ = run(plan, new, None, state=merged, relaxed=relaxed)
            assert len(set(batches)) == 1, (old, new, take, batches)
            both = before + after
            assert max(both.values()) == 1, "a sample delivered twice"
            missing = n - len(both)
            assert 0 <= missing < new * 8  # drop: less than one step left over
            assert missing == (n - consumed) % (new * 8)


def test_merge_states_needs_every_rank_once(eval_plan):
    _, _, states = run(eval_plan, 3, 1, relaxed=True)
    with pytest.raises(sluice.InvalidArgumentError, match="missing"):
        sluice.merge_states(states[:2])
    with pytest.raises(sluice.InvalidArgumentError, match="repeats rank"):
        sluice.merge_states([states[0], states[0], states[1]])
    loader = eval_plan.loader(rank=0, world_size=2, threads=1, relaxed_ordering=True)
    with pytest.raises(sluice.InvalidArgumentError, match="merge"):
        loader.load_state_dict(states[1])  # a rank state of another world size
    assert sluice.local_rank() == int(os.environ.get("LOCAL_RANK", "0"))
