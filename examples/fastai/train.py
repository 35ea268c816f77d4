"""A fastai image classifier, trained on every rank trainpoint starts (or torchrun: the same variables).

The images are an image folder, one subdirectory per class, in TRAINPOINT_DATA_DIR (trainpoint staged it from
data.source, s3:// included). fastai's own distributed training: `with learn.distrib_ctx():` reads RANK,
WORLD_SIZE and the rest, and hands the process group to Accelerate. Every epoch rank 0 saves a checkpoint
(model and optimizer) into TRAINPOINT_OUTPUT_DIR/checkpoints; a restarted job (a preempted pod, SIGTERM) finds
the newest there and goes on from the epoch after it. At the end rank 0 exports the Learner as model.pkl.
Every rank writes rank-<N>.json: what it saw (rank, world size, the epochs it trained, a digest of its
parameters), which tests/command's framework tests compare across ranks.
"""
import argparse
import hashlib
import json
import os
import re
import sys
import time
from pathlib import Path

import torch
from fastai.distributed import *  # noqa: F401,F403  (distrib_ctx, rank_distrib, num_distrib)
from fastai.vision.all import *  # noqa: F401,F403

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=5)
parser.add_argument("--arch", default="resnet34", help="resnet18, resnet34, ... (torchvision), or tiny")
parser.add_argument("--pretrained", action="store_true", help="start from ImageNet weights (downloads them)")
parser.add_argument("--size", type=int, default=224, help="images are resized to size x size")
parser.add_argument("--batch-size", type=int, default=32, help="per rank")
parser.add_argument("--lr", type=float, default=1e-3, help="peak of the one-cycle schedule, before scaling")
args = parser.parse_args()

data = Path(os.environ.get("TRAINPOINT_DATA_DIR", "data"))
out = Path(os.environ.get("TRAINPOINT_OUTPUT_DIR", "output"))
out.mkdir(parents=True, exist_ok=True)
rank, world = rank_distrib(), max(num_distrib(), 1)
print(f"rank {rank} of {world}: fastai on {data}", flush=True)

# The same split on every rank (seed), so that each rank validates on the same images.
dls = ImageDataLoaders.from_folder(data, valid_pct=0.2, seed=42, item_tfms=Resize(args.size), bs=args.batch_size,
                                   num_workers=0)
if args.arch == "tiny":
    torch.manual_seed(0)
    model = nn.Sequential(ConvLayer(3, 8, stride=2, norm_type=None), ConvLayer(8, 16, stride=2, norm_type=None),
                          nn.AdaptiveAvgPool2d(1), Flatten(), nn.Linear(16, dls.c))
    learn = Learner(dls, model, metrics=accuracy, path=out, model_dir="checkpoints")
else:
    learn = vision_learner(dls, getattr(models, args.arch), metrics=accuracy, pretrained=args.pretrained, path=out,
                           model_dir="checkpoints")


def parameters_digest(model):
    digest = hashlib.sha256()
    for name, value in sorted(model.named_parameters()):
        digest.update(name.encode())
        digest.update(value.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


class Hold(Callback):
    """After the first epoch's checkpoint, waits while $HOLD_FILE exists: the restart tests stop the job there."""
    order = SaveModelCallback.order + 10

    def after_epoch(self):
        hold = os.environ.get("HOLD_FILE")
        if hold and os.path.exists(hold):
            (out / f"held-{rank}").touch()
            while os.path.exists(hold):
                time.sleep(0.1)


class Trained(Callback):
    def before_train(self):  # not called for the epochs a resumed fit skips
        trained.append(self.epoch)


# Resume: the newest checkpoint rank 0 saved (model_<epoch>.pth, with the optimizer's state).
checkpoints = sorted((int(m.group(1)), p) for p in (out / "checkpoints").glob("model_*.pth")
                     if (m := re.fullmatch(r"model_(\d+)\.pth", p.name)))
start_epoch = 0
if checkpoints:
    epoch, _ = checkpoints[-1]
    learn.load(f"model_{epoch}", with_opt=True)
    start_epoch = epoch + 1
    print(f"rank {rank}: resumed from checkpoints/model_{epoch}.pth, going on at epoch {start_epoch}", flush=True)
initial = parameters_digest(learn.model)
trained = []

# Linear scaling of the learning rate with the number of ranks (docs/guide.md). Without a GPU, Accelerate
# must be told cpu=True, or it trains each rank alone (no process group, no DDP) without a word; SyncBatchNorm
# needs CUDA.
on_cpu = not torch.cuda.is_available()
if on_cpu:
    # fastai 2.8's DistributedDL broadcasts rank 0's shuffled order through a CUDA tensor (written for NCCL):
    # with Gloo on CPU the same broadcast takes the CPU tensor.
    def _broadcast(self, t, rank):
        t = torch.LongTensor(t)
        torch.distributed.broadcast(t, rank)
        return t.tolist()
    DistributedDL._broadcast = _broadcast
with learn.distrib_ctx(sync_bn=not on_cpu, cpu=on_cpu):
    learn.fit_one_cycle(args.epochs, args.lr * world, start_epoch=start_epoch,
                        cbs=[SaveModelCallback(every_epoch=True, with_opt=True), Hold(), Trained()])
    # Held until the process ends (see the end): the callback keeps Accelerate's DistributedDataParallel wrapper,
    # which fastai drops here, and whose teardown under PyTorch 2.11's Gloo may abort the rank.
    distributed_trainer = next((cb for cb in learn.cbs if isinstance(cb, DistributedTrainer)), None)

if rank == 0:
    learn.export(out / "model.pkl")
report = {"framework": "fastai", "rank": rank, "world_size": world, "local_rank": int(os.environ.get("LOCAL_RANK", 0)),
          "pid": os.getpid(), "ppid": os.getppid(), "resumed_from": start_epoch - 1 if start_epoch else None,
          "epochs_trained": trained, "initial": initial, "final": parameters_digest(learn.model),
          "valid_loss": float(learn.recorder.values[-1][1]) if learn.recorder.values else None,
          "env": {name: os.environ.get(name) for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")}}
(out / f"rank-{rank}.json").write_text(json.dumps(report) + "\n")
print(f"rank {rank}: done, epochs {trained}", flush=True)
# PyTorch 2.11's Gloo (DDP on CPUs) can abort a finished rank when the process group's objects are torn down
# ("terminate called without an active exception": pytorch/pytorch#190489); seen once in this example on a rank
# after its last epoch. Everything is written by now: leave without the DDP wrapper's and the interpreter's
# teardown, as examples/ddp-command does.
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
