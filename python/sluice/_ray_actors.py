"""sluice.ray's actor form: ActorLoader and AutoscalePolicy (see sluice/ray.py).

Partition: with N actors, actor slot i produces the batches k of an epoch
with k mod N == i (its "role"); after a resume or a resize mid-epoch it gets
the not-yet-delivered batches of its role. Each actor is a strict-order
Sluice loader restricted to its batches (select_batches), so batch k has the
contents of a local loader's batch k. The driver keeps up to `depth` requests
in flight per actor, reorders (strict) or not (relaxed), and records what it
delivered (Delivered): that record is the state."""

from __future__ import annotations

import collections
import os
import time
from typing import Any, Deque, Dict, List, Mapping, Optional, Tuple

import numpy as np
import ray

import sluice

from ._ray_budget import BadBudget, BadFinder, raise_overrun
from ._ray_common import (Delivered, bfloat16_fields, check_read_args, host_arrays, materialize,
                          order_world, plan_payload, refuse_bfloat16, select_batches)

# Failures after which a request is re-read from a fresh actor.
_LOST = (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError)


@ray.remote
class _LoaderActor:
    """One Sluice loader (world size 1, strict order) in a Ray actor."""

    def __init__(self, payload: Mapping[str, Any], seed: Optional[int], threads: int,
                 prefetch: int, overrides: Dict[str, Any]) -> None:
        self._plan = materialize(payload)
        self._loader = self._plan.loader(rank=0, world_size=1, seed=seed, threads=threads,
                                         prefetch=prefetch, relaxed_ordering=False, **overrides)
        self._epoch = 0
        self._left = 0
        self._role = (0, 1)
        self._error: Optional[BaseException] = None  # a failed configure(), raised by next()
        self._bad = BadFinder()

    def info(self) -> Dict[str, Any]:
        return {"batches_per_epoch": self._loader.batches_per_epoch,
                "batch_size": self._loader.batch_size, "spec_hash": self._plan.spec_hash,
                "dataset_size": self._loader.dataset_size,
                "state": self._loader.state_dict(),
                "node_id": ray.get_runtime_context().get_node_id(), "pid": os.getpid()}

    def configure(self, epoch: int, batches: List[int], offset: int, step: int) -> None:
        """Yields `batches` of `epoch` next, then its role's batches of each
        following epoch (offset, offset + step, ...). The driver does not
        wait for this call: an error is kept and raised by next()."""
        self._role = (offset, step)
        self._error = None
        try:
            self._start(epoch, batches)
            if not batches:
                self._roll()
        except Exception as e:
            self._left = 0
            self._error = e
            raise

    def _start(self, epoch: int, batches: List[int]) -> None:
        select_batches(self._loader, epoch, batches)
        self._epoch = epoch
        self._left = len(batches)

    def _roll(self) -> None:
        offset, step = self._role
        self._start(self._epoch + 1, list(range(offset, self._loader.batches_per_epoch, step)))

    def next(self) -> Optional[Tuple[int, int, Dict[str, np.ndarray], Dict[str, Any]]]:
        """(epoch, batch index, {field: numpy view of the batch}, {"samples":
        its sample indices, "bad": the bad samples it met first, as
        BadFinder lists them, "bfloat16": the fields shipped as the int16
        bits of their bfloat16 values}); Ray copies the views into the
        object store when this returns. A loader error is raised after counting the batch
        as handed out (the loader did: its next call yields the following
        batch), so the driver can raise it in its place."""
        if self._error is not None:
            raise self._error
        if self._left == 0:
            return None
        try:
            batch = self._loader.next()
        except Exception:
            self._consumed()
            raise
        t = next(iter(batch.values()))
        arrays, bf16 = host_arrays(batch, copy=False)
        meta = {"samples": np.asarray(t.sample_indices, dtype=np.int64),
                "bad": self._bad.found(self._loader, t.epoch, t.batch_index), "bfloat16": bf16}
        out = (t.epoch, t.batch_index, arrays, meta)
        del batch, t
        self._consumed()
        return out

    def _consumed(self) -> None:
        self._left -= 1
        if self._left == 0:
            self._roll()  # the next epoch's batches fill while this one is consumed

    def stats(self) -> Dict[str, Any]:
        return self._loader.stats()


class AutoscalePolicy:
    """When to add or remove an actor, from the consumer-wait statistic: the
    fraction of the trainer's wall time spent blocked in next() over a window
    of `interval_s` seconds (and over each epoch). Above high_wait: one more
    actor (up to max_actors; None = as many as the cluster has CPUs for);
    below low_wait: one fewer (down to min_actors)."""

    def __init__(self, min_actors: int = 1, max_actors: Optional[int] = None,
                 high_wait: float = 0.10, low_wait: float = 0.01, interval_s: float = 30.0) -> None:
        if min_actors < 1 or (max_actors is not None and max_actors < min_actors):
            sluice._sluice.raise_error("invalid_argument",
                                       "need 1 <= min_actors <= max_actors, got %r, %r"
                                       % (min_actors, max_actors))
        self.min_actors, self.max_actors = int(min_actors), max_actors
        self.high_wait, self.low_wait, self.interval_s = high_wait, low_wait, interval_s

    def decide(self, actors: int, wait_fraction: float, cluster_limit: Optional[int] = None) -> int:
        """The actor count to use next (pure: no side effects)."""
        cap = self.max_actors if self.max_actors is not None else cluster_limit
        if wait_fraction > self.high_wait and (cap is None or actors < cap):
            return actors + 1
        if wait_fraction < self.low_wait and actors > self.min_actors:
            return actors - 1
        return actors


class RayBatch(dict):
    """A batch {field: array}: numpy arrays (read-only views of Ray's object
    store on the actor's node; copies elsewhere) or torch tensors (DLPack,
    sharing that memory: do not modify them in place). `epoch` and `index`
    say which batch of which epoch it is."""

    epoch: int = 0
    index: int = 0


class _Alias:
    """A writable-flagged alias of a read-only array (DLPack cannot export
    read-only arrays); keeps the array, hence the object store buffer, alive."""

    def __init__(self, a: np.ndarray) -> None:
        self._a = a
        iface = dict(a.__array_interface__)
        iface["data"] = (iface["data"][0], False)
        self.__array_interface__ = iface


def _to_torch(a: np.ndarray, bfloat16: bool = False) -> Any:
    """A torch tensor sharing `a`'s memory; bfloat16: `a` holds bfloat16
    bits as int16 (host_arrays), viewed as torch.bfloat16."""
    import torch

    if not a.flags.writeable:
        a = np.asarray(_Alias(a))
    x = torch.from_dlpack(a)
    return x.view(torch.bfloat16) if bfloat16 else x


class _Slot:
    def __init__(self, handle: Any, offset: int, step: int) -> None:
        self.handle = handle
        self.offset, self.step = offset, step
        self.pending: Deque[Tuple[Any, int]] = collections.deque()  # (ref, batch index)
        self.todo: Deque[int] = collections.deque()
        self.restarts = 0


class ActorLoader:
    """Sluice loaders in N Ray actors, one batch stream for the trainer.

        loader = sluice.ray.ActorLoader(plan, num_actors=4)
        for batch in loader:          # one epoch; RayBatch {field: numpy array}
            ...
        state = loader.state_dict()   # a loader state dict (any Sluice loader takes it)

    Batch k of an epoch has the contents of a local loader's batch k (same
    plan and seed; world size 1). ordering="strict" yields batches in index
    order; "relaxed" yields whichever has arrived (lowest index first), and
    the state lists the batches delivered ahead. A failed actor (process or
    node lost) is replaced and re-reads its batches not yet received: nothing
    is lost or repeated. resize(n), or an AutoscalePolicy, changes the actor
    count; the not-yet-received batches are re-partitioned at once.

    threads: loader threads per actor (each actor reserves that many CPUs
    unless actor_options says otherwise); depth: requests in flight per
    actor; prefetch: each actor loader's prefetch; output: "numpy" or
    "torch"; actor_options: passed to the actor's .options() (default:
    num_cpus=threads, scheduling_strategy="SPREAD": actors spread over nodes);
    max_restarts: replacements per actor slot before the error is raised."""

    def __init__(self, plan: "sluice.Plan", num_actors: int = 2, *, epoch: int = 0,
                 seed: Optional[int] = None, threads: int = 1, prefetch: int = 2, depth: int = 2,
                 ordering: str = "strict", output: str = "numpy",
                 actor_options: Optional[Mapping[str, Any]] = None, max_restarts: int = 3,
                 autoscale: Optional[AutoscalePolicy] = None, **overrides: Any) -> None:
        if ordering not in ("strict", "relaxed") or output not in ("numpy", "torch"):
            sluice._sluice.raise_error(
                "invalid_argument", "ordering must be strict|relaxed and output numpy|torch, "
                "got %r, %r" % (ordering, output))
        for name, value, low in (("num_actors", num_actors, 1), ("depth", depth, 1),
                                 ("max_restarts", max_restarts, 0)):
            if isinstance(value, bool) or not hasattr(value, "__index__") or int(value) < low:
                sluice._sluice.raise_error("invalid_argument",
                                           "%s must be an int >= %d, got %r" % (name, low, value))
        check_read_args(epoch, threads, overrides, seed, prefetch)
        if output == "numpy":
            refuse_bfloat16(bfloat16_fields(plan), 'sluice.ray.ActorLoader(output="numpy")')
        self._relaxed = ordering == "relaxed"
        self._torch = output == "torch"
        self._depth = int(depth)
        self._max_restarts = int(max_restarts)
        self._autoscale = autoscale
        self._options = {"num_cpus": threads, "scheduling_strategy": "SPREAD", "max_restarts": 0}
        self._options.update(actor_options or {})
        self._payload = ray.put(plan_payload(plan))
        self._actor_args = (seed, int(threads), int(prefetch), dict(overrides))
        self._slots = [_Slot(self._new_actor(), i, num_actors) for i in range(num_actors)]
        info = ray.get(self._slots[0].handle.info.remote())
        self._batch_size = int(info["batch_size"])
        self._batches_per_epoch = int(info["batches_per_epoch"])
        self._delivered = Delivered(info["state"], self._batch_size, self._batches_per_epoch,
                                    epoch=epoch, order_world_size=order_world(plan))
        # batch index -> (epoch, {field: array}, meta) or, for a batch whose
        # loader failed, (epoch, the Sluice error, None): raised in its place
        self._received: Dict[int, Tuple[int, Any, Any]] = {}
        self._budget = BadBudget(plan.output, self._batches_per_epoch * self._batch_size,
                                 int(info["dataset_size"]))
        self._overrun: Optional[str] = None  # raised by next() until load_state_dict
        self._target = int(num_actors)
        self._configured = False
        self._restarts = self._resizes = 0
        self._batches = 0
        self._wait = 0.0
        self._created = time.monotonic()
        self._window = (self._created, 0.0)  # (start, wait at start) of the autoscale window

    # ---- public API ----
    def __iter__(self):
        while True:
            b = self.next()
            if b is None:
                return
            yield b

    def next(self) -> Optional[RayBatch]:
        """The next batch, or None once at the end of an epoch (the following
        call starts the next one)."""
        t0 = time.monotonic()
        if self._overrun is not None:
            raise_overrun(self._overrun)
        if self._delivered.complete:
            self._begin_epoch(self._delivered.epoch + 1)
            return None
        if not self._configured:
            self._configure(self._target)
        while True:
            index = self._pick()
            if index is not None:
                epoch, data, meta = self._received.pop(index)
                self._delivered.add(index)
                self._wait += time.monotonic() - t0
                if meta is None:
                    raise data  # the actor loader's error for this batch
                self._overrun = self._budget.add(epoch, meta["samples"], meta["bad"])
                if self._overrun is not None:
                    raise_overrun(self._overrun)
                self._batches += 1
                self._maybe_autoscale()
                return self._wrap(epoch, index, data, meta["bfloat16"])
            self._pump()
            self._wait_some()

    def __len__(self) -> int:
        return self._batches_per_epoch

    def state_dict(self) -> Dict[str, Any]:
        """{epoch, position, spec_hash, delivered_ahead}: what was delivered,
        as any Sluice loader's state_dict (world size 1) describes it."""
        return self._delivered.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continues after what `state` (from this or any world-size-1 Sluice
        loader of the same plan) delivered; batches in flight are dropped."""
        self._delivered.reset(state)
        self._overrun = None
        self._received.clear()
        for slot in self._slots:
            slot.pending.clear()  # the actor finishes them before its configure()
        self._configured = False

    def set_epoch(self, epoch: int) -> None:
        """Starts `epoch` from its beginning, unless the loader is already in
        `epoch` (fresh, or restored mid-epoch by load_state_dict): then it
        stays where it is, as sluice.torch's set_epoch does, so calling it at
        the top of every epoch (the DDP loop's order) keeps a resumed
        position."""
        if int(self.state_dict()["epoch"]) == int(epoch):
            return
        self.load_state_dict(self._delivered.start_of(int(epoch)))

    def resize(self, num_actors: int) -> None:
        """Uses `num_actors` actors from now on (batches already received are
        kept; the rest of the epoch is re-partitioned)."""
        if num_actors < 1:
            sluice._sluice.raise_error("invalid_argument", "num_actors must be >= 1")
        self._target = int(num_actors)
        if self._configured and self._target != len(self._slots):
            self._configure(self._target)

    @property
    def actors(self) -> List[Any]:
        """The actor handles, by slot (slot i has the batches k mod N == i)."""
        return [s.handle for s in self._slots]

    @property
    def batch_size(self) -> int:
        return self._batch_size

    @property
    def batches_per_epoch(self) -> int:
        return self._batches_per_epoch

    def stats(self) -> Dict[str, Any]:
        """Trainer-side figures: batches, samples, seconds, images_per_second,
        consumer_wait_seconds, wait_fraction, actors, restarts, resizes."""
        secs = time.monotonic() - self._created
        samples = self._batches * self._batch_size
        return {"batches": self._batches, "samples": samples, "seconds": secs,
                "images_per_second": samples / secs if secs > 0 else 0.0,
                "consumer_wait_seconds": self._wait,
                "wait_fraction": self._wait / secs if secs > 0 else 0.0,
                "actors": len(self._slots), "restarts": self._restarts, "resizes": self._resizes}

    def actor_stats(self) -> List[Dict[str, Any]]:
        """Each actor loader's stats() (Loader.stats)."""
        return ray.get([s.handle.stats.remote() for s in self._slots])

    def shutdown(self) -> None:
        """Kills the actors (also done when the loader is garbage collected)."""
        for slot in self._slots:
            _kill(slot.handle)
        self._slots = []

    def __del__(self) -> None:
        try:
            if ray.is_initialized():
                self.shutdown()
        except Exception:  # interpreter shutdown
            pass

    # ---- internals ----
    def _new_actor(self) -> Any:
        return _LoaderActor.options(**self._options).remote(self._payload, *self._actor_args)

    def _wrap(self, epoch: int, index: int, data: Dict[str, np.ndarray],
              bf16: List[str]) -> RayBatch:
        if self._torch:
            out = RayBatch((k, _to_torch(v, k in bf16)) for k, v in data.items())
        else:
            refuse_bfloat16(bf16, 'sluice.ray.ActorLoader(output="numpy")')
            out = RayBatch(data)
        out.epoch, out.index = epoch, index
        return out

    def _pick(self) -> Optional[int]:
        if self._relaxed:
            return min(self._received) if self._received else None
        return self._delivered.next if self._delivered.next in self._received else None

    def _pump(self) -> None:
        # A slot keeps at most `depth` batches requested or received but not
        # delivered; the slot holding the next batch (strict order) may
        # always ask for it, so a slow actor cannot be starved by fast ones.
        head = self._delivered.next
        for slot in self._slots:
            held = sum(1 for k in self._received if k % slot.step == slot.offset)
            while slot.todo and (len(slot.pending) + held < self._depth or slot.todo[0] == head):
                slot.pending.append((slot.handle.next.remote(), slot.todo.popleft()))

    def _wait_some(self) -> None:
        where = {ref: slot for slot in self._slots for ref, _ in slot.pending}
        if not where:
            sluice._sluice.raise_error("internal", "ActorLoader: nothing in flight and batch %d "
                                       "of epoch %d missing" % (self._delivered.next,
                                                                self._delivered.epoch))
        ready, _ = ray.wait(list(where), num_returns=1)
        for ref in ready:
            if any(r == ref for r, _ in where[ref].pending):  # not dropped by a restart
                self._collect(where[ref], ref)

    def _collect(self, slot: _Slot, ref: Any) -> None:
        """Moves a finished request's batch into the received buffer, or
        replaces the actor when it was lost."""
        expected = next(i for r, i in slot.pending if r == ref)
        try:
            result = ray.get(ref)
        except _LOST:
            self._restart(slot)
            return
        except sluice.SluiceError as e:  # the batch's error: raised in its place
            result = (self._delivered.epoch, expected, e, None)
        slot.pending = collections.deque((r, i) for r, i in slot.pending if r != ref)
        if result is None:  # the actor had no batch left for this request
            sluice._sluice.raise_error(
                "internal", "a Sluice Ray actor had no batch %d of epoch %d to return"
                % (expected, self._delivered.epoch))
        epoch, index, data, meta = result
        if index != expected or epoch != self._delivered.epoch:
            sluice._sluice.raise_error(
                "internal", "actor returned batch %d of epoch %d, expected %d of %d"
                % (index, epoch, expected, self._delivered.epoch))
        self._received[index] = (epoch, data, meta)

    def _restart(self, slot: _Slot) -> None:
        """A fresh actor for `slot`, re-reading what the lost one had not
        delivered (requests in flight and the slot's remaining batches)."""
        slot.restarts += 1
        self._restarts += 1
        if slot.restarts > self._max_restarts:
            sluice._sluice.raise_error(
                "internal", "a Sluice Ray actor failed %d times (max_restarts=%d)"
                % (slot.restarts, self._max_restarts), "see the actor's log (ray logs)")
        todo = sorted([i for _, i in slot.pending] + list(slot.todo))
        slot.pending.clear()
        _kill(slot.handle)
        slot.handle = self._new_actor()
        slot.todo = collections.deque(todo)
        slot.handle.configure.remote(self._delivered.epoch, todo, slot.offset, slot.step)

    def _drain(self) -> None:
        """Waits for every request in flight, keeping the batches that arrive."""
        for slot in list(self._slots):
            while slot.pending:  # a restart empties it (its requests become todo)
                self._collect(slot, slot.pending[0][0])

    def _configure(self, n: int) -> None:
        """Partitions the epoch's batches not yet received over n actors."""
        if self._configured:
            self._drain()
            self._resizes += n != len(self._slots)
        while len(self._slots) > n:
            _kill(self._slots.pop().handle)
        while len(self._slots) < n:
            self._slots.append(_Slot(self._new_actor(), len(self._slots), n))
        todo = [k for k in self._delivered.remaining() if k not in self._received]
        for i, slot in enumerate(self._slots):
            slot.offset, slot.step = i, n
            slot.pending.clear()
            slot.todo = collections.deque(k for k in todo if k % n == i)
            slot.handle.configure.remote(self._delivered.epoch, list(slot.todo), i, n)
        self._configured = True

    def _begin_epoch(self, epoch: int) -> None:
        """After the last batch of an epoch: the actors have rolled into their
        role's batches of `epoch` unless the actor count changes."""
        self._delivered.reset(self._delivered.start_of(epoch))
        if self._autoscale is not None:
            self._target = self._autoscale.decide(len(self._slots), self._window_fraction(),
                                                  self._cluster_limit())
            self._window = (time.monotonic(), self._wait)
        if not self._configured or self._target != len(self._slots):
            self._configured = False
            self._configure_after_epoch()
            return
        for slot in self._slots:
            slot.todo = collections.deque(range(slot.offset, self._batches_per_epoch, slot.step))

    def _configure_after_epoch(self) -> None:
        self._resizes += self._target != len(self._slots)
        self._configure(self._target)

    def _window_fraction(self) -> float:
        start, wait0 = self._window
        dt = time.monotonic() - start
        return (self._wait - wait0) / dt if dt > 0 else 0.0

    def _cluster_limit(self) -> Optional[int]:
        cpus = ray.cluster_resources().get("CPU")
        per = float(self._options.get("num_cpus") or 1)
        return max(1, int(cpus // per)) if cpus else None

    def _maybe_autoscale(self) -> None:
        if self._autoscale is None:
            return
        if time.monotonic() - self._window[0] < self._autoscale.interval_s:
            return
        n = self._autoscale.decide(len(self._slots), self._window_fraction(),
                                   self._cluster_limit())
        self._window = (time.monotonic(), self._wait)
        if n != len(self._slots):
            self._target = n
            self._configure(n)


def _kill(handle: Any) -> None:
    try:
        ray.kill(handle, no_restart=True)
    except Exception:  # already gone
        pass
