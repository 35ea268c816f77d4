"""Lightning started by an outside launcher: Trainer(strategy="ddp", devices=LOCAL_WORLD_SIZE) must detect it
as TorchElastic (RANK, GROUP_RANK, LOCAL_RANK, LOCAL_WORLD_SIZE set) and start no processes of its own. Each
rank records the cluster environment Lightning chose and its pid and parent's pid. Checkpoints: ModelCheckpoint's
last.ckpt, resumed with ckpt_path."""
import os

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint

import common

EPOCHS = int(os.environ.get("EPOCHS", "3"))


class Regression(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))

    def training_step(self, batch, _):
        inputs, targets = batch
        return torch.nn.functional.mse_loss(self.net(inputs), targets)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


class Record(L.Callback):
    def __init__(self):
        self.trained, self.resumed, self.initial = [], None, None

    def on_train_start(self, trainer, module):
        self.initial = common.digest(module)
        if trainer.current_epoch > 0:
            self.resumed = trainer.current_epoch - 1

    def on_train_epoch_start(self, trainer, module):
        self.trained.append(trainer.current_epoch)
        common.fail_if_asked(trainer.global_rank)
        # ModelCheckpoint saved the previous epoch's last.ckpt at its end: hold here, once it is on disk.
        if trainer.current_epoch == 1:
            # Lightning catches SIGTERM itself ("Received SIGTERM") and stops at its next step.
            common.hold(trainer.global_rank, lambda: trainer.received_sigterm)


torch.manual_seed(int(os.environ.get("RANK", "0")))
generator = torch.Generator().manual_seed(0)
x = torch.randn(256, 8, generator=generator)
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(dim=1, keepdim=True)), batch_size=32)
local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
checkpoints = os.path.join(common.out, "checkpoints")
record = Record()
trainer = L.Trainer(accelerator="cpu", strategy="ddp", devices=local_world,
                    num_nodes=int(os.environ.get("WORLD_SIZE", "1")) // local_world, max_epochs=EPOCHS, logger=False,
                    enable_progress_bar=False, enable_model_summary=False,
                    callbacks=[ModelCheckpoint(dirpath=checkpoints, save_last=True), record])
model = Regression()
last = os.path.join(checkpoints, "last.ckpt")
trainer.fit(model, loader, ckpt_path=last if os.path.exists(last) else None)
common.report(trainer.global_rank, framework="lightning",
              cluster_environment=type(trainer.strategy.cluster_environment).__name__,
              world_size=trainer.world_size, resumed_from=record.resumed, epochs_trained=record.trained,
              initial=record.initial, final=common.digest(model))
common.leave()
