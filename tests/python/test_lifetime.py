"""Batch buffer lifetime: views keep their buffer, dropping them recycles it,
memory stays bounded, and holding every buffer is an error, not a hang."""

import gc
import threading

import numpy as np
import pytest

import sluice


def rss_bytes():
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    import os

    return pages * os.sysconf("SC_PAGE_SIZE")


def test_held_views_are_not_overwritten(eval_plan):
    # Reference: every batch of epoch 0, copied.
    ref = [np.array(b["image"]) for b in eval_plan.loader(threads=2)]
    # A pool of 4 buffers: 2 held below, 1 bound to the loop variable while
    # the next batch is awaited, 1 left for the loader to cycle through.
    loader = eval_plan.loader(threads=2, prefetch=3)
    it = iter(loader)
    held_np = np.asarray(next(it)["image"])      # numpy view of batch 0
    held_t = next(it)["image"]                   # sluice.Tensor of batch 1
    rest = [np.array(b["image"]) for b in it]    # the loader cycles the one free buffer
    assert len(rest) == len(ref) - 2
    np.testing.assert_array_equal(held_np, ref[0])
    np.testing.assert_array_equal(np.asarray(held_t), ref[1])
    for got, want in zip(rest, ref[2:]):
        np.testing.assert_array_equal(got, want)


def test_every_kind_of_view_kept_past_later_batches_keeps_its_data(eval_plan):
    # np.from_dlpack and torch views hold their batch's buffer like np.asarray
    # does: the loader fills other buffers while they live.
    ref = [np.array(b["image"]) for b in eval_plan.loader(threads=2)]
    loader = eval_plan.loader(threads=2, prefetch=3)  # a pool of 4 buffers
    it = iter(loader)
    views = [np.from_dlpack(next(it)["image"])]
    try:
        import torch
        views.append(torch.from_dlpack(next(it)["image"]).numpy())
    except ImportError:
        pass
    rest = sum(1 for _ in it)
    assert rest == len(ref) - len(views)
    for i, v in enumerate(views):
        np.testing.assert_array_equal(v, ref[i])


def test_view_outlives_loader(eval_plan):
    loader = eval_plan.loader(threads=2)
    b = next(iter(loader))
    a = np.asarray(b["image"])
    copy = a.copy()
    del loader, b
    gc.collect()
    np.testing.assert_array_equal(a, copy)  # the pool lives while a view does


def test_memory_is_bounded(train_plan):
    torch = None
    try:
        import torch  # noqa: F811
    except ImportError:
        pass
    loader = train_plan.loader(threads=2)

    def run(n):
        done = 0
        while done < n:
            for b in loader:
                a = np.asarray(b["image"])
                d = np.from_dlpack(b["label"])
                if torch is not None:
                    t = torch.from_dlpack(b["image"])
                    assert t.shape[0] == 16
                assert a.shape[0] == d.shape[0] == 16
                done += 1
                if done >= n:
                    break
        return done

    run(30)  # warm up: pools, allocator arenas
    gc.collect()
    before = rss_bytes()
    assert run(300) == 300  # ~20 epochs of the small set
    gc.collect()
    grown = rss_bytes() - before
    # A batch is 16*3*24*24*2 B = 55 KB; 300 leaked batches would be 16 MB.
    assert grown < 8 * 2**20, "RSS grew by %d bytes over 300 batches" % grown


def test_holding_every_buffer_raises_not_hangs(eval_plan):
    loader = eval_plan.loader(threads=2, prefetch=1)  # a pool of 2 buffers
    held = []
    result = {}

    def consume():
        try:
            for b in loader:
                held.append(b)  # never released
            result["end"] = True
        except sluice.SluiceError as e:
            result["error"] = e

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    t.join(timeout=60)
    assert not t.is_alive(), "Loader.next() blocked with every buffer held"
    assert "error" in result, result
    e = result["error"]
    assert isinstance(e, sluice.InvalidArgumentError)
    assert "held by the caller" in str(e)
    assert len(held) == 2
    # Dropping the batches lets the loader go on.
    held.clear()
    gc.collect()
    b = loader.next()
    assert b is not None and b["image"].shape == (8, 3, 32, 32)


def test_gil_released_while_waiting(eval_plan):
    # With a huge switch interval the GIL changes hands only when released on
    # purpose; the spinner (which yields at every sleep(0)) can then advance
    # during next() only if next() releases the GIL while it waits.
    import sys
    import time

    counter = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            counter[0] += 1
            time.sleep(0)

    old = sys.getswitchinterval()
    t = threading.Thread(target=spin, daemon=True)
    t.start()
    sys.setswitchinterval(100.0)
    advanced = 0
    try:
        for _ in range(3):
            loader = eval_plan.loader(threads=1)  # cold: next() must wait for decodes
            before = counter[0]
            b = loader.next()
            advanced += counter[0] - before
            assert b is not None
    finally:
        sys.setswitchinterval(old)
        stop.set()
        t.join()
    assert advanced > 0


DESTROY_CHILD = r"""
import os, sys, threading, time
import sluice
root = sys.argv[1]
loader = sluice.load(sys.argv[2], vars={"DATA": root}).loader(threads=1)
time.sleep(0.3)  # the worker now blocks in open() of the pipe (no deadline)

def release_the_pipe():
    time.sleep(0.5)
    os.close(os.open(os.path.join(root, "stalled.jpg"), os.O_WRONLY))

threading.Thread(target=release_the_pipe, daemon=True).start()
start = time.monotonic()
del loader  # waits for the worker, whose read only this process's other thread ends
print("destroyed in %.2f s" % (time.monotonic() - start))
"""


def _stalled_pipe_plan(tmp_root, name):
    """A plan over four samples that are one named pipe without a writer, and
    the data folder: with allow_outside_root an unconfined read is a plain
    blocking open(), which the pipe stalls in the kernel as hung storage
    would; read_timeout 0: the worker itself waits in it."""
    import os

    from conftest import FAST_TARGETS

    root = os.path.join(tmp_root, name)
    os.makedirs(root, exist_ok=True)
    fifo = os.path.join(root, "stalled.jpg")
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    with open(os.path.join(root, "list.csv"), "w") as f:
        f.write("path,label\n" + "stalled.jpg,0\n" * 4)
    spec = ("sluice: 1\nname: " + name + "\n"
            "source: {format: file_list, path: \"${DATA}/list.csv\", path_column: path, "
            "label_column: label, allow_outside_root: true, read_timeout: 0}\n"
            "sampling: {order: sequential}\ngraph:\n"
            "  - decode_jpeg: {in: jpg, out: image, color: rgb}\n"
            "  - center_crop: {size: [8, 8]}\n"
            "batch: {size: 2, fields: {image: image, label: cls}}\n"
            "output: {device: cpu, on_error: {policy: skip, max_fraction: 1.0}}\n")
    plan = os.path.join(root, name + ".plan")
    sluice.compile(spec, plan, cpu_targets=FAST_TARGETS, cuda=False)
    return root, plan


def test_destroying_a_loader_lets_other_python_threads_run(tmp_root):
    # Destroying a loader waits for its started workers. Here the worker is
    # stuck in a read that only another Python thread of the same process can
    # end (a real case: a loader freed by the garbage collector while its
    # remote requests wait on a loopback server thread of the process). If
    # the destructor held the GIL, that thread could never run: a deadlock.
    import subprocess
    import sys

    root, plan = _stalled_pipe_plan(tmp_root, "destroy_gil")
    try:
        done = subprocess.run([sys.executable, "-c", DESTROY_CHILD, root, plan],
                              capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("destroying the loader held the GIL: the thread that ends its read never ran")
    assert done.returncode == 0, done.stderr
    assert "destroyed in" in done.stdout, done.stdout


INTERRUPT_CHILD = r"""
import os, signal, sys, threading, time
import sluice
root = sys.argv[1]
loader = sluice.load(sys.argv[2], vars={"DATA": root}).loader(threads=1)
start = time.monotonic()
try:
    # Inside the try: on a loaded machine the signal may come before next().
    threading.Timer(1.0, lambda: signal.raise_signal(signal.SIGINT)).start()
    loader.next()  # its only worker waits in open() of the pipe, without a deadline
    print("returned")
except KeyboardInterrupt:
    print("interrupted after %.2f s" % (time.monotonic() - start), flush=True)
# The worker stays in open() of the pipe (read_timeout 0 has no deadline, and
# its replacement reads are the pipe again): end without destroying the loader.
os._exit(0)
"""


def test_ctrl_c_interrupts_a_next_that_waits(tmp_root):
    # next() waits in slices and checks for signals between them: Ctrl-C
    # reaches a training script whose storage hangs (it waited for the read).
    import subprocess
    import sys

    root, plan = _stalled_pipe_plan(tmp_root, "interrupt_next")
    try:
        done = subprocess.run([sys.executable, "-c", INTERRUPT_CHILD, root, plan],
                              capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("Ctrl-C did not interrupt next()")
    assert "interrupted after" in done.stdout, done.stdout + done.stderr
    assert float(done.stdout.split("after ")[1].split(" s")[0]) < 10


def _next_in_forked_child(plan_path, data, queue):
    try:
        sluice.load(plan_path, vars={"DATA": data}).loader(threads=1).next()
        queue.put("ok")
    except sluice.UnsupportedError as e:
        queue.put(str(e))


def test_a_child_forked_after_a_loader_started_gets_an_error_not_a_hang(eval_plan, eval_plan_dir,
                                                                        dataset):
    # oneTBB's worker threads do not survive fork(): a loader in such a child
    # waited forever. Now Create and next() say so and how to start it.
    import multiprocessing

    parent = eval_plan.loader(threads=1)
    assert parent.next() is not None
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_next_in_forked_child, args=(eval_plan_dir, dataset, queue))
    child.start()
    child.join(30)
    alive = child.is_alive()
    if alive:
        child.kill()
    assert not alive, "the forked child hung"
    message = queue.get(timeout=5)
    assert "forked after it started a Sluice loader's threads" in message, message
    assert "spawn" in message
