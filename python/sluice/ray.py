"""sluice.ray: Sluice preprocessing on a Ray cluster (docs/distributed.md, "Ray").

Sluice's epoch order is a stateless permutation, so distributing an epoch
only means handing out batch indices; each worker runs the C++ pipeline (GIL
released) over its indices, and batch k has the contents of a local loader's
batch k (same plan, seed and epoch; world size 1). Two forms:

Ray Data (Ray Train's streaming_split, map_batches, ...):

    import ray, sluice, sluice.ray
    plan = sluice.load("train.plan", vars={"DATA": "/shared/imagenet"})
    src = sluice.ray.SluiceDatasource(plan, epoch=0)     # or state=saved_state
    ds = ray.data.read_datasource(src)
    tracker = src.tracker()
    for batch in ds.iter_batches(batch_size=plan.batch["size"], batch_format="numpy"):
        ...; tracker.update(batch)                        # rows carry sluice_batch
    saved_state = tracker.state_dict()

Actors (trainers that do not use Ray Data):

    loader = sluice.ray.ActorLoader(plan, num_actors=4, output="torch")
    for batch in loader:                                  # RayBatch {field: tensor}
        ...
    saved_state = loader.state_dict()                     # plain ints, checkpointable

Both keep Sluice's own state ({epoch, position, spec_hash, delivered_ahead},
the dict every Sluice loader's state_dict() has): Ray Data has no resumable
iterator. The plan directory travels to the workers through Ray's object
store; the data path (${DATA}) must be readable on every node (a shared file
system, or an http(s):// / s3:// location).

Needs Ray (`pip install sluice[ray]`)."""

from __future__ import annotations

from ._ray_actors import ActorLoader, AutoscalePolicy, RayBatch  # noqa: F401
from ._ray_data import INDEX_COLUMNS, DeliveryTracker, SluiceDatasource  # noqa: F401

__all__ = ["ActorLoader", "AutoscalePolicy", "DeliveryTracker", "RayBatch", "SluiceDatasource",
           "INDEX_COLUMNS"]
