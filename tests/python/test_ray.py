"""sluice.ray on a local Ray cluster of two fake nodes (ray.cluster_utils.Cluster),
started once for the module: the datasource and the actor loader deliver the
batches a local loader does, survive a killed actor, resume and resize."""

import collections
import threading

import numpy as np
import pytest

import sluice
from conftest import require_module


@pytest.fixture(scope="module")
def ray_mod():
    ray = require_module("ray")
    require_module("ray.data")
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2})
    cluster.add_node(num_cpus=2)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    yield ray
    ray.shutdown()
    cluster.shutdown()


@pytest.fixture(scope="module")
def sray(ray_mod):
    import sluice.ray

    return sluice.ray


def local_batches(plan, epoch=0):
    """{batch index: {field: array}} of one epoch of a local loader."""
    out = {}
    loader = plan.loader(threads=2, epoch=epoch)
    for b in loader:
        t = next(iter(b.values()))
        out[t.batch_index] = {k: np.array(v) for k, v in b.items()}
    return out


def assert_batch(got, want):
    assert sorted(k for k in got if not k.startswith("sluice_")) == sorted(want)
    for k in want:
        np.testing.assert_array_equal(np.asarray(got[k]), want[k])


def group_rows(batches, fields):
    """Regroups Ray Data numpy batches by their sluice_batch column."""
    rows = collections.defaultdict(lambda: collections.defaultdict(list))
    for b in batches:
        for j, k in enumerate(b["sluice_batch"].tolist()):
            for f in fields + ["sluice_sample"]:
                rows[k][f].append(b[f][j])
    return {k: {f: np.stack(v) for f, v in d.items()} for k, d in rows.items()}


def test_datasource_reads_local_batches(sray, ray_mod, train_plan):
    want = local_batches(train_plan)
    src = sray.SluiceDatasource(train_plan)
    ds = ray_mod.data.read_datasource(src, override_num_blocks=3)
    tracker = src.tracker()
    got = {}
    for b in ds.iter_batches(batch_size=16, batch_format="numpy"):
        assert len(set(b["sluice_batch"].tolist())) == 1  # blocks hold whole batches
        got[int(b["sluice_batch"][0])] = b
        tracker.update(b)
    assert sorted(got) == sorted(want)
    for k in want:
        assert_batch(got[k], want[k])
    assert tracker.state_dict()["epoch"] == 1 and tracker.state_dict()["position"] == 0


def test_datasource_resume_and_streaming_split(sray, ray_mod, eval_plan):
    want = local_batches(eval_plan, epoch=2)
    # Batches 0-4, 7 and 9 of epoch 2 delivered, in the loader's own state form.
    from sluice._ray_common import make_state
    template = eval_plan.loader(threads=1).state_dict()
    state = make_state(template, 2, 5, [7, 9], 8)
    src = sray.SluiceDatasource(eval_plan, state=state)
    todo = [k for k in range(5, len(want)) if k not in (7, 9)]
    assert src.batches == todo
    ds = ray_mod.data.read_datasource(src, override_num_blocks=4)
    splits = ds.streaming_split(2, equal=False)
    seen = [[], []]

    def consume(i):  # the splits are consumed concurrently, as Ray Train's workers do
        seen[i].extend(splits[i].iter_batches(batch_size=None, batch_format="numpy"))

    threads = [threading.Thread(target=consume, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    seen = seen[0] + seen[1]
    got = group_rows(seen, ["image", "label"])
    assert sorted(got) == todo  # every remaining batch exactly once
    for k in todo:
        assert_batch(got[k], want[k])
        assert len(got[k]["sluice_sample"]) == 8
    # A local loader continues from the datasource's state the same way.
    local = eval_plan.loader(threads=1)
    local.load_state_dict(state)
    firsts = [next(iter(x.values())).batch_index for x in local]
    assert firsts == todo


@pytest.mark.parametrize("ordering", ["strict", "relaxed"])
def test_actor_loader_matches_local_over_two_epochs(sray, ray_mod, train_plan, ordering):
    want = [local_batches(train_plan, 0), local_batches(train_plan, 1)]
    loader = sray.ActorLoader(train_plan, num_actors=2, ordering=ordering)
    try:
        assert len(loader) == len(want[0])
        for epoch in (0, 1):
            got = list(loader)
            idx = [b.index for b in got]
            if ordering == "strict":
                assert idx == list(range(len(want[epoch])))
            assert sorted(idx) == list(range(len(want[epoch])))
            for b in got:
                assert b.epoch == epoch
                assert_batch(b, want[epoch][b.index])
        assert loader.state_dict()["epoch"] == 2
    finally:
        loader.shutdown()


def test_actors_on_both_nodes(sray, ray_mod, eval_plan):
    # Each actor reserves a whole (2-CPU) node, so the second runs on the second node;
    # its batches come through the object store across "nodes".
    want = local_batches(eval_plan)
    loader = sray.ActorLoader(eval_plan, num_actors=2, threads=2)
    try:
        infos = ray_mod.get([a.info.remote() for a in loader.actors])
        assert len({i["node_id"] for i in infos}) == 2
        got = list(loader)
        assert [b.index for b in got] == list(range(len(want)))
        for b in got:
            assert_batch(b, want[b.index])
    finally:
        loader.shutdown()


def test_killed_actor_is_replaced_without_loss_or_repeat(sray, ray_mod, eval_plan):
    want = local_batches(eval_plan)
    loader = sray.ActorLoader(eval_plan, num_actors=2, output="torch")
    try:
        got = [loader.next() for _ in range(5)]
        ray_mod.kill(loader.actors[1], no_restart=True)
        while True:
            b = loader.next()
            if b is None:
                break
            got.append(b)
        assert [b.index for b in got] == list(range(len(want)))
        for b in got:
            assert_batch({k: v.numpy() for k, v in b.items()}, want[b.index])
        assert loader.stats()["restarts"] == 1
        # The replacement serves the next epoch too.
        assert len(list(loader)) == len(want)
    finally:
        loader.shutdown()


def test_actor_resume_resize_and_local_interchange(sray, ray_mod, eval_plan):
    want = local_batches(eval_plan)
    a = sray.ActorLoader(eval_plan, num_actors=2, ordering="relaxed")
    try:
        first = [a.next() for _ in range(7)]
        state = a.state_dict()
    finally:
        a.shutdown()
    delivered = {b.index for b in first}
    from sluice._ray_common import state_batches
    next_batch, ahead = state_batches(state, 8)
    assert next_batch == min(set(range(len(want))) - delivered)
    assert ahead == {k for k in delivered if k > next_batch}
    # Resume on 3 actors, resize to 1 mid-epoch: every other batch exactly once.
    b = sray.ActorLoader(eval_plan, num_actors=3)
    try:
        b.load_state_dict(state)
        rest = [b.next() for _ in range(4)]
        b.resize(1)
        while True:
            x = b.next()
            if x is None:
                break
            rest.append(x)
        assert sorted(x.index for x in rest) == sorted(set(range(len(want))) - delivered)
        for x in rest:
            assert_batch(x, want[x.index])
        assert b.stats()["actors"] == 1 and b.stats()["resizes"] == 1
    finally:
        b.shutdown()
    # The actor state restores into a local loader (and vice versa).
    local = eval_plan.loader(threads=1)
    local.load_state_dict(state)
    assert sorted(next(iter(x.values())).batch_index for x in local) == sorted(
        set(range(len(want))) - delivered)


def test_autoscale_policy_decisions(sray):
    p = sray.AutoscalePolicy(min_actors=1, max_actors=3, high_wait=0.2, low_wait=0.02)
    assert p.decide(2, 0.5) == 3
    assert p.decide(3, 0.5) == 3
    assert p.decide(2, 0.1) == 2
    assert p.decide(2, 0.0) == 1
    assert p.decide(1, 0.0) == 1
    assert sray.AutoscalePolicy(max_actors=None).decide(4, 0.9, cluster_limit=4) == 4
    with pytest.raises(sluice.InvalidArgumentError):
        sray.AutoscalePolicy(min_actors=3, max_actors=2)


def test_autoscale_applies_at_epoch_end(sray, ray_mod, eval_plan):
    # high_wait below zero: every window asks for one more actor, up to 3.
    policy = sray.AutoscalePolicy(min_actors=1, max_actors=3, high_wait=-1.0, low_wait=-2.0,
                                  interval_s=1e9)
    want = local_batches(eval_plan, 1)
    loader = sray.ActorLoader(eval_plan, num_actors=1, autoscale=policy)
    try:
        assert loader.stats()["actors"] == 1
        assert len(list(loader)) == len(want)  # ends with the epoch-end call: 1 -> 2 actors
        assert loader.stats()["actors"] == 2 and loader.stats()["resizes"] == 1
        got = list(loader)
        assert [b.index for b in got] == list(range(len(want)))
        for b in got:
            assert_batch(b, want[b.index])
    finally:
        loader.shutdown()


def test_state_dialects_round_trip():
    # sluice.ray writes states in the dialect of the loader's own state_dict():
    # "delivered_ahead" (batch indices) or "consumed" (ranges of epoch positions).
    from sluice._ray_common import make_state, remaining_batches, state_batches

    v1 = {"epoch": 0, "position": 0, "spec_hash": "h", "delivered_ahead": []}
    s = make_state(v1, 3, 2, [5, 4, 7], 8)
    assert s == {"epoch": 3, "position": 16, "spec_hash": "h", "delivered_ahead": [4, 5, 7]}
    assert state_batches(s, 8) == (2, {4, 5, 7})
    v2 = {"epoch": 0, "position": 0, "spec_hash": "h", "consumed": [], "samples": 240}
    s = make_state(v2, 3, 2, [5, 4, 7], 8)
    assert s == {"epoch": 3, "position": 16, "spec_hash": "h", "consumed": [[32, 48], [56, 64]],
                 "samples": 240}
    assert state_batches(s, 8) == (2, {4, 5, 7})
    assert remaining_batches(s, 8, 9) == [2, 3, 6, 8]
    with pytest.raises(sluice.InvalidArgumentError, match="not whole batches"):
        state_batches(dict(s, consumed=[[33, 48]]), 8)
