"""Loader.start_trace / stop_trace from Python (docs/observability.md): the
file is Chrome trace-event JSON with worker tracks whose read/decode/kernel
spans nest inside their sample span and carry the sample's index and path, a
consumer track with one `next` span per call, and the counters; misuse raises."""

import json
import os

import pytest

import sluice
from conftest import dataset_files


def _spans_by_track(events):
    tracks = {}
    for e in events:
        if e["ph"] == "X":
            ts = round(e["ts"] * 1000)
            tracks.setdefault(e["tid"], []).append((ts, ts + round(e["dur"] * 1000), e))
    return tracks


def test_trace_from_python(tmp_path, eval_plan, dataset):
    loader = eval_plan.loader(threads=2)
    path = str(tmp_path / "run.json")
    loader.start_trace(path)
    batches = sum(1 for _ in loader)
    assert loader.stop_trace() == 0
    assert batches == len(loader)

    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names[0] == "consumer (Next)" and names[2] == "worker 0" and names[3] == "worker 1"
    tracks = _spans_by_track(events)
    files = set(dataset_files(dataset))
    for tid, spans in tracks.items():
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack = []
        for begin, end, e in spans:  # nesting: inside the enclosing span or after it
            while stack and stack[-1][1] <= begin:
                stack.pop()
            assert not stack or end <= stack[-1][1], (tid, e, stack[-1][2])
            if e["name"] in ("read", "decode", "kernel"):
                assert stack and stack[-1][2]["name"] == "sample", e
                assert stack[-1][2]["args"]["index"] == e["args"]["index"]
                assert os.path.abspath(e["args"]["path"]) in files, e["args"]["path"]
            stack.append((begin, end, e))
    consumer = [e for _, _, e in tracks[0] if e["name"] == "next"]
    assert len(consumer) == batches + 1  # the last call reports the end of the epoch
    counters = {e["name"] for e in events if e["ph"] == "C"}
    assert {"in-flight samples", "batches ready (queue)", "batches filling"} <= counters


def test_trace_misuse_raises(tmp_path, eval_plan):
    loader = eval_plan.loader(threads=1)
    with pytest.raises(sluice.InvalidArgumentError):
        loader.stop_trace()
    with pytest.raises(sluice.IoError):
        loader.start_trace(str(tmp_path / "missing_dir" / "run.json"))
    loader.start_trace(str(tmp_path / "a.json"))
    with pytest.raises(sluice.InvalidArgumentError):
        loader.start_trace(str(tmp_path / "b.json"))
    loader.stop_trace()
    assert json.load(open(tmp_path / "a.json"))["traceEvents"]
