"""Hardware profiles and autotuning from Python.

    import sluice
    hw = sluice.profile(out="hw.yaml", data="/data/imagenet/train")   # -> "hw.yaml"
    plan = sluice.load("train.plan", vars={"DATA": "/data/imagenet"})
    result = plan.tune("hw.yaml", cpu_budget=4, seconds=60)
    # result: {"threads", "in_flight", "prefetch", "images_per_second", "trials": [...]}

The same measurements as `sluice profile` and the same search as `sluice tune`
(docs/profiles.md, docs/tuning.md). Without a CUDA device the profile's "gpu"
is None.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Mapping, Optional, Union

from . import _sluice

PathLike = Union[str, "os.PathLike[str]"]


def profile(
    out: Optional[PathLike] = None,
    data: Optional[PathLike] = None,
    seconds: Optional[float] = None,
    machine: Optional[str] = None,
    max_files: int = 256,
) -> Union[str, Dict[str, Any]]:
    """Measures this machine (what `sluice profile` does).

    out: write the YAML profile there and return the path; None: return the
    profile as a dict (the file's structure). data: a storage path whose read
    throughput, latency and JPEG sizes are measured. seconds: rough total time
    (default 20)."""
    if seconds is not None and not (0 < float(seconds) <= 600):
        _sluice.raise_error("invalid_argument", f"seconds must be in (0, 600], got {seconds}")
    result = _sluice.profile_machine(
        os.fspath(data) if data is not None else "",
        machine or "",
        float(seconds) if seconds is not None else 20.0,
        int(max_files),
    )
    if out is None:
        return result["profile"]
    path = os.fspath(out)
    with open(path, "w", encoding="utf-8") as f:
        f.write(result["yaml"])
    return path


def _positive(name: str, value: Any) -> int:
    """cpu_budget / memory_budget: an int >= 1 (None is left to the caller)."""
    if isinstance(value, bool) or not hasattr(value, "__index__") or int(value) < 1:
        _sluice.raise_error(
            "invalid_argument",
            f"{name} must be a positive int, or None; got {value!r}",
            f"leave {name} unset (None) for the default",
        )
    return int(value)


def tune(
    plan: Any,
    profile: PathLike,
    cpu_budget: Optional[int] = None,
    memory_budget: Optional[int] = None,
    seconds: Optional[float] = None,
    vars: Optional[Mapping[str, str]] = None,
) -> Dict[str, Any]:
    """Tunes `plan`'s loader knobs on its real data (what `sluice tune` does)
    and writes them into plan.json; later loaders of the plan use them for
    knobs the spec left auto. Returns the best knobs, images_per_second and
    the trials. `plan` is a sluice.Plan (its bound vars are used, updated by
    `vars`) or a plan directory. cpu_budget (cores, None: the spec's
    output.cpu_budget, else the profile's cores) and memory_budget (bytes,
    None: no limit) are ints >= 1; seconds is in [2, 3600] (None: 60), as
    `sluice tune` takes them: InvalidArgumentError otherwise."""
    if seconds is not None and not (2 <= float(seconds) <= 3600):
        _sluice.raise_error("invalid_argument", f"seconds must be in [2, 3600], got {seconds}")
    from . import Plan, _vars_dict  # late: tuning.py is imported by the package itself

    bound: Dict[str, str] = {}
    if isinstance(plan, Plan):
        path, bound = plan.path, plan.vars
    else:
        path = os.fspath(plan)
    bound.update(_vars_dict(vars))
    result = _sluice.tune_plan(
        path,
        bound,
        os.fspath(profile),
        _positive("cpu_budget", cpu_budget) if cpu_budget is not None else -1,
        _positive("memory_budget", memory_budget) if memory_budget is not None else -1,
        float(seconds) if seconds is not None else -1.0,
    )
    if isinstance(plan, Plan):
        plan._core = None  # reload plan.json (the tuned knobs) on next use
    return result


def _install() -> None:
    """Adds Plan.tune (the method form of tune())."""
    from . import Plan

    def plan_tune(
        self: Any,
        profile: PathLike,
        cpu_budget: Optional[int] = None,
        memory_budget: Optional[int] = None,
        seconds: Optional[float] = None,
        vars: Optional[Mapping[str, str]] = None,
    ) -> Dict[str, Any]:
        return tune(self, profile, cpu_budget, memory_budget, seconds, vars)

    plan_tune.__doc__ = tune.__doc__
    Plan.tune = plan_tune  # type: ignore[attr-defined]


_install()
