"""Plain torch.distributed: init_process_group("gloo") from torchrun's variables, DistributedDataParallel, a
checkpoint per epoch by rank 0, resumed at the start."""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import common

EPOCHS = int(os.environ.get("EPOCHS", "3"))
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(rank)  # different on every rank: DDP's broadcast from rank 0 makes them equal
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
checkpoint = os.path.join(common.out, "checkpoint.pt")
start, resumed = 0, None
if os.path.exists(checkpoint):
    state = torch.load(checkpoint)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    start = resumed = state["epoch"] + 1
ddp = DistributedDataParallel(model)
initial = common.digest(model)
generator = torch.Generator().manual_seed(0)
x = torch.randn(256, 8, generator=generator)
y = x.sum(dim=1, keepdim=True)
trained = []
for epoch in range(start, EPOCHS):
    trained.append(epoch)
    common.fail_if_asked(rank)
    for step in range(rank, 256 // 32, world):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x[step * 32:(step + 1) * 32]), y[step * 32:(step + 1) * 32])
        loss.backward()
        optimizer.step()
    if rank == 0:
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch},
                   checkpoint + ".tmp")
        os.replace(checkpoint + ".tmp", checkpoint)
    dist.barrier()
    common.hold(rank)
common.report(rank, framework="torch.distributed", torch=torch.__version__, world_size=world,
              resumed_from=None if resumed is None else resumed - 1, epochs_trained=trained, initial=initial,
              final=common.digest(model))
dist.destroy_process_group()
common.leave()
