"""Accelerate as torchrun would start it: Accelerator(cpu=True) (without a GPU Accelerate trains each rank alone
unless told cpu=True), prepare(), save_state/load_state for the checkpoint."""
import json
import os

import torch
from accelerate import Accelerator

import common

EPOCHS = int(os.environ.get("EPOCHS", "3"))
accelerator = Accelerator(cpu=True)
rank, world = accelerator.process_index, accelerator.num_processes
torch.manual_seed(rank)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
generator = torch.Generator().manual_seed(0)
x = torch.randn(256, 8, generator=generator)
data = torch.utils.data.TensorDataset(x, x.sum(dim=1, keepdim=True))
loader = torch.utils.data.DataLoader(data, batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(1))
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
state_dir = os.path.join(common.out, "checkpoints", "accelerate")
marker = os.path.join(state_dir, "epoch.json")
start, resumed = 0, None
if os.path.exists(marker):
    accelerator.load_state(state_dir)
    resumed = json.load(open(marker))["epoch"]
    start = resumed + 1
initial = common.digest(accelerator.unwrap_model(model))
trained = []
for epoch in range(start, EPOCHS):
    trained.append(epoch)
    common.fail_if_asked(rank)
    for inputs, targets in loader:
        optimizer.zero_grad()
        accelerator.backward(torch.nn.functional.mse_loss(model(inputs), targets))
        optimizer.step()
    accelerator.save_state(state_dir)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        with open(marker + ".tmp", "w") as file:
            json.dump({"epoch": epoch}, file)
        os.replace(marker + ".tmp", marker)
    accelerator.wait_for_everyone()
    common.hold(rank)
common.report(rank, framework="accelerate", distributed_type=str(accelerator.distributed_type), world_size=world,
              resumed_from=resumed, epochs_trained=trained, initial=initial,
              final=common.digest(accelerator.unwrap_model(model)))
accelerator.end_training()
common.leave()
