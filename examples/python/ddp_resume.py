#!/usr/bin/env python3
"""DDP training fed by Sluice, checkpointed with the loader's state and resumed
on another number of ranks (docs/distributed.md).

Phase 1, two ranks (torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
MASTER_PORT; Debian's torchrun fails on Python 3.11, so set them yourself):

    for r in 0 1; do RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 \\
      MASTER_PORT=29511 PYTHONPATH=build/python /usr/bin/python3 \\
      examples/python/ddp_resume.py --plan PLAN --data DIR --ckpt ck.pt --steps 3 & done; wait

Phase 2, one rank: the same command with --resume and RANK=0 WORLD_SIZE=1
trains on the rest of the epoch: every sample the two ranks had not consumed,
once. Each phase prints one JSON line per rank ({"rank", "world", "steps",
"samples", "loss", "state"}).

The model is a small CNN; DDP runs on the gloo backend (CPU), or NCCL when
CUDA is available (batches then go to cuda:LOCAL_RANK).
"""

import argparse
import json

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import sluice
import sluice.torch


class Net(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, classes)

    def forward(self, x):
        x = F.relu(self.conv(x))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plan", required=True, help="a compiled plan directory")
    ap.add_argument("--data", required=True, help="the plan's ${DATA}")
    ap.add_argument("--ckpt", required=True, help="checkpoint file (written, or read with --resume)")
    ap.add_argument("--steps", type=int, default=3, help="steps to train (None: rest of the epoch)")
    ap.add_argument("--resume", action="store_true", help="restore --ckpt and train to epoch end")
    ap.add_argument("--classes", type=int, default=3)
    args = ap.parse_args()

    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = sluice.torch.local_device()  # cuda:LOCAL_RANK, or cpu
    torch.manual_seed(0)
    model = Net(args.classes).to(device)
    ddp = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if cuda else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)

    plan = sluice.load(args.plan, vars={"DATA": args.data})
    loader = sluice.torch.loader(plan, device=device if cuda else None, threads=1)
    epoch = 0
    if args.resume:
        ckpt = torch.load(args.ckpt)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optim"])
        loader.load_state_dict(ckpt["loader"])  # saved by 2 ranks, restored on `world`
        epoch = ckpt["loader"]["epoch"]

    loader.set_epoch(epoch)  # keeps the restored mid-epoch position
    steps, samples, loss_value = 0, 0, float("nan")
    for batch in loader:
        x = batch["image"].float()
        y = batch["label"].long()
        loss = F.cross_entropy(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        steps += 1
        samples += x.shape[0]
        loss_value = float(loss)
        if not args.resume and steps == args.steps:
            break

    state = sluice.torch.gather_state_dict(loader)  # every rank calls it; the same result
    if rank == 0 and not args.resume:
        torch.save({"model": model.state_dict(), "optim": opt.state_dict(), "loader": state},
                   args.ckpt)
    print(json.dumps({"rank": rank, "world": world, "steps": steps, "samples": samples,
                      "loss": loss_value, "state": state}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
