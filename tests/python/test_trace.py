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


def test_a_wait_in_slices_is_one_next_span(tmp_path, dataset):
    # Python's next() waits in 100 ms slices to see signals (Ctrl-C); the
    # trace still shows one `next` span per call, however long it waited.
    # The first sample is a named pipe without a writer: its read stalls
    # until source.read_timeout (0.45 s) gives up on it and the slot takes
    # a good replacement (on_error skip), so the first next() waits ~0.45 s.
    import threading
    import time

    from conftest import FAST_TARGETS, dataset_files

    # Outside the data folder (allow_outside_root): a plain blocking open().
    os.makedirs(tmp_path / "pipe")
    os.makedirs(tmp_path / "data")
    fifo = str(tmp_path / "pipe" / "stalled.jpg")
    os.mkfifo(fifo)
    good = dataset_files(dataset)[:5]
    with open(tmp_path / "data" / "list.csv", "w") as f:
        f.write("path,label\n" + fifo + ",0\n" + "".join(p + ",0\n" for p in good))
    spec = ("sluice: 1\nname: sliced\n"
            "source: {format: file_list, path: \"${DATA}/list.csv\", path_column: path, "
            "label_column: label, allow_outside_root: true, read_timeout: 0.45}\n"
            "sampling: {order: sequential}\ngraph:\n"
            "  - decode_jpeg: {in: jpg, out: image, color: rgb}\n"
            "  - center_crop: {size: [8, 8]}\n"
            "batch: {size: 2, fields: {image: image, label: cls}}\n"
            "output: {device: cpu, on_error: {policy: skip, max_fraction: 0.5}}\n")
    plan_dir = str(tmp_path / "sliced.plan")
    sluice.compile(spec, plan_dir, cpu_targets=FAST_TARGETS, cuda=False)
    loader = sluice.load(plan_dir, vars={"DATA": str(tmp_path / "data")}).loader(threads=1)
    path = str(tmp_path / "run.json")
    loader.start_trace(path)
    start = time.monotonic()
    batches = sum(1 for _ in loader)
    waited = time.monotonic() - start
    loader.stop_trace()

    def release():  # the abandoned read's open() returns once a writer opens
        with open(fifo, "wb"):
            pass

    threading.Thread(target=release, daemon=True).start()
    del loader
    assert batches == 3 and waited >= 0.4, (batches, waited)
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    nexts = sorted((e for e in events if e["ph"] == "X" and e["name"] == "next"),
                   key=lambda e: e["ts"])
    assert len(nexts) == batches + 1, [(e["ts"], e["dur"]) for e in nexts]
    assert nexts[0]["dur"] >= 0.35e6, nexts[0]  # microseconds: the whole first wait
