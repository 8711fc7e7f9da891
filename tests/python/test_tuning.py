"""sluice.profile and Plan.tune: profile -> tune -> load from Python."""

import json
import os
import shutil

import pytest

import sluice


@pytest.fixture(scope="module")
def hw_profile(tmp_root, dataset):
    path = os.path.join(tmp_root, "hw.yaml")
    assert sluice.profile(out=path, data=dataset, seconds=3, machine="pytest box") == path
    return path


def test_profile_file_has_the_measurements(hw_profile):
    text = open(hw_profile, encoding="utf-8").read()
    assert text.startswith("# Sluice hardware profile")
    assert 'machine: "pytest box"' in text
    assert "decode_mpix_per_s:" in text and "storage:" in text
    assert "gpu: null" in text


def test_profile_dict():
    p = sluice.profile(seconds=2)
    assert p["format_version"] == 1
    assert p["cpu"]["cores"] >= 1
    assert p["cpu"]["simd"] in ("sse41", "avx2", "avx512")
    for key in ("decode_mpix_per_s", "resample_ns_per_px", "pointwise_ns_per_elem",
                "memory_bandwidth_gbps"):
        assert p["cpu"][key] > 0, key
    assert p["storage"] is None and p["gpu"] is None


def test_profile_bad_data_path_raises():
    with pytest.raises(sluice.NotFoundError):
        sluice.profile(data="/nonexistent/sluice/data", seconds=1)
    with pytest.raises(sluice.InvalidArgumentError):
        sluice.profile(seconds=0)


def test_tune_writes_knobs_the_loader_uses(tmp_root, train_plan_dir, dataset, hw_profile):
    plan_dir = os.path.join(tmp_root, "tuned.plan")
    shutil.rmtree(plan_dir, ignore_errors=True)
    shutil.copytree(train_plan_dir, plan_dir)
    plan = sluice.load(plan_dir, vars={"DATA": dataset})
    result = plan.tune(hw_profile, cpu_budget=1, seconds=4)
    assert result["threads"] == 1  # within the CPU budget
    assert 1 <= result["in_flight"] <= result["threads"]
    assert result["prefetch"] >= 1
    assert result["images_per_second"] > 0
    # The spec sets prefetch: 2 explicitly, so it is held; with one core and
    # in_flight <= threads nothing else can move: one trial is the whole search.
    assert result["trials"] and all(t["prefetch"] == 2 and t["threads"] == 1
                                    for t in result["trials"])
    tuned = json.load(open(os.path.join(plan_dir, "plan.json")))["tuned"]
    assert tuned["threads"] == result["threads"]
    assert tuned["prefetch"] == result["prefetch"]
    assert tuned["cpu_budget"] == 1
    # The rest of plan.json is intact: the plan still loads and runs.
    loader = sluice.load(plan_dir, vars={"DATA": dataset}).loader()
    batch = loader.next()
    assert batch is not None
    assert loader.stats()["threads"] == 1


def test_tune_missing_profile_raises(train_plan):
    with pytest.raises(sluice.NotFoundError):
        train_plan.tune("/nonexistent/hw.yaml", seconds=2)


def test_tune_malformed_profile_names_its_line(tmp_path, train_plan):
    # The error crossed the binding as a {"error": ...} dict and lost its
    # location: file "", line 0, and the position only inside the message.
    path = str(tmp_path / "hw.yaml")
    with open(path, "w") as f:
        f.write('format_version: 1\nmachine: "x"\ncpu:\n  cores: many\n')
    with pytest.raises(sluice.SpecError) as e:
        train_plan.tune(path, seconds=2)
    err = e.value
    assert (err.file, err.line, err.column) == (path, 4, 10)
    assert err.message == "`cpu.cores` must be an integer, got `many`"
    assert str(err).startswith(path + ":4:10: error: ")
    assert [(d.file, d.line, d.column) for d in err.diagnostics] == [(path, 4, 10)]


def test_merge_states_errors_are_sluice_errors():
    # merge_states / local_rank errors take the same path (no error dicts).
    with pytest.raises(sluice.InvalidArgumentError, match="no `position`") as e:
        sluice.merge_states([{"epoch": 0}])
    assert e.value.diagnostics and e.value.diagnostics[0].code == "invalid_argument"


def test_tune_searches_within_a_two_core_budget(tmp_root, train_plan_dir, dataset, hw_profile):
    plan_dir = os.path.join(tmp_root, "tuned2.plan")
    shutil.rmtree(plan_dir, ignore_errors=True)
    shutil.copytree(train_plan_dir, plan_dir)
    result = sluice.tune(plan_dir, hw_profile, cpu_budget=2, seconds=6, vars={"DATA": dataset})
    trials = result["trials"]
    assert len(trials) >= 2  # the start (2 threads) and at least one neighbour
    assert trials[0]["threads"] == 2 and trials[0]["note"] == "start"
    assert all(1 <= t["threads"] <= 2 and 1 <= t["in_flight"] <= t["threads"] for t in trials)
    assert all(t["prefetch"] == 2 for t in trials)  # the spec's explicit value
    assert (result["threads"], result["in_flight"]) in {(t["threads"], t["in_flight"])
                                                         for t in trials}
    tuned = json.load(open(os.path.join(plan_dir, "plan.json")))["tuned"]
    assert tuned["cpu_budget"] == 2 and tuned["threads"] == result["threads"]


@pytest.mark.parametrize("kw", [dict(cpu_budget=0), dict(cpu_budget=-2), dict(cpu_budget=True),
                                dict(memory_budget=0), dict(memory_budget=-1),
                                dict(seconds=0), dict(seconds=1), dict(seconds=4000)])
def test_tune_refuses_out_of_range_budgets(train_plan, hw_profile, kw):
    # cpu_budget=0 tuned for all the profile's cores, memory_budget=0 with no
    # limit and seconds=0 for the 60 s default, silently; nothing runs now.
    with pytest.raises(sluice.InvalidArgumentError):
        train_plan.tune(hw_profile, **dict(dict(seconds=2), **kw))
