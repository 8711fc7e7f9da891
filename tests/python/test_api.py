"""compile / load / iterate, plan metadata, loader knobs, stats, and errors."""

import os

import numpy as np
import pytest

import sluice
from conftest import EVAL_SPEC, NUM_CLASSES, NUM_IMAGES


def test_import_exposes_api():
    for name in ("compile", "load", "Plan", "Loader", "Tensor", "SluiceError", "SpecError",
                 "Diagnostic"):
        assert hasattr(sluice, name), name
    assert issubclass(sluice.SpecError, sluice.SluiceError)
    assert issubclass(sluice.SpecError, ValueError)
    assert issubclass(sluice.UnsupportedError, NotImplementedError)


def test_compile_writes_plan(eval_plan_dir):
    for f in ("plan.json", "kernels.so", "report.txt"):
        assert os.path.isfile(os.path.join(eval_plan_dir, f)), f


def test_load_and_metadata(eval_plan, dataset):
    assert eval_plan.name == "py_eval"
    assert eval_plan.source_format == "image_folder"
    assert eval_plan.source_params["path"] == dataset  # ${DATA} bound
    assert eval_plan.fields == ["image", "label"]
    assert eval_plan.fused_fields == ["image"]
    assert eval_plan.reference_fields == {}
    assert len(eval_plan.spec_hash) > 8
    assert "x86-64-linux-sse41" in eval_plan.cpu_targets
    assert "fused" in eval_plan.report or len(eval_plan.report) > 0
    assert eval_plan.placement_device == "cpu"


def test_decode_step_and_memory_plan(eval_plan):
    # decode_pushdown and memory_planning decided these at compile time.
    assert eval_plan.decode_op == "decode_jpeg"
    assert eval_plan.decode_params == {
        "color": "rgb", "max_pixels": 100000000, "orientation": "ignore"}
    assert eval_plan.decode_pushdown == {"roi": True, "dct_scaling": True}  # one chain, resize
    memory = eval_plan.memory
    assert memory["batch_size"] == 8
    image, label = memory["fields"]
    assert (image["field"], image["dtype"], image["sample_shape"]) == ("image", "float32", (3, 32, 32))
    assert image["bytes_per_sample"] == 3 * 32 * 32 * 4
    assert image["offset"] == 0
    assert (label["field"], label["dtype"], label["bytes_per_sample"]) == ("label", "int64", 8)
    assert label["offset"] == 8 * 3 * 32 * 32 * 4
    assert memory["batch_bytes"] == 8 * 3 * 32 * 32 * 4 + 64
    assert memory["staged_batch_bytes"] == memory["batch_bytes"]


def test_iterate_one_epoch(eval_plan):
    loader = eval_plan.loader(threads=2)
    assert loader.batch_size == 8
    assert loader.dataset_size == NUM_IMAGES
    assert len(loader) == NUM_IMAGES // 8
    seen, order, n = set(), [], 0
    for b in loader:  # no batch kept: the pool has prefetch + 1 = 3 buffers
        n += 1
        assert set(b) == {"image", "label"}
        img, lab = b["image"], b["label"]
        assert img.dtype == "float32" and img.shape == (8, 3, 32, 32)
        assert lab.dtype == "int64" and lab.shape == (8,)
        assert img.epoch == 0 and img.batch_index == n - 1
        a = np.asarray(img)
        assert a.dtype == np.float32 and a.shape == (8, 3, 32, 32)
        assert np.isfinite(a).all()
        # Normalized pixels stay within the normalize range.
        assert a.min() >= (0 - 0.485) / 0.229 - 1e-3 and a.max() <= (1 - 0.406) / 0.225 + 1e-3
        assert a.std() > 0.1  # not a blank buffer
        labels = np.asarray(lab)
        assert ((labels >= 0) & (labels < NUM_CLASSES)).all()
        seen.update(img.sample_indices)
        order.append(img.sample_indices)
    assert n == NUM_IMAGES // 8
    # Shuffled without replacement: every sample exactly once per epoch.
    assert seen == set(range(NUM_IMAGES))
    # A second `for` runs the next epoch, in another order.
    second = [(b["image"].epoch, b["image"].sample_indices) for b in loader]
    assert len(second) == n
    assert all(e == 1 for e, _ in second)
    assert [s for _, s in second] != order


def test_keeping_every_batch_needs_copies(eval_plan):
    # list(loader) would hold every buffer of the fixed pool: a clear error.
    with pytest.raises(sluice.InvalidArgumentError, match="held by the caller"):
        list(eval_plan.loader(threads=2))


def test_labels_follow_class_folders(eval_plan):
    loader = eval_plan.loader(threads=2)
    for b in loader:
        idx = b["label"].sample_indices
        labels = np.asarray(b["label"])
        # Files are sorted within sorted class folders and image i went to
        # class i % 3: the first NUM_IMAGES/3 indices are class 0, and so on.
        per_class = NUM_IMAGES // NUM_CLASSES
        assert list(labels) == [i // per_class for i in idx]


def test_stats_and_knobs(eval_plan):
    loader = eval_plan.loader(threads=2, prefetch=3)
    n = sum(1 for _ in loader)
    s = loader.stats()
    assert s["batches"] == n and s["samples"] == n * 8
    assert s["threads"] == 2
    assert s["pool_buffers"] == 4  # prefetch + 1
    assert s["prefetch"] == 3
    assert s["online_tuning"] is False  # explicit knobs are not tuned online
    assert s["tuner_moves"] == 0
    assert s["batch_bytes"] >= 8 * 3 * 32 * 32 * 4
    assert s["consumer_wait_seconds"] >= 0
    with pytest.raises(TypeError, match="unknown loader override"):
        eval_plan.loader(thread=2)


def test_sharding(eval_plan):
    a = eval_plan.loader(rank=0, world_size=2, threads=1)
    b = eval_plan.loader(rank=1, world_size=2, threads=1)
    ia = {i for x in a for i in x["image"].sample_indices}
    ib = {i for x in b for i in x["image"].sample_indices}
    assert len(a) == len(b) == NUM_IMAGES // 2 // 8
    assert not (ia & ib)
    with pytest.raises(sluice.InvalidArgumentError, match="rank and world_size"):
        eval_plan.loader(rank=0)


def test_compile_to_temporary_dir_and_bind(dataset):
    from conftest import FAST_TARGETS

    plan = sluice.compile(EVAL_SPEC, cpu_targets=FAST_TARGETS, cuda=False)
    path = plan.path
    assert os.path.isfile(os.path.join(path, "plan.json"))
    bound = plan.bind(DATA=dataset)
    assert next(iter(bound.loader(threads=1)))["image"].shape == (8, 3, 32, 32)
    del plan, bound
    import gc

    gc.collect()
    assert not os.path.exists(path)  # temporary plan removed with its last Plan


# ---- errors ------------------------------------------------------------------

BAD_SPEC = """\
sluice: 1
name: bad
source: {format: image_folder, path: "${DATA}"}
graph:
  - decode_jpeg: {in: jpg, out: image}
  - random_resize_crop: {size: [8, 8]}
batch: {size: 2, fields: {image: image, label: cls}}
"""


def test_spec_error_has_file_line_col(tmp_path):
    spec = tmp_path / "bad.yaml"
    spec.write_text(BAD_SPEC)
    with pytest.raises(sluice.SpecError) as info:
        sluice.compile(str(spec), str(tmp_path / "bad.plan"))
    text = str(info.value)
    assert "%s:6:5: error: unknown op `random_resize_crop`" % spec in text
    assert "random_resized_crop" in text  # the hint
    assert info.value.code == "invalid_spec"
    assert (info.value.file, info.value.line, info.value.column) == (str(spec), 6, 5)
    assert not text.startswith("error:")


# Three mistakes, each with its own hint; the first (by position) is line 3.
MULTI_BAD_SPEC = """\
sluice: 1
name: multi_bad
source: {format: image_folder, path: /data, bogus: 3}
graph:
  - decode_jpeg: {in: jpg, out: image}
  - random_resize_crop: {size: [8, 8]}
batch: {size: 2, fields: {image: image, label: nope}}
"""


def test_spec_error_fields_are_the_first_diagnostic_and_list_all(tmp_path):
    spec = tmp_path / "multi.yaml"
    spec.write_text(MULTI_BAD_SPEC)
    with pytest.raises(sluice.SpecError) as info:
        sluice.compile(str(spec), str(tmp_path / "multi.plan"))
    e = info.value
    diags = e.diagnostics
    assert len(diags) == 3, diags
    assert all(isinstance(d, sluice.Diagnostic) for d in diags)
    assert [(d.file, d.line) for d in diags] == [(str(spec), 3), (str(spec), 6), (str(spec), 7)]
    assert [d.code for d in diags] == ["invalid_spec"] * 3
    # The exception's own fields are the first diagnostic's, one message each.
    first = diags[0]
    assert (e.message, e.hint, e.file, e.line, e.column) == (
        first.message, first.hint, first.file, first.line, first.column)
    assert e.message == "unknown parameter `bogus` in `source`"
    assert "`path`" in e.hint and "\n" not in e.message
    assert "unknown op `random_resize_crop`" in diags[1].message
    assert "random_resized_crop" in diags[1].hint
    # str(e): every mistake with its file:line:col and hint.
    text = str(e)
    for d in diags:
        assert "%s:%d:%d: error: %s" % (d.file, d.line, d.column, d.message) in text
        assert "hint: " + d.hint in text
    # Picklable (Ray sends exceptions between processes).
    import pickle

    back = pickle.loads(pickle.dumps(e))
    assert back.diagnostics == diags and back.message == e.message and str(back) == text


def test_non_spec_errors_have_one_diagnostic(tmp_path):
    with pytest.raises(sluice.NotFoundError) as info:
        sluice.load(str(tmp_path / "nope.plan"))
    e = info.value
    assert len(e.diagnostics) == 1
    assert (e.diagnostics[0].code, e.diagnostics[0].message) == ("not_found", e.message)


def test_spec_error_from_text():
    with pytest.raises(sluice.SpecError, match=r"<string>:6:5: error: unknown op"):
        sluice.compile(BAD_SPEC)


FLOW_SPEC = ("{sluice: 1, name: flow, source: {format: image_folder, path: \"${DATA}\"}, "
             "graph: [{decode_jpeg: {in: jpg, out: image}}, {center_crop: {size: [8, 8]}}], "
             "batch: {size: 2, fields: {image: image, label: cls}}}")


def test_one_line_flow_style_spec_is_text(dataset):
    from conftest import FAST_TARGETS

    plan = sluice.compile(FLOW_SPEC, cpu_targets=FAST_TARGETS, cuda=False,
                          vars={"DATA": dataset})
    assert plan.name == "flow"
    assert next(iter(plan.loader(threads=1)))["image"].shape == (2, 8, 8, 3)
    # Leading blanks do not change the rule.
    with pytest.raises(sluice.SpecError, match=r"<string>:1:"):
        sluice.compile("  {sluice: 1, name: flow}")


def test_missing_spec_path_says_how_text_is_told_apart(tmp_path):
    with pytest.raises(sluice.NotFoundError) as info:
        sluice.compile(str(tmp_path / "no_such.yaml"))
    e = info.value
    assert "no_such.yaml" in e.message
    assert "newline" in e.hint and "`{`" in e.hint and "`sluice:`" in e.hint


def test_unbound_variable(eval_plan_dir):
    with pytest.raises(sluice.InvalidArgumentError) as info:
        sluice.load(eval_plan_dir)  # ${DATA} not bound
    assert "DATA" in str(info.value)


def test_missing_plan_and_data(tmp_path, eval_plan_dir):
    with pytest.raises(sluice.NotFoundError):
        sluice.load(str(tmp_path / "nope.plan"))
    plan = sluice.load(eval_plan_dir, vars={"DATA": str(tmp_path / "no_such_dir")})
    with pytest.raises(sluice.NotFoundError):
        plan.loader()


def test_missing_profile_file(tmp_path):
    # profile= is a hardware profile file (tests/python/test_placement.py).
    from conftest import FAST_TARGETS
    with pytest.raises(sluice.NotFoundError):
        sluice.compile(EVAL_SPEC, profile=str(tmp_path / "no_hw.yaml"),
                       cpu_targets=FAST_TARGETS, cuda=False)


def test_bad_state_dict(eval_plan):
    loader = eval_plan.loader(threads=1)
    with pytest.raises(sluice.InvalidArgumentError):
        loader.load_state_dict({"epoch": 0, "position": 0, "spec_hash": "0000"})
    with pytest.raises(sluice.InvalidArgumentError, match="position"):
        loader.load_state_dict({"epoch": 0, "spec_hash": eval_plan.spec_hash})


def test_vars_accept_path_like(eval_plan_dir, dataset):
    import pathlib

    plan = sluice.load(pathlib.Path(eval_plan_dir), vars={"DATA": pathlib.Path(dataset)})
    assert plan.vars == {"DATA": str(dataset)}
    assert next(iter(plan.loader(threads=1)))["image"].shape == (8, 3, 32, 32)
    rebound = plan.bind(DATA=pathlib.Path(dataset))
    assert rebound.vars == {"DATA": str(dataset)}
    with pytest.raises(sluice.InvalidArgumentError, match="DATA"):
        sluice.load(eval_plan_dir, vars={"DATA": 3})


@pytest.mark.parametrize("knob", ["threads", "prefetch", "in_flight"])
@pytest.mark.parametrize("value", [0, -1, -5, 2.5, "4", True])
def test_bad_loader_knob_is_invalid_argument(eval_plan, knob, value):
    with pytest.raises(sluice.InvalidArgumentError, match=knob + " must be a positive int"):
        eval_plan.loader(**{knob: value})


def test_knob_none_is_auto(eval_plan):
    loader = eval_plan.loader(threads=None, prefetch=None, in_flight=None)
    assert loader.stats()["threads"] >= 1


def test_negative_epoch_and_seed_are_invalid_argument(eval_plan):
    with pytest.raises(sluice.InvalidArgumentError, match="epoch must be an int >= 0"):
        eval_plan.loader(threads=1, epoch=-1)
    with pytest.raises(sluice.InvalidArgumentError, match="seed must be an int >= 0"):
        eval_plan.loader(threads=1, seed=-1)
    loader = eval_plan.loader(threads=1, epoch=0, seed=0)
    with pytest.raises(sluice.InvalidArgumentError, match="epoch must be an int >= 0"):
        loader.set_epoch(-1)
    loader.set_epoch(1)
    assert loader.state_dict()["epoch"] == 1
