"""sluice.torch: a Sluice loader that yields torch tensors.

    import sluice, sluice.torch
    plan = sluice.load("train.plan", vars={"DATA": "/data"})
    loader = sluice.torch.loader(plan, pin_memory=True)
    for batch in loader:                  # {"image": torch.Tensor, "label": torch.Tensor}
        ...

Tensors come from the batch buffer through DLPack without a copy; they keep
the buffer alive until they are dropped. pin_memory=True copies each batch into
page-locked memory (needs CUDA; only host tensors are pinned); device=
"cuda:0" (or a plan whose output.device is cuda) moves it to the GPU with
non_blocking=True. `device` also reaches plan.loader(device=...): for a plan
that places work on the GPU (docs/python.md "Device tensors"), the fields
computed there are already CUDA tensors (no copy), and device="cpu" runs the
whole chain on the CPU so every tensor is a host tensor. Without a GPU stage
batches leave the runtime in host memory.

Sharding: rank and world_size come from torch.distributed when it is
initialized, else the RANK / WORLD_SIZE environment variables (torchrun), else
0 of 1 — unless given explicitly. local_device() picks cuda:LOCAL_RANK.

The loader follows torchdata's StatefulDataLoader conventions (docs/
distributed.md): state_dict() / load_state_dict() with plain checkpoint types,
set_epoch(), len(); in a DDP loop:

    loader = sluice.torch.loader(plan)                # rank/world from torch.distributed
    loader.load_state_dict(ckpt["loader"])            # optional: resume, on any world size
    for epoch in range(start, epochs):
        loader.set_epoch(epoch)                       # keeps a restored mid-epoch position
        for batch in loader:                          # this rank's batches of the epoch
            ...
            if step % 100 == 0:
                state = sluice.torch.gather_state_dict(loader)   # every rank calls it
                if dist.get_rank() == 0: torch.save({"loader": state, ...}, path)
"""

from __future__ import annotations

import os
from typing import Any, Dict, Iterator, List, Mapping, Optional

import torch as _torch

from . import Loader as _Loader
from . import Plan as _Plan
from . import _sluice


def distributed_rank_world() -> "tuple[Optional[int], Optional[int]]":
    """(rank, world_size) from torch.distributed when initialized, else from
    RANK / WORLD_SIZE, else (None, None) (= the plan's sampling or 0 of 1)."""
    dist = getattr(_torch, "distributed", None)
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    return None, None


def local_device() -> _torch.device:
    """cuda:LOCAL_RANK when CUDA is available (LOCAL_RANK from torchrun, 0
    when unset), else cpu."""
    from . import local_rank

    if _torch.cuda.is_available():
        return _torch.device("cuda", local_rank())
    return _torch.device("cpu")


def gather_state_dict(loader: "StatefulDataLoader", group: Any = None) -> Dict[str, Any]:
    """The job's complete state, the same on every rank: all-gathers every
    rank's state_dict() over torch.distributed (a collective: every rank must
    call it) and merges them (sluice.merge_states). Without an initialized
    process group, loader.state_dict() merged alone (one rank)."""
    from . import merge_states

    state = loader.state_dict()
    dist = getattr(_torch, "distributed", None)
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return merge_states([state])
    states: List[Any] = [None] * dist.get_world_size(group)
    dist.all_gather_object(states, state, group=group)
    return merge_states(states)


class StatefulDataLoader:
    """Wraps a sluice.Loader like torchdata's StatefulDataLoader: iterating
    yields {field: torch.Tensor} for the rest of the current epoch;
    state_dict()/load_state_dict() save and restore the position (plain ints,
    strings and lists); set_epoch(); len() = batches per epoch on this rank."""

    def __init__(self, loader: _Loader, pin_memory: bool = False,
                 device: "Optional[str | _torch.device]" = None) -> None:
        self._loader = loader
        self._device = _torch.device(device) if device is not None else None
        if self._device is not None and self._device.type == "cpu":
            self._device = None
        self._pin = bool(pin_memory)
        self._it: Optional[Iterator[Any]] = None
        if (self._pin or self._device is not None) and not _torch.cuda.is_available():
            _sluice.raise_error(
                "unsupported",
                "pin_memory=True and CUDA devices need a CUDA build of torch with a GPU; "
                "torch.cuda.is_available() is False here",
                "drop pin_memory/device (batches are CPU tensors without a copy)",
            )

    def _convert(self, batch: Mapping[str, Any]) -> Dict[str, _torch.Tensor]:
        out = {}
        for name, t in batch.items():
            x = _torch.from_dlpack(t)
            if self._pin and x.device.type == "cpu":
                x = x.pin_memory()
            if self._device is not None:
                x = x.to(self._device, non_blocking=True)
            out[name] = x
        return out

    def __iter__(self) -> "StatefulDataLoader":
        self._it = iter(self._loader)
        return self

    def __next__(self) -> Dict[str, _torch.Tensor]:
        # Converts without keeping the sluice batch: only the torch tensors
        # (which own the buffer through DLPack) reach the caller.
        if self._it is None:
            self._it = iter(self._loader)
        return self._convert(next(self._it))

    def __len__(self) -> int:
        return len(self._loader)

    def state_dict(self) -> Dict[str, Any]:
        """sluice.Loader.state_dict(): complete with strict ordering (the
        same on every rank in lockstep), else this rank's; see
        gather_state_dict for one state of the whole job."""
        return self._loader.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restores a state_dict() / gather_state_dict() (on any world size
        for a complete state). The next iteration continues there."""
        self._it = None
        self._loader.load_state_dict(state)

    def set_epoch(self, epoch: int) -> None:
        """Starts `epoch` from its beginning, unless the loader is already in
        `epoch` (fresh, or restored mid-epoch by load_state_dict): then it
        stays where it is, so calling set_epoch at the top of every epoch (as
        with DistributedSampler) keeps a resumed position."""
        if int(self._loader.state_dict()["epoch"]) == int(epoch):
            return
        self._it = None
        self._loader.set_epoch(epoch)

    def stats(self) -> Dict[str, Any]:
        return self._loader.stats()

    def bad_samples(self, epoch: int) -> List[Dict[str, Any]]:
        return self._loader.bad_samples(epoch)

    @property
    def sluice_loader(self) -> _Loader:
        return self._loader


def loader(plan: _Plan, rank: Optional[int] = None, world_size: Optional[int] = None,
           epoch: int = 0, seed: Optional[int] = None, pin_memory: bool = False,
           device: "Optional[str | _torch.device]" = None, **overrides: Any) -> StatefulDataLoader:
    """A loader over `plan` yielding torch tensors (see the module doc).
    pin_memory: page-locked copies of the host tensors (needs CUDA); device:
    where batches go (e.g. local_device()), with non_blocking copies. It is
    also plan.loader's device: "cpu" (or torch.device("cpu")) runs the whole
    chain on the CPU, "cuda" / "cuda:N" runs a GPU-placed plan's GPU stages
    on that device (UnsupportedError when it is not usable); None follows the
    plan's output.device."""
    if rank is None and world_size is None:
        rank, world_size = distributed_rank_world()
    plan_device: Optional[str] = None
    if device is not None:
        dev = _torch.device(device)
        if dev.type == "cpu":
            plan_device = "cpu"
        elif dev.type == "cuda" and str(plan.placement_device).startswith("cuda"):
            # Only a plan with a GPU stage: for a host-only plan the C++ loader
            # would warn that batches stay on the host, and this wrapper moves
            # them to `device` anyway.
            plan_device = "cuda" if dev.index is None else "cuda:%d" % dev.index
    else:
        out_device = str(plan.output.get("device", "cpu"))
        if out_device.startswith("cuda"):
            device = out_device
    inner = plan.loader(rank=rank, world_size=world_size, epoch=epoch, seed=seed,
                        device=plan_device, **overrides)
    return StatefulDataLoader(inner, pin_memory=pin_memory, device=device)


TorchLoader = StatefulDataLoader  # the earlier name
