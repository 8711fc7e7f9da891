"""Pieces shared by sluice.ray's two forms (see sluice/ray.py):

- shipping a plan directory to Ray workers through the object store (a
  worker on another node need not see the driver's file system);
- running a Sluice loader over an explicit set of one epoch's batch indices;
- the delivered-batches record that becomes a loader state dict (in the
  loader's own dialect: make_state / state_batches).

Imports ray lazily: nothing here needs it."""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import tempfile
import threading
from typing import Any, Dict, List, Mapping, Optional, Sequence

import sluice

# Plans materialized in this process, by digest (a worker reuses them).
_PLANS: Dict[str, "sluice.Plan"] = {}
_PLANS_LOCK = threading.Lock()


def plan_payload(plan: "sluice.Plan") -> Dict[str, Any]:
    """The plan directory's files (bytes, by relative path), its ${VARS} and a
    digest of both: what a worker needs to load the same plan."""
    files: Dict[str, bytes] = {}
    root = plan.path
    for dirpath, _, names in os.walk(root):
        for name in sorted(names):
            full = os.path.join(dirpath, name)
            with open(full, "rb") as f:
                files[os.path.relpath(full, root)] = f.read()
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(rel.encode() + b"\0" + hashlib.sha256(files[rel]).digest())
    for k, v in sorted(plan.vars.items()):
        h.update(("var:%s=%s\0" % (k, v)).encode())
    return {"files": files, "vars": plan.vars, "digest": h.hexdigest()[:24]}


def materialize(payload: Mapping[str, Any]) -> "sluice.Plan":
    """Loads the plan a payload describes, writing its directory once per
    process under the temporary directory (reused across calls)."""
    digest = payload["digest"]
    with _PLANS_LOCK:
        plan = _PLANS.get(digest)
        if plan is not None:
            return plan
        root = os.path.join(tempfile.gettempdir(), "sluice_ray_plans")
        os.makedirs(root, exist_ok=True)
        final = os.path.join(root, "%s-%d" % (digest, os.getpid()))
        if not os.path.isdir(final):
            tmp = tempfile.mkdtemp(prefix="incoming-", dir=root)
            for rel, data in payload["files"].items():
                path = os.path.join(tmp, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb") as f:
                    f.write(data)
            try:
                os.rename(tmp, final)
                # Removed when this worker exits normally (a loaded kernels.so
                # stays mapped); a killed worker leaves it in the temp directory.
                atexit.register(shutil.rmtree, final, True)
            except OSError:  # another thread of this process won the race
                shutil.rmtree(tmp, ignore_errors=True)
        plan = sluice.load(final, vars=payload["vars"])
        _PLANS[digest] = plan
        return plan


# ---- the state dict dialect ----
# sluice.ray speaks the loader's own state dict: {epoch, position, spec_hash}
# plus the batches delivered after `position`, as "delivered_ahead" (batch
# indices) or, with the elastic LoaderState, as "consumed" (ranges of epoch
# positions). A template (a world-size-1 loader's state_dict()) decides which
# and supplies any other keys. A rank's view of the epoch (rank r of M > 1)
# speaks the loader's rank state instead: the rank's own batch indices as
# "rank_position" and "rank_ahead" in a fresh segment (nothing consumed at its
# start), with world_size M and rank r. These functions are the only readers
# and writers of those keys here.


def order_world(plan: "sluice.Plan") -> int:
    """The order_world_size a world-size-1 state with consumed samples names:
    1 for shard_shuffle (whose epoch order depends on the world size), else 0."""
    return 1 if plan.sampling.get("order") == "shard_shuffle" else 0


def rank_template(template: Mapping[str, Any], rank: int, world_size: int) -> Dict[str, Any]:
    """A rank state template for rank `rank` of `world_size` (> 1) from a
    fresh loader's complete state_dict()."""
    s = dict(template)
    s.update(position=0, consumed=[], world_size=int(world_size), rank=int(rank), rank_position=0,
             rank_ahead=[])
    s.pop("delivered_ahead", None)
    return s


def _is_rank_state(state: Mapping[str, Any]) -> bool:
    return int(state.get("world_size", 0) or 0) > 0


def make_state(template: Mapping[str, Any], epoch: int, next_batch: int, ahead: Sequence[int],
               batch_size: int, order_world_size: int = 0) -> Dict[str, Any]:
    """A state: batches before `next_batch` and those in `ahead` delivered.
    order_world_size: what a state with consumed samples names (order_world)."""
    s = dict(template)
    s["epoch"] = int(epoch)
    ahead = sorted(int(k) for k in ahead)
    if _is_rank_state(template):
        if next_batch or ahead:
            s["rank_position"] = int(next_batch) * batch_size
            s["rank_ahead"] = ahead
            return s
        # Nothing delivered: the complete fresh state, which any world size takes.
        s.update(world_size=0, rank=0, rank_position=0, rank_ahead=[], order_world_size=0)
        return s
    s["position"] = int(next_batch) * batch_size
    if "consumed" in template:
        runs: List[List[int]] = []
        for k in ahead:
            if runs and runs[-1][1] == k * batch_size:
                runs[-1][1] = (k + 1) * batch_size
            else:
                runs.append([k * batch_size, (k + 1) * batch_size])
        s["consumed"] = runs
        s.pop("delivered_ahead", None)
        if "order_world_size" in template:
            s["order_world_size"] = int(order_world_size) if (next_batch or ahead) else 0
    else:
        s["delivered_ahead"] = ahead
    return s


def _refuse(message: str) -> None:
    sluice._sluice.raise_error(
        "invalid_argument", message,
        "pass what a world-size-1 loader's (or sluice.ray's) state_dict() returned")


def state_batches(state: Mapping[str, Any], batch_size: int) -> "tuple[int, set]":
    """(first batch not delivered, batches delivered after it) of a state: a
    complete state's world-size-1 batches, or a rank state's own batches."""
    if _is_rank_state(state):
        if int(state.get("position", 0)) or state.get("consumed"):
            _refuse("the rank state continues a resumed segment (samples were consumed before it "
                    "began), which sluice.ray cannot split into batch indices")
        rank_position = int(state.get("rank_position", 0))
        if rank_position % batch_size:
            _refuse("the state's rank_position %d is not a batch boundary" % rank_position)
        return rank_position // batch_size, set(int(k) for k in state.get("rank_ahead", []) or [])
    position = int(state.get("position", 0))
    ahead = set(int(k) for k in state.get("delivered_ahead", None) or [])
    for r in state.get("consumed", None) or []:
        b, e = (int(r["begin"]), int(r["end"])) if isinstance(r, Mapping) else (int(r[0]), int(r[1]))
        if b % batch_size or e % batch_size:
            position = -1  # not whole batches: reported below
            break
        ahead.update(range(b // batch_size, e // batch_size))
    if position < 0 or position % batch_size != 0:
        _refuse("the state's delivered samples are not whole batches of batch size %d" % batch_size)
    return position // batch_size, ahead


def check_state(state: Mapping[str, Any], template: Mapping[str, Any]) -> None:
    """Refuses a state `template`'s loader cannot continue by batch indices:
    another spec or data set, another rank's state, or (world size 1) an
    epoch order built for another world size (shard_shuffle)."""
    if state.get("spec_hash", template["spec_hash"]) != template["spec_hash"]:
        sluice._sluice.raise_error(
            "invalid_argument",
            "loader state is for spec %s, this plan's is %s" % (state.get("spec_hash"),
                                                                template["spec_hash"]),
            "restore a state saved by a loader of the same plan")
    for key in ("samples", "batch_size"):
        if key in state and key in template and int(state[key]) != int(template[key]):
            sluice._sluice.raise_error(
                "invalid_argument",
                "loader state is for %s %d, this loader has %d" % (key, int(state[key]),
                                                                   int(template[key])),
                "restore a state saved by a loader of the same plan and data")
    if _is_rank_state(state):
        mine = (int(template.get("rank", 0)), int(template.get("world_size", 0) or 1))
        if (int(state.get("rank", 0)), int(state["world_size"])) != mine:
            sluice._sluice.raise_error(
                "invalid_argument",
                "loader state is rank %d's of %d (relaxed ordering); this is rank %d of %d"
                % (int(state.get("rank", 0)), int(state["world_size"]), mine[0], mine[1]),
                "merge every rank's state with sluice.merge_states and restore the result")
    elif not (int(state.get("position", 0)) or state.get("consumed")):
        pass  # nothing consumed: a fresh epoch on any world size
    elif _is_rank_state(template):
        _refuse("a complete state with consumed samples does not say which of this rank's "
                "batches were delivered; restore it through SluiceDatasource(state=...)")
    elif int(state.get("order_world_size", 0) or 0) > 1:
        _refuse("the state's epoch order was built for world size %d (shard_shuffle); "
                "sluice.ray reads the world-size-1 order" % int(state["order_world_size"]))


def select_batches(loader: "sluice.Loader", epoch: int, batches: Sequence[int], rank: int = 0,
                   world_size: int = 1) -> None:
    """Restarts `loader` (strict ordering, rank `rank` of `world_size`) so that
    the rest of `epoch` yields exactly `batches` (the rank's batch indices),
    then its end.

    Uses only the loader state: the first batch is the position, every later
    batch of the epoch not in `batches` counts as delivered, so the C++ loader
    neither produces nor delivers it. Batch k has the contents of a local
    loader's batch k of the same rank (contents depend only on plan, seed,
    epoch, rank, world size and batch index)."""
    nb, b = loader.batches_per_epoch, loader.batch_size
    todo = sorted(set(int(k) for k in batches))
    if todo and (todo[0] < 0 or todo[-1] >= nb):
        sluice._sluice.raise_error(
            "invalid_argument",
            "batch indices %d..%d are outside the epoch's %d batches" % (todo[0], todo[-1], nb))
    first = todo[0] if todo else nb
    wanted = set(todo)
    ahead = [k for k in range(first + 1, nb) if k not in wanted]
    template = loader.state_dict()
    if world_size > 1:
        template = rank_template(template, rank, world_size)
    loader.load_state_dict(
        make_state(template, epoch, first, ahead, b, order_world(loader.plan)))


def remaining_batches(state: Optional[Mapping[str, Any]], batch_size: int,
                      batches_per_epoch: int) -> List[int]:
    """The batch indices a loader state has not delivered yet in its epoch."""
    if state is None:
        return list(range(batches_per_epoch))
    first, ahead = state_batches(state, batch_size)
    return [k for k in range(first, batches_per_epoch) if k not in ahead]


class Delivered:
    """Which batches of the current epoch a consumer has received, as a
    loader state: position = the first batch not delivered, delivered_ahead =
    the delivered ones after it (few when batches arrive nearly in order)."""

    def __init__(self, template: Mapping[str, Any], batch_size: int, batches_per_epoch: int,
                 state: Optional[Mapping[str, Any]] = None, epoch: int = 0,
                 order_world_size: int = 0) -> None:
        # template: a world-size-1 loader's state_dict(), or rank_template()
        self.template = dict(template)
        self.spec_hash = self.template["spec_hash"]
        self.batch_size = int(batch_size)
        self.batches_per_epoch = int(batches_per_epoch)
        self.order_world_size = int(order_world_size)  # order_world(plan)
        self.reset(state if state is not None else self.start_of(epoch))

    def start_of(self, epoch: int) -> Dict[str, Any]:
        """The state at the start of `epoch`."""
        return self._make(epoch, 0, [])

    def _make(self, epoch: int, next_batch: int, ahead: Any) -> Dict[str, Any]:
        return make_state(self.template, epoch, next_batch, ahead, self.batch_size,
                          self.order_world_size)

    def reset(self, state: Mapping[str, Any]) -> None:
        check_state(state, self.template)
        self.epoch = int(state.get("epoch", 0))
        todo = remaining_batches(state, self.batch_size, self.batches_per_epoch)
        self.next = todo[0] if todo else self.batches_per_epoch
        self.ahead = set(range(self.next, self.batches_per_epoch)) - set(todo)

    @property
    def complete(self) -> bool:
        return self.next >= self.batches_per_epoch

    def is_delivered(self, index: int) -> bool:
        return index < self.next or index in self.ahead

    def add(self, index: int) -> None:
        if self.is_delivered(index):
            sluice._sluice.raise_error(
                "internal", "batch %d of epoch %d delivered twice" % (index, self.epoch))
        self.ahead.add(index)
        while self.next in self.ahead:
            self.ahead.discard(self.next)
            self.next += 1

    def remaining(self) -> List[int]:
        return [k for k in range(self.next, self.batches_per_epoch) if k not in self.ahead]

    def state_dict(self) -> Dict[str, Any]:
        if self.complete:
            return self.start_of(self.epoch + 1)
        return self._make(self.epoch, self.next, self.ahead)


def check_read_args(epoch: int, threads: Any, overrides: Mapping[str, Any],
                    seed: Optional[int] = None, prefetch: Any = None) -> None:
    """Checks on the driver what the workers' loaders would refuse there (an
    actor's or read task's failure would surface as a Ray error): epoch and
    seed >= 0, positive knobs, known overrides; relaxed_ordering is sluice.ray's
    own (ordering= for ActorLoader)."""
    sluice._non_negative("epoch", epoch)
    if seed is not None:
        sluice._non_negative("seed", seed)
    if threads is None:
        sluice._sluice.raise_error("invalid_argument", "threads must be a positive int, got None")
    sluice._count_knob("threads", threads)
    if prefetch is not None:
        sluice._count_knob("prefetch", prefetch)
    allowed = [k for k in sluice._OVERRIDES if k not in ("threads", "prefetch",
                                                         "relaxed_ordering")]
    unknown = sorted(set(overrides) - set(allowed))
    if unknown:
        raise TypeError("unknown loader override(s) %s for sluice.ray; known: %s"
                        % (", ".join(unknown), ", ".join(allowed)))
    for k in ("in_flight",):
        if k in overrides:
            sluice._count_knob(k, overrides[k])


def split_runs(todo: Sequence[int], parts: int) -> List[List[int]]:
    """Splits `todo` into at most `parts` consecutive runs of near-equal length."""
    parts = max(1, min(int(parts), len(todo)))
    out, start = [], 0
    for i in range(parts):
        end = (len(todo) * (i + 1)) // parts
        if end > start:
            out.append(list(todo[start:end]))
        start = end
    return out


# ---- bfloat16 fields ----
# numpy has no bfloat16, so a worker cannot hand such a field to Ray as an
# array of its dtype: it ships the field's bits as int16 instead, and names it.
BFLOAT16 = "bfloat16"
BFLOAT16_HINT = ("use output=\"torch\" with sluice.ray.ActorLoader (bfloat16 fields arrive as "
                 "torch.bfloat16), SluiceDatasource(bfloat16=\"bits\") (their bits as int16 "
                 "columns: torch.from_numpy(col).view(torch.bfloat16)), or cast to "
                 "float16/float32 in the spec")


class _Bits:
    """A host bfloat16 field's memory as an int16 array interface; keeps the
    field (and so its batch buffer) alive."""

    def __init__(self, t: Any) -> None:
        self._t = t
        self.__array_interface__ = {"version": 3, "shape": tuple(t.shape), "typestr": "<i2",
                                    "data": (int(t.data_ptr), False), "strides": None}


def host_arrays(batch: Mapping[str, Any], copy: bool) -> "tuple[Dict[str, Any], List[str]]":
    """({field: numpy array} of a Sluice batch, the bfloat16 fields): a
    bfloat16 host field is an int16 array of its bits. copy=False: views of
    the batch buffer (they keep it alive); True: copies."""
    import numpy as np

    out: Dict[str, Any] = {}
    bf16: List[str] = []
    for name, t in batch.items():
        if t.dtype == BFLOAT16 and t.device == "cpu":
            bf16.append(name)
            t = _Bits(t)
        out[name] = np.array(t, copy=True) if copy else np.asarray(t)
    return out, bf16


def bfloat16_fields(plan: "sluice.Plan") -> List[str]:
    """The plan's bfloat16 batch fields, from its memory layout (none known
    when the plan has no layout)."""
    memory = plan.memory or {}
    return [f["field"] for f in memory.get("fields", []) if f.get("dtype") == BFLOAT16]


def refuse_bfloat16(fields: Sequence[str], where: str) -> None:
    """UnsupportedError for bfloat16 `fields` that `where` cannot deliver."""
    if fields:
        sluice._sluice.raise_error(
            "unsupported", "field%s %s %s bfloat16, which %s cannot deliver as numpy arrays "
            "(numpy has no bfloat16)" % ("s" if len(fields) > 1 else "", ", ".join(
                "`%s`" % f for f in fields), "are" if len(fields) > 1 else "is", where),
            BFLOAT16_HINT)
