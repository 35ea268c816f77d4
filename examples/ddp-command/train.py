"""An ordinary PyTorch DDP training script, run by trainpoint in command mode ([job] command in train.toml).

trainpoint clones this repository at the job's commit, then starts this script once per GPU (or per
dist.nproc_per_node on CPU) with torchrun's variables: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
MASTER_ADDR, MASTER_PORT. It also sets TRAINPOINT_DATA_DIR (data.source) and TRAINPOINT_OUTPUT_DIR
(job.output). Its packages beyond PyTorch come from requirements.txt (job.requirements). The same script
runs under `torchrun --nproc_per_node 2 train.py` on a workstation.
"""
import argparse
import os
import sys

import numpy as np  # from requirements.txt (the image has it: nothing is downloaded)
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def load_table(path):
    table = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float32)  # x1, x2, label
    return TensorDataset(torch.from_numpy(table[:, :2]), torch.from_numpy(table[:, 2]).long())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)  # per rank: the global batch is this x WORLD_SIZE
    parser.add_argument("--lr", type=float, default=0.05)
    args = parser.parse_args()

    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")  # reads RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    torch.manual_seed(0)  # the same initial weights everywhere (DDP also broadcasts them from rank 0)

    data = load_table(os.path.join(os.environ["TRAINPOINT_DATA_DIR"], "points.csv"))
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler)
    model = DistributedDataParallel(
        nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 2)).to(device),
        device_ids=[device.index] if cuda else None)
    # Linear scaling: the global batch grows with the world size, so does the learning rate.
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * world, momentum=0.9)

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)  # a different shuffle each epoch, the same on every rank
        total, correct, loss_sum = 0, 0, 0.0
        for features, labels in loader:
            features, labels = features.to(device), labels.to(device)
            logits = model(features)
            loss = nn.functional.cross_entropy(logits, labels)
            optimizer.zero_grad()
            loss.backward()  # DDP all-reduces the gradients here
            optimizer.step()
            loss_sum += loss.item() * len(labels)
            correct += (logits.argmax(1) == labels).sum().item()
            total += len(labels)
        stats = torch.tensor([loss_sum, correct, total], dtype=torch.float64, device=device)
        dist.all_reduce(stats)  # every rank's share, summed
        if rank == 0:
            print(f"epoch {epoch + 1}/{args.epochs}: loss {stats[0] / stats[2]:.4f}, "
                  f"accuracy {stats[1] / stats[2]:.3f} ({int(stats[2])} samples on {world} ranks)", flush=True)

    if rank == 0:
        out = os.environ.get("TRAINPOINT_OUTPUT_DIR", ".")
        torch.save(model.module.state_dict(), os.path.join(out, "model.pt"))
        with open(os.path.join(out, "accuracy.txt"), "w") as f:
            f.write(f"{stats[1] / stats[2]:.4f}\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # PyTorch 2.11's Gloo (DDP on CPUs) can abort a finished rank while Python shuts down: a worker thread of the
    # process group, which outlives destroy_process_group, drops a tensor then and dies with "terminate called
    # without an active exception" (pytorch/pytorch#190489). Everything is written by now: leave without the
    # interpreter's teardown.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
