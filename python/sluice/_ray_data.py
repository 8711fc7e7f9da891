"""sluice.ray's Ray Data form: SluiceDatasource (see sluice/ray.py)."""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Mapping, Optional

import numpy as np
import ray
from ray.data.block import BlockAccessor, BlockMetadata
from ray.data.datasource import Datasource, ReadTask

import sluice

from ._ray_budget import BadBudget, BadFinder, budget_active, raise_overrun
from ._ray_common import (Delivered, bfloat16_fields, check_read_args, host_arrays, materialize,
                          order_world, plan_payload, rank_template, refuse_bfloat16,
                          remaining_batches, select_batches, split_runs)

# Columns added to every row (with_index=True): where the row comes from.
INDEX_COLUMNS = ("sluice_epoch", "sluice_batch", "sluice_sample")

# The epoch's on_error.max_fraction check, shared by a datasource's read tasks
# (no CPU of its own: it only counts).
_BudgetActor = ray.remote(num_cpus=0)(BadBudget)


def _read_batches(payload_ref: "ray.ObjectRef", epoch: int, batches: List[int], rank: int,
                  world_size: int, seed: Optional[int], threads: int,
                  overrides: Dict[str, Any], with_index: bool, bf16_bits: bool,
                  budget: Optional["ray.actor.ActorHandle"]) -> Iterator[Any]:
    """One read task: a Sluice loader over `batches` of `epoch`, one block per
    batch. The C++ pipeline runs with the GIL released (loader.next). With a
    `budget` (a _BudgetActor), each batch's bad samples are counted there
    first and an epoch over on_error.max_fraction fails the task. bf16_bits:
    bfloat16 fields become int16 columns of their bits (else refused)."""
    plan = materialize(ray.get(payload_ref))
    loader = plan.loader(rank=rank, world_size=world_size, seed=seed, threads=threads,
                         relaxed_ordering=False, **overrides)
    select_batches(loader, epoch, batches, rank, world_size)
    finder = BadFinder()
    for batch in loader:
        if budget is not None:
            t = next(iter(batch.values()))
            overrun = ray.get(budget.add.remote(
                t.epoch, np.asarray(t.sample_indices, dtype=np.int64),
                finder.found(loader, t.epoch, t.batch_index)))
            del t
            if overrun is not None:
                raise_overrun(overrun)
        # Copies out of the loader's pool buffer: the block outlives it (Ray
        # Data may hold several blocks of a task before storing them).
        cols, bf16 = host_arrays(batch, copy=True)
        if not bf16_bits:
            refuse_bfloat16(bf16, "sluice.ray.SluiceDatasource")
        if with_index:
            t = next(iter(batch.values()))
            n = loader.batch_size
            cols["sluice_epoch"] = np.full(n, t.epoch, dtype=np.int64)
            cols["sluice_batch"] = np.full(n, t.batch_index, dtype=np.int64)
            cols["sluice_sample"] = np.asarray(t.sample_indices, dtype=np.int64)
        del batch
        yield BlockAccessor.batch_to_block(cols)
    del loader


class SluiceDatasource(Datasource):
    """A Ray Data datasource over one epoch of a Sluice plan.

        ds = ray.data.read_datasource(SluiceDatasource(plan, epoch=3))

    Rows are samples (one column per batch field, plus sluice_epoch,
    sluice_batch and sluice_sample with with_index=True); each read task runs
    a Sluice loader over a consecutive run of the epoch's batch indices, so a
    block holds whole batches and iter_batches(batch_size=plan batch size)
    yields Sluice's batches (batch k equal to a local loader's batch k of the
    same seed and epoch). state: a loader state dict (from a loader or from
    DeliveryTracker.state_dict()): only the batches it has not delivered are
    read. rank/world_size: which Sluice rank's view of the epoch (default the
    whole epoch, rank 0 of 1). threads: loader threads per read task (Ray Data
    reserves one CPU per read task by default). bfloat16: what to do with
    bfloat16 fields, which numpy (and so a Ray Data block) has no type for:
    "error" (default: UnsupportedError here, naming the fixes) or "bits" (an
    int16 column of each value's bits: torch.from_numpy(col).view(
    torch.bfloat16) gives the values)."""

    def __init__(self, plan: "sluice.Plan", epoch: int = 0,
                 state: Optional[Mapping[str, Any]] = None, rank: int = 0, world_size: int = 1,
                 seed: Optional[int] = None, threads: int = 1, with_index: bool = True,
                 bfloat16: str = "error", **overrides: Any) -> None:
        super().__init__()
        check_read_args(epoch, threads, overrides, seed)
        if bfloat16 not in ("error", "bits"):
            sluice._sluice.raise_error(
                "invalid_argument", "bfloat16 must be \"error\" or \"bits\", got %r" % (bfloat16,))
        if bfloat16 == "error":
            refuse_bfloat16(bfloat16_fields(plan), "sluice.ray.SluiceDatasource")
        probe = plan.loader(rank=rank, world_size=world_size, seed=seed, threads=1, prefetch=1,
                            relaxed_ordering=True)
        self._batch_size = probe.batch_size
        self._batches_per_epoch = probe.batches_per_epoch
        self._batch_bytes = int(probe.stats()["batch_bytes"])
        dataset_size = probe.dataset_size
        self._template = probe.state_dict()
        if world_size > 1:
            self._template = rank_template(self._template, rank, world_size)
        self._order_world = order_world(plan)
        if state is not None:
            # The loader checks the state (spec, data set, rank) and says what
            # it leaves of this rank's epoch: with several ranks, a rank state
            # (its own batch indices), which a same-size resume of a complete
            # state also gives.
            probe.load_state_dict(state)
            state = probe.state_dict()
            Delivered(self._template, self._batch_size, self._batches_per_epoch, state)  # checks
            epoch = int(state["epoch"])
        del probe
        self._epoch = int(epoch)
        self._todo = remaining_batches(state, self._batch_size, self._batches_per_epoch)
        self._payload = ray.put(plan_payload(plan))
        budget = None
        if budget_active(plan.output):
            budget = _BudgetActor.remote(plan.output, self._batches_per_epoch * self._batch_size,
                                         dataset_size)
        self._args = (rank, world_size, seed, int(threads), dict(overrides), bool(with_index),
                      bfloat16 == "bits", budget)

    @property
    def epoch(self) -> int:
        return self._epoch

    @property
    def batches(self) -> List[int]:
        """The batch indices this datasource reads, ascending."""
        return list(self._todo)

    def tracker(self) -> "DeliveryTracker":
        """A DeliveryTracker for this datasource's epoch (and its state)."""
        t = DeliveryTracker(self._template, self._batch_size, self._batches_per_epoch,
                            epoch=self._epoch, order_world_size=self._order_world)
        todo = set(self._todo)
        for k in range(self._batches_per_epoch):
            if k not in todo:
                t.add(k)
        return t

    def estimate_inmemory_data_size(self) -> Optional[int]:
        return len(self._todo) * self._batch_bytes

    def get_name(self) -> str:
        return "Sluice"

    def get_read_tasks(self, parallelism: int, per_task_row_limit: Optional[int] = None,
                       data_context: Any = None) -> List[ReadTask]:
        tasks = []
        for run in split_runs(self._todo, parallelism):
            meta = BlockMetadata(num_rows=len(run) * self._batch_size,
                                 size_bytes=len(run) * self._batch_bytes, input_files=None,
                                 exec_stats=None)

            def read(run: List[int] = run) -> Iterator[Any]:
                return _read_batches(self._payload, self._epoch, run, *self._args)

            tasks.append(ReadTask(read, meta, per_task_row_limit=per_task_row_limit))
        return tasks


class DeliveryTracker:
    """The trainer-side state of a Ray Data read: feed it the batches consumed
    (update(batch) with the sluice_epoch / sluice_batch columns, or add(index))
    and state_dict() is a loader state dict: {epoch, position, spec_hash,
    delivered_ahead}. Pass it to SluiceDatasource(state=...) (or to any Sluice
    loader's load_state_dict) to continue with what was not consumed."""

    def __init__(self, template: Mapping[str, Any], batch_size: int, batches_per_epoch: int,
                 epoch: int = 0, order_world_size: int = 0) -> None:
        # template: a loader's state_dict() (its keys and spec hash); see
        # SluiceDatasource.tracker()
        self._delivered = Delivered(template, batch_size, batches_per_epoch, epoch=epoch,
                                    order_world_size=order_world_size)
        self._rows: Dict[int, int] = {}

    def add(self, index: int) -> None:
        """Records batch `index` of the epoch as consumed."""
        self._delivered.add(int(index))

    def update(self, batch: Mapping[str, Any]) -> None:
        """Records the rows of a consumed numpy batch; a Sluice batch counts
        once all its rows were seen (rows may arrive split across batches)."""
        epochs = np.asarray(batch["sluice_epoch"])
        idx = np.asarray(batch["sluice_batch"])
        if epochs.size and (epochs != self._delivered.epoch).any():
            sluice._sluice.raise_error(
                "invalid_argument", "rows of epoch %d fed to a tracker of epoch %d"
                % (int(epochs[epochs != self._delivered.epoch][0]), self._delivered.epoch))
        ks, counts = np.unique(idx, return_counts=True)
        for k, c in zip(ks.tolist(), counts.tolist()):
            seen = self._rows.get(k, 0) + c
            if seen >= self._delivered.batch_size:
                self._rows.pop(k, None)
                self.add(k)
            else:
                self._rows[k] = seen

    def state_dict(self) -> Dict[str, Any]:
        return self._delivered.state_dict()
