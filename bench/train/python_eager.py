"""Training step throughput of the same architectures in Python PyTorch eager mode: nn.Module, cross-entropy,
backward, SGD with momentum, synthetic data. One JSON line, as tp-train-bench.
ARCH is small_cnn (trainpoint's) or a torchvision.models name (resnet18, resnet50...).
With --channels-last, the model and inputs in channels_last memory format (what trainpoint does by default for
its convolutional nets; a Python user has to ask for it). bench/train/run.sh runs that variant on the CPU with
OPENBLAS_NUM_THREADS set as well: without --device (run.sh's form) it is named "python eager, tuned".
--device cpu|cuda: on cuda, model and synthetic batch on GPU 0 and cudnn.benchmark on, as trainpoint does on a
GPU; TF32 as PyTorch's defaults have it (cuDNN's convolutions, not matmuls), as in trainpoint; the clock starts
and stops after torch.cuda.synchronize(). With --device the engine is "python eager" whatever the memory format: the fields
device, precision, channels_last and ddp tell the runs apart (scripts/gpu-check's table names engines so).
--precision bf16|fp16: torch.autocast around forward and loss (fp16 with a GradScaler on cuda; torch 1.13's
CPU autocast has bf16 only).
--ddp: the model in DistributedDataParallel at world size 1 (NCCL on cuda, Gloo on cpu), engine "python DDP".
--warmup: untimed steps first (5).
--compile: the model through torch.compile (inductor; its compilation happens in the warm-up steps), engine
"python torch.compile": what a user who tunes would pick.
The line also gives host_ms_per_step: the milliseconds per step the host spent in forward and backward and in
the optimizer step (queueing the GPU's work; set beside tp-train-bench's host and GPU times).
usage: python_eager.py ARCH BATCH SIZE CHANNELS STEPS THREADS [--channels-last] [--device cpu|cuda]
       [--precision fp32|bf16|fp16] [--ddp] [--warmup N] [--compile]"""
import argparse
import contextlib
import json
import os
import socket
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


class SmallCNN(nn.Module):
    """trainpoint's small_cnn (runtime/model/model.cpp): two 3x3 convolutions with max pooling, two linear layers."""

    def __init__(self, channels, size, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc1 = nn.Linear(64 * (size // 4) * (size // 4), 128)
        self.fc2 = nn.Linear(128, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc2(x)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("arch")
    for name in ("batch", "size", "channels", "steps", "threads"):
        parser.add_argument(name, type=int)
    parser.add_argument("--channels-last", action="store_true")
    parser.add_argument("--device", choices=("cpu", "cuda"))  # None: run.sh's form, on the CPU
    parser.add_argument("--precision", choices=("fp32", "bf16", "fp16"), default="fp32")
    parser.add_argument("--ddp", action="store_true")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--compile", action="store_true")
    return parser.parse_args()


def join_single_process_group(device):
    """Rank 0 of a process group of one, rendezvous on a free loopback port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # One process on this machine: loopback is all the collectives need (the GPU machine has no network).
    os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("nccl" if device == "cuda" else "gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=0, world_size=1)


def engine_name(args):
    if args.ddp:
        return "python DDP"
    if args.compile:
        return "python torch.compile"
    if args.channels_last:  # run.sh's form (no --device) calls it tuned
        return "python eager, tuned" if args.device is None else "python eager, channels_last"
    return "python eager"


def main():
    args = parse_args()
    device = args.device or "cpu"
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    if device == "cuda":
        torch.cuda.set_device(0)
        torch.backends.cudnn.benchmark = True
    if args.arch == "small_cnn":
        model = SmallCNN(args.channels, args.size, 10)
    else:
        import torchvision
        model = getattr(torchvision.models, args.arch)(num_classes=10)
        if args.channels != 3:
            model.conv1 = nn.Conv2d(args.channels, 64, 7, 2, 3, bias=False)
    model = model.to(device).train()
    inputs = torch.randn(args.batch, args.channels, args.size, args.size, device=device)
    labels = torch.randint(0, 10, (args.batch,), device=device)
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
        inputs = inputs.contiguous(memory_format=torch.channels_last)
    if args.compile:
        model = torch.compile(model)
    if args.ddp:
        join_single_process_group(device)
        model = nn.parallel.DistributedDataParallel(model, device_ids=[0] if device == "cuda" else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda") if args.precision == "fp16" and device == "cuda" else None

    def autocast():
        if args.precision == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(device, dtype=AUTOCAST_DTYPES[args.precision])

    # The host's seconds in forward and backward and in the optimizer step (no synchronisation: the time the
    # calls take to queue their work, as tp-train-bench's host_ms_per_step).
    host_seconds = {"forward_backward": 0.0, "optimizer": 0.0}

    def step():
        began = time.perf_counter()
        optimizer.zero_grad()
        with autocast():
            loss = F.cross_entropy(model(inputs), labels)
        (scaler.scale(loss) if scaler is not None else loss).backward()
        backward_done = time.perf_counter()
        if scaler is not None:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        host_seconds["forward_backward"] += backward_done - began
        host_seconds["optimizer"] += time.perf_counter() - backward_done

    def synchronize():
        if device == "cuda":
            torch.cuda.synchronize()

    for _ in range(args.warmup):
        step()
    synchronize()
    host_seconds.update(forward_backward=0.0, optimizer=0.0)
    started, cpu_started = time.perf_counter(), time.process_time()
    for _ in range(args.steps):
        step()
    synchronize()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    if args.ddp:
        dist.destroy_process_group()
    images = args.batch * args.steps
    print(json.dumps({"engine": engine_name(args),
                      "config": f"{args.arch} batch {args.batch}, {args.channels}x{args.size}x{args.size}",
                      "images_per_s": round(images / seconds, 2), "images_per_cpu_s": round(images / cpu, 2),
                      "device": device, "precision": args.precision, "channels_last": args.channels_last,
                      "ddp": args.ddp,
                      "host_ms_per_step": {part: 1000 * value / args.steps for part, value in host_seconds.items()}}))


main()
