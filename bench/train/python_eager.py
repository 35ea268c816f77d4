"""Training step throughput of the same architectures in Python PyTorch eager mode (Debian's python3-torch):
nn.Module, cross-entropy, backward, SGD with momentum, synthetic data. One JSON line, as tp-train-bench.
With --channels-last, the model and inputs in channels_last memory format (what trainpoint does by default for
its convolutional nets; a Python user has to ask for it). bench/train/run.sh runs that variant with
OPENBLAS_NUM_THREADS set as well and calls it "python eager, tuned".
usage: python_eager.py ARCH BATCH SIZE CHANNELS STEPS THREADS [--channels-last]"""
import json
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


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


def main():
    channels_last = "--channels-last" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--channels-last"]
    arch, batch, size, channels, steps, threads = args[0], *map(int, args[1:])
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    if arch == "small_cnn":
        model = SmallCNN(channels, size, 10)
    else:
        import torchvision
        model = getattr(torchvision.models, arch)(num_classes=10)
        if channels != 3:
            model.conv1 = nn.Conv2d(channels, 64, 7, 2, 3, bias=False)
    model.train()
    inputs = torch.randn(batch, channels, size, size)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
        inputs = inputs.contiguous(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    labels = torch.randint(0, 10, (batch,))

    def step():
        optimizer.zero_grad()
        F.cross_entropy(model(inputs), labels).backward()
        optimizer.step()

    for _ in range(5):
        step()
    started, cpu_started = time.perf_counter(), time.process_time()
    for _ in range(steps):
        step()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    print(json.dumps({"engine": "python eager, tuned" if channels_last else "python eager", "config": f"{arch} batch {batch}, {channels}x{size}x{size}", "images_per_s": round(batch * steps / seconds, 1),
                      "images_per_cpu_s": round(batch * steps / cpu, 1)}))


main()
