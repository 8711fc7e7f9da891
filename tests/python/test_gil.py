"""The GIL around Loader calls that wait: a thread blocked in one of them must
not stop the process's other Python threads (python/src/sluice_module.cc
releases the GIL around every wait on the loader's lock and every file write)."""

import json
import subprocess
import sys
import threading

import pytest

from test_lifetime import _stalled_pipe_plan

# Thread A holds the loader's lock in drain_native, its read stalled on a pipe
# nobody writes (read_timeout 0: no deadline). Thread B calls start_trace,
# which waits for that lock. The main thread must still run Python code: with
# the GIL held by B it never would (and the child would hang).
START_TRACE_WAITS_CHILD = r"""
import os, sys, threading, time
import sluice
root, plan, trace = sys.argv[1], sys.argv[2], sys.argv[3]
loader = sluice.load(plan, vars={"DATA": root}).loader(threads=1)
threading.Thread(target=lambda: loader._core.drain_native(1), daemon=True).start()
time.sleep(0.5)  # A now holds the lock, waiting for a batch that never comes
b_started = threading.Event()

def start_trace():
    b_started.set()
    loader.start_trace(trace)

threading.Thread(target=start_trace, daemon=True).start()
b_started.wait()
time.sleep(0.3)  # B is now blocked on the lock
spins = 0
deadline = time.monotonic() + 0.3
while time.monotonic() < deadline:
    spins += 1
print("main thread ran: %d" % spins, flush=True)
os._exit(0)  # the stalled worker never ends; skip the loader's destruction
"""


def test_start_trace_waiting_for_the_loader_lets_other_threads_run(tmp_root, tmp_path):
    root, plan = _stalled_pipe_plan(tmp_root, "gil_start_trace")
    trace = str(tmp_path / "never.json")
    try:
        done = subprocess.run([sys.executable, "-c", START_TRACE_WAITS_CHILD, root, plan, trace],
                              capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("start_trace held the GIL while waiting for the loader: the process hung")
    assert "main thread ran:" in done.stdout, done.stdout + done.stderr


def test_trace_started_and_stopped_while_another_thread_iterates(tmp_path, eval_plan):
    # The consumer thread blocks in next() (GIL released, lock held in 100 ms
    # slices); start_trace / stop_trace from the main thread get the lock
    # between slices, and the consumer sees every batch of the epoch.
    loader = eval_plan.loader(threads=1)
    path = str(tmp_path / "concurrent.json")
    got = []
    errors = []
    started = threading.Event()

    def consume():
        try:
            for b in loader:
                started.set()
                got.append(b["label"].sample_indices)
        except Exception as e:  # noqa: BLE001  (reported by the assert below)
            errors.append(e)
        started.set()

    t = threading.Thread(target=consume)
    t.start()
    started.wait(60)
    loader.start_trace(path)
    t.join(120)
    assert not t.is_alive()
    dropped = loader.stop_trace()
    assert not errors, errors
    assert dropped == 0
    assert len(got) == len(loader)
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    assert any(e["ph"] == "M" for e in events), "no track names recorded"
