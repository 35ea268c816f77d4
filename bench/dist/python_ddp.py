"""Python PyTorch's DistributedDataParallel on the same MLP, batch and threads as dist_bench.cpp.
Run with RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT set for 2 ranks, or none for world size 1."""
import json
import os
import sys
import time

import torch
import torch.distributed as dist

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 30
batch = int(sys.argv[2]) if len(sys.argv) > 2 else 64
torch.set_num_threads(1)
torch.manual_seed(1)
model = torch.nn.Sequential(
    torch.nn.Linear(512, 2048), torch.nn.ReLU(),
    torch.nn.Linear(2048, 2048), torch.nn.ReLU(),
    torch.nn.Linear(2048, 2048), torch.nn.ReLU(),
    torch.nn.Linear(2048, 10))
world = int(os.environ.get("WORLD_SIZE", "1"))
if world > 1:
    dist.init_process_group("gloo")
    model = torch.nn.parallel.DistributedDataParallel(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
inputs = torch.randn(batch, 512)
labels = torch.randint(0, 10, (batch,))
total = 0.0
for step in range(5 + steps):
    if world > 1:
        dist.barrier()
    start = time.perf_counter()
    optimizer.zero_grad()
    torch.nn.functional.cross_entropy(model(inputs), labels).backward()
    optimizer.step()
    if step >= 5:
        total += time.perf_counter() - start
if int(os.environ.get("RANK", "0")) == 0:
    print(json.dumps({"world_size": world, "step_ms": round(1000 * total / steps, 2)}))
