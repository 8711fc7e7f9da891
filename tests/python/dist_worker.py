"""One rank of tests/python/test_distributed.py, started with the environment
torchrun sets (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT).

    dist_worker.py PLAN_DIR DATA OUT_JSON

Joins a gloo process group, reads two epochs with sluice.torch.loader (rank
and world size from torch.distributed), all-gathers every rank's sample
indices and batch counts, and rank 0 writes them to OUT_JSON."""

import json
import os
import sys

import torch
import torch.distributed as dist

import sluice
import sluice.torch


def main():
    plan_dir, data, out = sys.argv[1:4]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    plan = sluice.load(plan_dir, vars={"DATA": data})
    loader = sluice.torch.loader(plan, threads=1)
    inner = loader.sluice_loader
    result = {"local_rank": sluice.local_rank(), "device": str(sluice.torch.local_device()),
              "len": len(loader), "epochs": []}
    for epoch in range(2):
        loader.set_epoch(epoch)
        samples, batches = [], 0
        for batch in inner:  # sluice tensors carry their sample indices
            samples.extend(int(i) for i in batch["label"].sample_indices)
            batches += 1
        result["epochs"].append({"samples": samples, "batches": batches})
    state = sluice.torch.gather_state_dict(loader)  # a collective: every rank
    result["state"] = state
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, result)
    if rank == 0:
        with open(out, "w") as f:
            json.dump(gathered, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
