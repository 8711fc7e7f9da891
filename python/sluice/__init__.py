"""Sluice from Python: compile, load and iterate data-loading plans.

    import sluice
    plan = sluice.compile("examples/imagenet_train.yaml", out="train.plan")
    plan = sluice.load("train.plan", vars={"DATA": "/data/imagenet"})
    loader = plan.loader(threads=8)
    for batch in loader:                    # one epoch; dicts {field: sluice.Tensor}
        images = torch.from_dlpack(batch["image"])   # zero-copy
        labels = numpy.asarray(batch["label"])       # zero-copy

A batch's tensors keep its buffer alive until every view of them (numpy arrays,
torch tensors, DLPack capsules) is gone; the buffer then returns to the
loader's fixed pool. Holding every buffer makes the next batch raise
InvalidArgumentError ("every batch buffer ... is held by the caller") instead
of waiting forever.

Errors are SluiceError subclasses carrying the C++ message and the fields
code, message, hint, file, line, column; a SpecError's `diagnostics` lists
every mistake of the spec (sluice.Diagnostic: code, message, hint, file, line,
column), the fields being the first one's, and str(e) shows them all as
file:line:col: error: ...

See docs/python.md.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence

from . import _sluice
from ._sluice import (  # noqa: F401  (re-exported)
    CorruptDataError,
    Diagnostic,
    InternalError,
    InvalidArgumentError,
    IoError,
    NotFoundError,
    SluiceError,
    SpecError,
    Tensor,
    UnsupportedError,
    VersionMismatchError,
)

__all__ = [
    "compile",
    "load",
    "Plan",
    "Loader",
    "Tensor",
    "SluiceError",
    "SpecError",
    "Diagnostic",
    "InvalidArgumentError",
    "NotFoundError",
    "IoError",
    "CorruptDataError",
    "UnsupportedError",
    "VersionMismatchError",
    "InternalError",
    "merge_states",
    "local_rank",
]

# The version in the repository's VERSION file, compiled into the extension.
__version__: str = _sluice.__version__

# Loader knobs plan.loader(**overrides) accepts (LoaderOptions in
# include/sluice/loader.h); anything else is a TypeError.
_OVERRIDES = ("threads", "prefetch", "in_flight", "relaxed_ordering", "dct_scaling")


def _vars_dict(vars: "Optional[Mapping[Any, Any]]") -> Dict[str, str]:
    """${VARS} values as the C++ side takes them: str keys, and values that
    are str or os.PathLike (pathlib.Path) as their file system path."""
    out: Dict[str, str] = {}
    for k, v in (vars or {}).items():
        try:
            out[str(k)] = os.fspath(v)
        except TypeError:
            _sluice.raise_error(
                "invalid_argument",
                "vars[%r] must be a str or os.PathLike, got %s" % (k, type(v).__name__),
                "pass the value as a string, e.g. str(%r)" % (v,),
            )
    return out


def _count_knob(name: str, value: Any) -> int:
    """A loader knob (threads, prefetch, in_flight): a positive int, or None
    for auto (-1 on the C++ side)."""
    if value is None:
        return -1
    if isinstance(value, bool) or not hasattr(value, "__index__") or int(value) < 1:
        _sluice.raise_error(
            "invalid_argument",
            "%s must be a positive int, or None for auto; got %r" % (name, value),
            "leave %s unset (None) to let the loader choose" % (name,),
        )
    return int(value)


def _non_negative(name: str, value: Any) -> int:
    """epoch / seed: an int >= 0."""
    if isinstance(value, bool) or not hasattr(value, "__index__") or int(value) < 0:
        _sluice.raise_error(
            "invalid_argument",
            "%s must be an int >= 0, got %r" % (name, value),
        )
    return int(value)


def _is_spec_text(spec: str) -> bool:
    """The rule for compile(spec): YAML text when it has a newline or starts
    (after blanks) with `{` (a one-line flow-style spec) or `sluice:`; else a
    file path."""
    head = spec.lstrip()
    return "\n" in spec or head.startswith("{") or head.startswith("sluice:")


def compile(  # noqa: A001  (the API name the design asks for)
    spec: "str | os.PathLike[str]",
    out: "str | os.PathLike[str] | None" = None,
    profile: "str | os.PathLike[str] | None" = None,
    *,
    vars: Optional[Mapping[str, str]] = None,
    cpu_targets: Optional[Sequence[str]] = None,
    cuda: Optional[bool] = None,
    cpu_budget: Optional[int] = None,
) -> "Plan":
    """Compiles a spec into a plan directory and returns the Plan.

    spec: a spec file's path, or the YAML text itself: a string that has a
        newline or starts with `{` (one-line flow style, `{sluice: 1, ...}`)
        or `sluice:` is text, anything else a path (NotFoundError, with a
        hint, when no such file exists).
    out: the plan directory to write (created; files in an existing one are
        replaced). None: a temporary directory removed when the Plan (and every
        loader made from it) is garbage collected.
    profile: a hardware profile file (`sluice profile -o hw.yaml`) for the cost
        model: report.txt and plan.json ("placement") then carry the predicted
        images/s, and with output.device auto the pointwise tail moves to the GPU
        when that is predicted faster (see docs/cost_model.md). A missing file
        raises NotFoundError, a malformed one SpecError.
    cpu_budget: cores the loader may use in that prediction (like
        `sluice compile --cpu-budget N`); default: output.cpu_budget, else the
        profile's cores.
    vars: values for the plan's ${VARS}; when given, the plan is loaded (and
        checked) now, else at the first plan.loader() call (see Plan.bind).
    cpu_targets, cuda: code generation targets (Halide target strings; default:
        three x86-64 feature levels, and CUDA where this Halide can). One target
        and cuda=False compile much faster, e.g. for tests.

    The GIL is released while compiling (Halide code generation takes seconds
    to tens of seconds). Errors: SpecError (text lists every mistake as
    file:line:col: error: ...), NotFoundError, and code generation errors.
    """
    if cpu_budget is not None and (not isinstance(cpu_budget, int) or cpu_budget < 1):
        _sluice.raise_error(
            "invalid_argument",
            "cpu_budget must be a whole number of cores >= 1, got %r" % (cpu_budget,),
            "pass cpu_budget=N or leave it None",
        )
    profile_s = None if profile is None else os.fspath(profile)
    spec_s = os.fspath(spec)
    is_text = _is_spec_text(spec_s)
    cleanup = None
    if out is None:
        out_s = tempfile.mkdtemp(prefix="sluice_plan_")
        cleanup = out_s
    else:
        out_s = os.fspath(out)
    try:
        _sluice.compile_spec(
            spec_s,
            is_text,
            out_s,
            None if cpu_targets is None else list(cpu_targets),
            cuda,
            profile_s,
            cpu_budget,
        )
    except BaseException:
        if cleanup:
            shutil.rmtree(cleanup, ignore_errors=True)
        raise
    plan = Plan(out_s, vars=vars, _lazy=vars is None)
    if cleanup:
        plan._tmp = _TempDir(cleanup)
    return plan


def load(path: "str | os.PathLike[str]", vars: Optional[Mapping[str, str]] = None) -> "Plan":
    """Loads a compiled plan directory, binding its ${VARS} from `vars`.

    Errors: NotFoundError (no plan), CorruptDataError (plan.json broken,
    kernels.so changed), VersionMismatchError, UnsupportedError (this CPU runs
    none of the plan's targets), InvalidArgumentError (a ${VAR} the plan uses
    that `vars` does not bind; the message names it).
    """
    return Plan(os.fspath(path), vars=_vars_dict(vars), _lazy=False)


class _TempDir:
    """Removes a directory when garbage collected."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._finalizer = weakref.finalize(self, shutil.rmtree, path, True)


class Plan:
    """A compiled plan: a directory (plan.json, kernels.so, report.txt) plus
    the values bound to its ${VARS}. Immutable; make loaders with loader()."""

    def __init__(self, path: str, vars: Optional[Mapping[str, str]] = None, _lazy: bool = False):
        self._path = path
        self._vars: Dict[str, str] = _vars_dict(vars)
        self._core: Optional[_sluice.Plan] = None
        self._tmp: Optional[_TempDir] = None
        if not _lazy:
            self._core = _sluice.Plan.load(path, self._vars)

    @property
    def path(self) -> str:
        return self._path

    @property
    def vars(self) -> Dict[str, str]:
        return dict(self._vars)

    def bind(self, **vars: str) -> "Plan":
        """A Plan on the same directory with ${VARS} bound (loaded now)."""
        merged = dict(self._vars)
        merged.update(_vars_dict(vars))
        plan = Plan(self._path, vars=merged)
        plan._tmp = self._tmp
        return plan

    def _loaded(self) -> "_sluice.Plan":
        if self._core is None:
            self._core = _sluice.Plan.load(self._path, self._vars)
        return self._core

    # Read-only views of plan.json (loading the plan if needed).
    name = property(lambda self: self._loaded().name)
    spec_hash = property(lambda self: self._loaded().spec_hash)
    compiler_version = property(lambda self: self._loaded().compiler_version)
    source_format = property(lambda self: self._loaded().source_format)
    source_params = property(lambda self: self._loaded().source_params)
    sampling = property(lambda self: self._loaded().sampling)
    batch = property(lambda self: self._loaded().batch)
    output = property(lambda self: self._loaded().output)
    fields = property(lambda self: sorted(self._loaded().batch.get("fields", {})))
    # Batch fields a fused kernel writes, in fusion-group order.
    fused_fields = property(lambda self: list(self._loaded().chain_fields))
    cpu_targets = property(lambda self: self._loaded().cpu_targets)
    cuda_target = property(lambda self: self._loaded().cuda_target)
    # plan.json "placement.device": "cpu" or "cuda:N".
    placement_device = property(lambda self: self._loaded().placement_device)
    # The plan's decode step (plan.json "decode"): its op ("decode_jpeg", ...),
    # params (${VARS} bound) and what decode_pushdown allowed
    # ({"roi": bool, "dct_scaling": bool}).
    decode_op = property(lambda self: self._loaded().decode_op)
    decode_params = property(lambda self: self._loaded().decode_params)
    decode_pushdown = property(lambda self: self._loaded().decode_pushdown)
    # memory_planning's batch buffer layout (plan.json "memory"), or None.
    memory = property(lambda self: self._loaded().memory)

    @property
    def reference_fields(self) -> Dict[str, str]:
        """Batch fields not fused, each with the compiler's reason: they run
        per sample on the reference implementations (much slower; the loader
        warns once). Empty when every field is fused."""
        core = self._loaded()
        return dict(zip(core.reference_fields, core.reference_reasons))

    @property
    def report(self) -> str:
        """The compiler's report.txt."""
        with open(os.path.join(self._path, "report.txt"), encoding="utf-8") as f:
            return f.read()

    def loader(
        self,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        epoch: int = 0,
        seed: Optional[int] = None,
        device: Optional[str] = None,
        wait_for_device: bool = True,
        **overrides: Any,
    ) -> "Loader":
        """A Loader over this plan.

        rank, world_size: sharding; None = the plan's sampling.rank/world_size,
            else RANK/WORLD_SIZE from the environment, else 0 of 1.
        epoch: the first epoch. seed: overrides sampling.seed.
        device: where the plan's GPU stages run (docs/gpu.md). None = the
            plan's output.device ("auto": the GPU when the plan has a GPU stage
            and a CUDA device is usable, else the CPU with a warning in
            stats()["warnings"]); "cpu" forces the CPU kernels; "cuda" /
            "cuda:N" forces the GPU (UnsupportedError when it is not usable).
            Fields computed on the GPU are CUDA tensors (tensor.device
            "cuda:N", torch.from_dlpack gives a CUDA tensor without a copy).
        wait_for_device: True: each batch's device work has completed when it
            is yielded. False: it is yielded once enqueued; torch.from_dlpack
            (DLPack stream protocol) makes the current stream wait on it.
        overrides: loader knobs: threads, prefetch, in_flight (positive ints,
            None = auto), relaxed_ordering (bool), dct_scaling (bool).
        Errors: InvalidArgumentError for a knob < 1 and an epoch or seed < 0.
        """
        unknown = sorted(set(overrides) - set(_OVERRIDES))
        if unknown:
            raise TypeError(
                "unknown loader override(s) %s; known: %s" % (", ".join(unknown), ", ".join(_OVERRIDES))
            )
        if (rank is None) != (world_size is None):
            _sluice.raise_error(
                "invalid_argument",
                "rank and world_size go together (got rank=%r, world_size=%r)" % (rank, world_size),
            )

        core = _sluice.Loader(
            self._loaded(),
            rank=-1 if rank is None else int(rank),
            world_size=-1 if world_size is None else int(world_size),
            epoch=_non_negative("epoch", epoch),
            seed=None if seed is None else _non_negative("seed", seed),
            threads=_count_knob("threads", overrides.get("threads")),
            prefetch=_count_knob("prefetch", overrides.get("prefetch")),
            in_flight=_count_knob("in_flight", overrides.get("in_flight")),
            relaxed_ordering=overrides.get("relaxed_ordering"),
            dct_scaling=bool(overrides.get("dct_scaling", False)),
            device=None if device is None else str(device),
            wait_for_device=bool(wait_for_device),
        )
        return Loader(core, self)

    def __repr__(self) -> str:
        return "sluice.Plan(%r)" % (self._path,)


class Loader:
    """Iterates a plan's batches. `for batch in loader` runs over the rest of
    the current epoch (a fresh loader: one whole epoch); the next `for` runs
    the following epoch. Each batch is a dict {field: sluice.Tensor}.

    Used from one thread at a time. The GIL is released while waiting for a
    batch."""

    def __init__(self, core: "_sluice.Loader", plan: Plan) -> None:
        self._core = core
        self._plan = plan  # keeps a temporary plan directory alive

    def __iter__(self) -> Iterator[Dict[str, Tensor]]:
        # The C++ loader is its own iterator: no generator frame holding the
        # previous batch (and its buffer) while the next one is awaited. Its
        # __iter__ takes an end of epoch left pending by a loop that stopped
        # after exactly len(self) batches, so this `for` runs the next epoch.
        return iter(self._core)

    def next(self) -> Optional[Dict[str, Tensor]]:
        """The next batch, or None once at the end of an epoch."""
        return self._core.next()

    def __len__(self) -> int:
        return self._core.batches_per_epoch

    def state_dict(self) -> Dict[str, Any]:
        """Where the job is (LoaderState, docs/distributed.md): {epoch,
        position, spec_hash, samples, batch_size, consumed: [[begin, end]...],
        order_world_size, world_size, rank, rank_position, rank_ahead}. Plain
        ints, strings and lists; pickle or JSON them with the checkpoint.
        Strict ordering (or one rank): a complete state (world_size 0), the
        same on every rank in lockstep, restorable on any world size. Relaxed
        ordering with several ranks: this rank's state; merge_states() the
        states of all ranks."""
        return self._core.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continues from `state`: a complete state on any rank of any world
        size (the rest of the epoch, each remaining sample once, equal batch
        counts per rank; on the world size it was saved with, exactly the
        batches that loader would have yielded next), or a rank state on its
        own rank and world size. Errors: InvalidArgumentError for another
        spec's or dataset's state, a consumed set outside the epoch, a rank
        state of another rank."""
        self._core.load_state_dict(dict(state))

    def set_epoch(self, epoch: int) -> None:
        """Restarts at the beginning of `epoch` (each epoch has its own order)."""
        self._core.set_epoch(_non_negative("epoch", epoch))

    def stats(self) -> Dict[str, Any]:
        """Throughput, latency percentiles, consumer wait time, bad samples,
        per-stage busy time, `device` (where the GPU stages run: "cpu" or
        "cuda:N") and `warnings` (conditions worked around, e.g. no CUDA device
        for a plan with GPU stages) (LoaderStats in include/sluice/loader.h)."""
        return self._core.stats()

    def bad_samples(self, epoch: int) -> List[Dict[str, Any]]:
        """The distinct bad samples of `epoch` found so far (all of them once
        the epoch ended), each once with the reason it was first found bad:
        [{"epoch", "sample" (dataset index), "name", "reason"}], sorted by
        index. stats()["bad_samples"] counts them (summed over epochs);
        stats()["bad_reads"] counts every failed read. Available for the
        current epoch and the one before it; InvalidArgumentError otherwise."""
        return self._core.bad_samples(int(epoch))

    def start_trace(self, path: str, max_events_per_thread: int = 0) -> None:
        """Starts recording a Chrome trace-event JSON file at `path` (open it
        in https://ui.perfetto.dev or chrome://tracing): a track per worker
        with read/decode/kernel spans per sample (dataset index and path as
        arguments), the consumer's waits on its own track, batch spans, and
        counters for in-flight samples and queued batches. Each track keeps
        at most `max_events_per_thread` events (0: 65536); later ones are
        dropped. IoError when `path` cannot be opened; InvalidArgumentError
        when a trace is already running. May be called while another
        thread is in next(): the GIL is released while it waits for that
        call. See docs/observability.md."""
        self._core.start_trace(str(path), int(max_events_per_thread))

    def stop_trace(self) -> int:
        """Stops recording and writes the trace file; returns how many events
        were dropped because a track's buffer was full (0 normally)."""
        return self._core.stop_trace()

    @property
    def batch_size(self) -> int:
        return self._core.batch_size

    @property
    def batches_per_epoch(self) -> int:
        return self._core.batches_per_epoch

    @property
    def dataset_size(self) -> int:
        return self._core.dataset_size

    @property
    def plan(self) -> Plan:
        return self._plan
def merge_states(states: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    """The complete state of a job from its ranks' state_dict()s (C++
    sluice::MergeStates): equal complete states (strict ordering in lockstep)
    give that state; the rank states of every rank of a relaxed job give the
    union of what each delivered. The result restores on any world size.
    Errors: InvalidArgumentError naming the mismatch (a rank missing or
    twice, another epoch or spec, complete states that differ)."""
    return _sluice.merge_states([dict(s) for s in states])


def local_rank() -> int:
    """torchrun's LOCAL_RANK (the process's rank on its machine, for picking a
    device); 0 when unset. It does not change which samples a rank reads."""
    return _sluice.local_rank()


from .tuning import profile, tune  # noqa: E402,F401  (sluice.profile, Plan.tune)
from .datasets import pack  # noqa: E402,F401  (sluice.pack)
