"""sluice.ray's on_error.max_fraction over several loaders (see sluice/ray.py).

A Sluice loader checks max_fraction against its own epoch (LoaderCore's
AccountLocked, docs/reliability.md): the epoch's distinct bad samples may not
exceed max_fraction x max(samples_per_rank, distinct samples read). Each Ray
actor or read task runs a loader over part of the epoch and so sees only its
part's bad samples, against the whole epoch's samples_per_rank: N loaders
tolerated about N times the budget. Here each worker reports, with every batch,
the bad samples it met (BadFinder) and its sample indices, and one BadBudget
(the ActorLoader's driver, or a small actor the read tasks of a datasource
share) counts them as one loader's ledger would and words an overrun as the
local loader does.

Imports ray lazily: nothing here needs it."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

import sluice

# (dataset index, name, reason): one bad sample, as Loader.bad_samples lists it.
BadRecord = Tuple[int, str, str]

HINT = "fix or remove the bad files, or raise output.on_error.max_fraction"


def budget_active(output: Mapping[str, Any]) -> bool:
    """Whether a plan's output section has a max_fraction to enforce: the
    skip and replace policies (skip is the default; `fail` stops at the first
    bad sample, which reaches the trainer as the worker's own error)."""
    on_error = output.get("on_error") or {}
    return str(on_error.get("policy", "skip")) != "fail"


class BadFinder:
    """In a worker: the bad samples each batch of its loader met first.

    After loader.next() returned batch `index` of `epoch`, found(...) lists
    the records of the loader's bad_samples(epoch) not seen before in this
    epoch. A batch read again (the driver dropped it and asked anew) lists
    again what it listed the first time, although the loader's ledger keeps
    those samples (a restore into the same epoch keeps its records)."""

    def __init__(self) -> None:
        self._epoch: Optional[int] = None
        self._seen: set = set()
        self._by_batch: Dict[int, List[BadRecord]] = {}

    def found(self, loader: "sluice.Loader", epoch: int, index: int) -> List[BadRecord]:
        if epoch != self._epoch:
            self._epoch, self._seen, self._by_batch = epoch, set(), {}
        new = [(int(b["sample"]), b["name"], b["reason"]) for b in loader.bad_samples(epoch)
               if int(b["sample"]) not in self._seen]
        self._seen.update(r[0] for r in new)
        mine = self._by_batch.setdefault(int(index), [])
        mine.extend(new)
        return list(mine)


class BadBudget:
    """One epoch's max_fraction check over the batches of several loaders.

    add() takes each batch as it is delivered to the trainer (its epoch, its
    sample indices and the bad records its worker reported) and returns the
    local loader's error message once the epoch's distinct bad samples exceed
    max_fraction x max(samples_per_rank, distinct samples read), else None.
    Like the loader's ledger, another epoch starts the counts afresh and the
    same epoch again (a restore into it) keeps them."""

    def __init__(self, output: Mapping[str, Any], samples_per_rank: int,
                 dataset_size: int) -> None:
        self.active = budget_active(output)
        self.max_fraction = float((output.get("on_error") or {}).get("max_fraction", 0.0))
        self.samples_per_rank = int(samples_per_rank)
        self._size = int(dataset_size)
        self._epoch: Optional[int] = None
        self._read: Optional[np.ndarray] = None  # a bitmap over the dataset, once active
        self._reads = 0
        self._bad: Dict[int, BadRecord] = {}

    def _start(self, epoch: int) -> None:
        if epoch == self._epoch:
            return
        self._epoch = epoch
        if self._read is None:
            self._read = np.zeros(self._size, dtype=bool)
        else:
            self._read[:] = False
        self._reads = 0
        self._bad = {}

    def _mark(self, indices: Any) -> None:
        assert self._read is not None
        idx = np.asarray(indices, dtype=np.int64).ravel()
        idx = np.unique(idx[(idx >= 0) & (idx < self._size)])
        self._reads += int(np.count_nonzero(~self._read[idx]))
        self._read[idx] = True

    def add(self, epoch: int, samples: Any, bad: Sequence[BadRecord]) -> Optional[str]:
        if not self.active:
            return None
        self._start(int(epoch))
        for index, name, reason in bad:
            self._bad.setdefault(int(index), (int(index), name, reason))
        self._mark([r[0] for r in bad])
        self._mark(samples)
        if not bad:
            return None  # the loader checks the batches that met a bad sample
        base = max(self.samples_per_rank, self._reads)
        if len(self._bad) <= self.max_fraction * base:
            return None
        _, name, reason = bad[-1]
        return ("%d distinct bad samples in epoch %d exceed on_error.max_fraction %f of %d "
                "samples (the larger of the epoch's %d and the %d distinct samples read); "
                "last: %s: %s" % (len(self._bad), epoch, self.max_fraction, base,
                                  self.samples_per_rank, self._reads, name, reason))


def raise_overrun(message: str) -> None:
    """Raises the CorruptDataError a local loader raises for an overrun."""
    sluice._sluice.raise_error("corrupt_data", message, HINT)
