"""sluice.ray on a local Ray cluster of two fake nodes (ray.cluster_utils.Cluster),
started once for the module: the datasource and the actor loader deliver the
batches a local loader does, survive a killed actor, resume and resize."""

import collections
import os
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
    return local_batches_of(plan, epoch=epoch)


def local_batches_of(plan, **kw):
    """local_batches of a loader with plan.loader(**kw) (rank, world_size, ...)."""
    out = {}
    loader = plan.loader(threads=2, **kw)
    for b in loader:
        t = next(iter(b.values()))
        out[t.batch_index] = {k: np.array(v) for k, v in b.items()}
    return out


def assert_batch(got, want):
    assert sorted(k for k in got if not k.startswith("sluice_")) == sorted(want)
    for k in want:
        np.testing.assert_array_equal(np.asarray(got[k]), want[k])


def assert_epoch(got, want):
    """`got` is the epoch `want`: every batch once, in order, equal."""
    assert [b.index for b in got] == list(range(len(want)))
    for b in got:
        assert_batch(b, want[b.index])


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
        assert_epoch(list(loader), want)
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
        assert_epoch(list(loader), want)
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


def test_datasource_rank_view_matches_the_rank_loader(sray, ray_mod, eval_plan):
    # rank=1 of 2: the rank loader's batches (it read world-size-1 batch
    # indices as the rank's and lost three of them), and the tracker's state is
    # a rank state that the rank's local loader and a new datasource continue.
    want = local_batches_of(eval_plan, rank=1, world_size=2)
    src = sray.SluiceDatasource(eval_plan, rank=1, world_size=2)
    got = group_rows(ray_mod.data.read_datasource(src, override_num_blocks=2).iter_batches(
        batch_size=None, batch_format="numpy"), ["image", "label"])
    assert sorted(got) == sorted(want)
    for k in want:
        assert_batch(got[k], want[k])
    tracker = src.tracker()
    for k in (0, 1, 2, 5):
        tracker.add(k)
    state = tracker.state_dict()
    rest = [k for k in sorted(want) if k not in (0, 1, 2, 5)]
    assert sray.SluiceDatasource(eval_plan, rank=1, world_size=2, state=state).batches == rest
    local = eval_plan.loader(threads=1, rank=1, world_size=2)
    local.load_state_dict(state)
    assert [next(iter(b.values())).batch_index for b in local] == rest
    with pytest.raises(sluice.InvalidArgumentError, match="rank 1's of 2"):
        sray.SluiceDatasource(eval_plan, rank=0, world_size=2, state=state)


@pytest.fixture(scope="module")
def shard_plan(tmp_root, dataset):
    from conftest import EVAL_SPEC, FAST_TARGETS

    shards = os.path.join(tmp_root, "ray_shards")
    sluice.pack(dataset, shards, shard_size="64k", threads=2)
    spec = (EVAL_SPEC.replace("name: py_eval", "name: py_ray_shards")
            .replace('format: image_folder', 'format: tar_shards')
            .replace("order: shuffle", "order: shard_shuffle, shuffle_buffer: 16"))
    out = os.path.join(tmp_root, "ray_shards.plan")
    sluice.compile(spec, out, cpu_targets=FAST_TARGETS, cuda=False)
    return sluice.load(out, vars={"DATA": shards})


def test_shard_shuffle_plan_on_actors_and_datasource(sray, ray_mod, shard_plan):
    # A shard_shuffle state with consumed samples must name order_world_size:
    # without it every actor but the one starting at batch 0 failed.
    want = local_batches(shard_plan)
    loader = sray.ActorLoader(shard_plan, num_actors=2)
    try:
        assert_epoch(list(loader), want)
    finally:
        loader.shutdown()
    src = sray.SluiceDatasource(shard_plan)
    got = group_rows(ray_mod.data.read_datasource(src, override_num_blocks=3).iter_batches(
        batch_size=None, batch_format="numpy"), ["image", "label"])
    assert sorted(got) == sorted(want)
    for k in want:
        assert_batch(got[k], want[k])
    # A mid-epoch state of a 2-rank job has another epoch order: refused.
    two = shard_plan.loader(threads=1, rank=0, world_size=2)
    next(iter(two))
    with pytest.raises(sluice.InvalidArgumentError, match="world size 2"):
        sray.ActorLoader(shard_plan, num_actors=1).load_state_dict(two.state_dict())


def test_actor_loader_checks_arguments_on_the_driver(sray, ray_mod, eval_plan):
    # These failed inside the actor (a Ray ActorDiedError), or for epoch=-1 as
    # a TypeError from an unpacked None.
    for kw in (dict(threads=0), dict(prefetch=0), dict(seed=-1), dict(epoch=-1),
               dict(max_restarts=-1)):
        with pytest.raises(sluice.InvalidArgumentError):
            sray.ActorLoader(eval_plan, num_actors=1, **kw)
    for kw in (dict(thread=2), dict(relaxed_ordering=True)):
        with pytest.raises(TypeError, match="unknown loader override"):
            sray.ActorLoader(eval_plan, num_actors=1, **kw)
    with pytest.raises(sluice.InvalidArgumentError):
        sray.SluiceDatasource(eval_plan, threads=0)


def test_states_of_other_data_or_ranks_are_refused():
    # The actor loader's driver checks states itself (it never opens the data).
    from sluice._ray_common import Delivered

    template = {"epoch": 0, "position": 0, "spec_hash": "h", "samples": 240, "batch_size": 8,
                "consumed": [], "order_world_size": 0, "world_size": 0, "rank": 0,
                "rank_position": 0, "rank_ahead": []}
    d = Delivered(template, 8, 30)
    with pytest.raises(sluice.InvalidArgumentError, match="samples 480"):
        d.reset(dict(template, samples=480, position=16))
    with pytest.raises(sluice.InvalidArgumentError, match="rank 1's of 2"):
        d.reset(dict(template, world_size=2, rank=1, rank_position=16))
    d.reset(dict(template, position=16, consumed=[[32, 40]], order_world_size=1))
    assert d.state_dict()["position"] == 16 and d.remaining()[:2] == [2, 3]


def _delivered_until_error(batches):
    """(batches delivered, the error raised) of iterating `batches`."""
    n = 0
    try:
        for _ in batches:
            n += 1
    except sluice.CorruptDataError as e:
        return n, e
    return n, None


def _five_bad_of_48(dataset, root):
    """48 of the suite's JPEGs under root/class_0, 5 of them empty files."""
    from conftest import dataset_files

    os.makedirs(root / "class_0")
    for i, src in enumerate(dataset_files(dataset)[:48]):
        dst = root / "class_0" / ("img_%03d.jpg" % i)
        if i in (3, 10, 26, 35, 44):
            dst.write_bytes(b"")  # empty: a decode error
        else:
            dst.write_bytes(open(src, "rb").read())
    return str(root)


def test_max_fraction_counts_the_whole_epoch_over_actors(sray, ray_mod, tmp_path, dataset,
                                                         train_plan_dir):
    # 5 of 48 files bad under skip, max_fraction 0.1: 5 > 4.8 fails a local
    # loader. Each of two actors (or read tasks) met only some of them and
    # passed: the budget was per worker, not per epoch.
    plan = sluice.load(train_plan_dir, vars={"DATA": _five_bad_of_48(dataset, tmp_path / "bad")})
    local = plan.loader(threads=1)
    n_local, local_error = _delivered_until_error(local)
    assert local_error is not None
    head = str(local_error).split("; last:")[0]
    assert "5 distinct bad samples in epoch 0 exceed on_error.max_fraction" in head
    loader = sray.ActorLoader(plan, num_actors=2)
    try:
        n, error = _delivered_until_error(loader)
        assert error is not None and n == n_local
        assert str(error).split("; last:")[0] == head
        assert error.hint == local_error.hint
        with pytest.raises(sluice.CorruptDataError):  # until a restore, like a local loader
            loader.next()
        assert loader.state_dict() == local.state_dict()  # the failed batch counts as delivered
    finally:
        loader.shutdown()
    src = sray.SluiceDatasource(plan)
    ds = ray_mod.data.read_datasource(src, override_num_blocks=2)
    with pytest.raises(sluice.CorruptDataError, match="exceed on_error.max_fraction"):
        for _ in ds.iter_batches(batch_size=None):
            pass


def _walk_with_errors(next_batch):
    """One epoch of next_batch(): each batch's index, or for a batch whose
    loader failed the bad file its error names."""
    import re

    out = []
    while True:
        try:
            b = next_batch()
        except sluice.CorruptDataError as e:
            out.append(re.search(r"img_\d+\.jpg", str(e)).group(0))
            continue
        if b is None:
            return out
        out.append(b.index if hasattr(b, "index") else next(iter(b.values())).batch_index)


def test_actor_loader_error_comes_in_its_batch_place(sray, ray_mod, tmp_path, dataset,
                                                     eval_plan_dir):
    # on_error: fail (batches 0, 1, 2 and 5 of 6 hold a bad file). The error
    # of a batch reached the trainer when its actor returned it, ahead of the
    # other actor's earlier batches, and the actor then lost count of its
    # batches; now it comes in the batch's place, as from a local loader.
    plan = sluice.load(eval_plan_dir, vars={"DATA": _five_bad_of_48(dataset, tmp_path / "bad")})
    want = _walk_with_errors(plan.loader(threads=1).next)
    assert any(isinstance(w, str) for w in want) and any(isinstance(w, int) for w in want)
    loader = sray.ActorLoader(plan, num_actors=2, depth=3)
    try:
        assert _walk_with_errors(loader.next) == want
        assert loader.state_dict() == plan.loader(threads=1, epoch=1).state_dict()
    finally:
        loader.shutdown()


def test_set_epoch_keeps_a_restored_position(sray, ray_mod, eval_plan):
    # The DDP loop restores a mid-epoch state, then calls set_epoch(epoch) at
    # the top of the epoch: it restarted the epoch and repeated 3 batches.
    want = local_batches(eval_plan, 1)
    local = eval_plan.loader(threads=1, epoch=1)
    it = iter(local)
    for _ in range(3):
        next(it)
    state = local.state_dict()
    loader = sray.ActorLoader(eval_plan, num_actors=2)
    try:
        loader.set_epoch(0)  # fresh in epoch 0: nothing to do
        loader.load_state_dict(state)
        loader.set_epoch(1)
        got = list(loader)
        assert [b.index for b in got] == list(range(3, len(want)))
        for b in got:
            assert_batch(b, want[b.index])
        assert loader.state_dict()["epoch"] == 2
        loader.set_epoch(2)  # the epoch just started: kept
        assert loader.next().index == 0
        loader.set_epoch(1)  # another epoch: from its beginning
        assert [b.index for b in loader] == list(range(len(want)))
    finally:
        loader.shutdown()


def test_bfloat16_fields_travel_as_bits(sray, ray_mod, bf16_plan):
    # numpy has no bfloat16: the actor's np.asarray raised UnsupportedError
    # even with output="torch", and a read task's np.array did too.
    torch = require_module("torch")
    want = {}
    for b in bf16_plan.loader(threads=1):
        t = next(iter(b.values()))
        want[t.batch_index] = {k: torch.from_dlpack(v).clone() for k, v in b.items()}
        if len(want) == 3:
            break
    loader = sray.ActorLoader(bf16_plan, num_actors=1, output="torch")
    try:
        for k in range(3):
            b = loader.next()
            assert b.index == k and b["image"].dtype == torch.bfloat16
            for f in want[k]:
                assert torch.equal(b[f], want[k][f])
    finally:
        loader.shutdown()
    with pytest.raises(sluice.UnsupportedError, match="`image` is bfloat16") as e:
        sray.ActorLoader(bf16_plan, num_actors=1)
    assert 'output="torch"' in e.value.hint
    with pytest.raises(sluice.UnsupportedError, match="`image` is bfloat16"):
        sray.SluiceDatasource(bf16_plan)
    src = sray.SluiceDatasource(bf16_plan, bfloat16="bits")
    src._todo = [0, 1, 2]  # three batches are enough
    got = group_rows(ray_mod.data.read_datasource(src, override_num_blocks=1).iter_batches(
        batch_size=None, batch_format="numpy"), ["image", "label"])
    assert sorted(got) == [0, 1, 2]
    for k in got:
        assert got[k]["image"].dtype == np.int16
        image = torch.from_numpy(got[k]["image"]).view(torch.bfloat16)
        assert torch.equal(image, want[k]["image"])
