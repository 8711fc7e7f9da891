"""Resume exactness: state_dict() -> a new loader -> the same next batches."""

import numpy as np
import pytest

import sluice


def take(loader, n):
    out = []
    it = iter(loader)
    for _ in range(n):
        b = next(it)
        out.append({k: np.array(v) for k, v in b.items()})  # copies
    return out


def assert_same(xs, ys):
    assert len(xs) == len(ys)
    for x, y in zip(xs, ys):
        assert x.keys() == y.keys()
        for k in x:
            np.testing.assert_array_equal(x[k], y[k])


def test_resume_mid_epoch_is_exact(train_plan):
    ref = train_plan.loader(threads=2)
    full = take(ref, 10)

    a = train_plan.loader(threads=2)
    take(a, 4)
    state = a.state_dict()
    assert state["epoch"] == 0 and state["position"] == 4 * 16
    assert state["spec_hash"] == train_plan.spec_hash
    assert state["consumed"] == [] and state["world_size"] == 0  # complete, a prefix

    b = train_plan.loader(threads=1)  # another thread count: same batches
    b.load_state_dict(state)
    assert_same(take(b, 6), full[4:10])


def test_resume_across_epochs_and_set_epoch(train_plan):
    ref = train_plan.loader(threads=2)
    for _ in ref:  # epoch 0
        pass
    epoch1 = take(ref, 3)
    assert not np.array_equal(epoch1[0]["image"], take(train_plan.loader(threads=2), 1)[0]["image"])

    c = train_plan.loader(threads=2)
    c.set_epoch(1)
    assert_same(take(c, 3), epoch1)
    d = train_plan.loader(threads=2, epoch=1)
    assert_same(take(d, 3), epoch1)


def test_relaxed_resume_skips_batches_delivered_ahead(train_plan):
    # A relaxed loader may deliver batch k+1 before batch k: its state lists the
    # sample ranges after `position` already consumed, and a restored loader
    # skips them.
    ref = take(train_plan.loader(threads=2), 6)
    a = train_plan.loader(threads=2)
    take(a, 1)
    state = a.state_dict()
    state["position"], state["consumed"] = 16, [[32, 48], [64, 80]]  # batches 0, 2, 4
    b = train_plan.loader(threads=2)
    b.load_state_dict(state)
    assert_same(take(b, 3), [ref[1], ref[3], ref[5]])
    minimal = {k: state[k] for k in ("epoch", "position", "spec_hash", "samples", "batch_size")}
    c = train_plan.loader(threads=2)
    c.load_state_dict(minimal)  # the optional keys default to nothing consumed beyond position
    assert_same(take(c, 2), ref[1:3])
    state["consumed"] = [[0, 16]]  # not after position
    with pytest.raises(sluice.InvalidArgumentError, match="not ascending after position"):
        b.load_state_dict(state)
    del minimal["samples"]
    with pytest.raises(sluice.InvalidArgumentError, match="no `samples`"):
        b.load_state_dict(minimal)


def test_state_at_epoch_end_points_to_next_epoch(eval_plan):
    loader = eval_plan.loader(threads=2)
    for _ in loader:
        pass
    s = loader.state_dict()
    assert (s["epoch"], s["position"]) == (1, 0)


def test_a_loop_of_exactly_len_batches_does_not_skip_the_next_epoch(eval_plan):
    # zip with a step counter stops after len(loader) batches without seeing
    # the epoch's end; the next `for` must run the next epoch, not nothing.
    loader = eval_plan.loader(threads=2)
    for epoch in range(3):
        got = [b["image"].epoch for _, b in zip(range(len(loader)), loader)]
        assert got == [epoch] * len(loader)
    assert loader.next() is None  # the end is still reported once to next()
    assert loader.next()["image"].epoch == 3


def test_torch_set_epoch_after_exactly_len_batches(eval_plan):
    torch = pytest.importorskip("torch")
    import sluice.torch as st
    loader = st.loader(eval_plan, threads=2)
    for epoch in range(3):
        loader.set_epoch(epoch)
        got = sum(1 for _, _ in zip(range(len(loader)), loader))
        assert got == len(loader), "epoch %d" % epoch
    assert loader.state_dict()["epoch"] == 3


def test_seed_override_changes_order(train_plan):
    a = take(train_plan.loader(threads=2), 1)[0]
    b = take(train_plan.loader(threads=2, seed=999), 1)[0]
    assert not np.array_equal(a["image"], b["image"])
