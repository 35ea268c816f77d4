"""Which memory format each ResNet stage trains fastest in, measured on torchvision's model before trainpoint's
was changed (issue 47, docs/benchmarks.md "The last stage in NCHW"): the whole model in NCHW, in channels_last, or
in channels_last up to stage K and NCHW from stage K on (`fromK`: the stages' weights contiguous and their input
made contiguous). Synthetic batch, cross-entropy, SGD with momentum (foreach), one thread; the layouts run one
after another in each round; medians of the rounds in images per CPU-second, and each against channels_last.
usage: stage_layouts.py ARCH BATCH SIZE ROUNDS STEPS [LAYOUTS (nchw,cl,from4,from3)]"""
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision


class ToNCHW(nn.Module):
    def forward(self, x):
        return x.contiguous()


def build(arch, layout):
    torch.manual_seed(0)
    model = getattr(torchvision.models, arch)(num_classes=10)
    if layout == "nchw":
        return model, False
    model = model.to(memory_format=torch.channels_last)
    if layout.startswith("from"):
        first = int(layout[4:])
        for stage in range(first, 5):
            for parameter in getattr(model, f"layer{stage}").parameters():
                parameter.data = parameter.data.contiguous()
        setattr(model, f"layer{first}", nn.Sequential(ToNCHW(), getattr(model, f"layer{first}")))
    return model, True


def main():
    arch, batch, size, rounds, steps = sys.argv[1], *map(int, sys.argv[2:6])
    layouts = sys.argv[6].split(",") if len(sys.argv) > 6 else ["nchw", "cl", "from4", "from3"]
    torch.set_num_threads(1)
    runs = {}
    for layout in layouts:
        model, channels_last = build(arch, layout)
        inputs = torch.randn(batch, 3, size, size)
        if channels_last:
            inputs = inputs.contiguous(memory_format=torch.channels_last)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, foreach=True)
        runs[layout] = (model, inputs, torch.randint(0, 10, (batch,)), optimizer)

    def step(model, inputs, labels, optimizer):
        optimizer.zero_grad()
        F.cross_entropy(model(inputs), labels).backward()
        optimizer.step()

    for run in runs.values():
        for _ in range(2):
            step(*run)
    rates = {layout: [] for layout in runs}
    for _ in range(rounds):
        for layout, run in runs.items():
            began = time.process_time()
            for _ in range(steps):
                step(*run)
            rates[layout].append(steps * batch / (time.process_time() - began))
    base = statistics.median(rates["cl"]) if "cl" in rates else None
    for layout, values in rates.items():
        median = statistics.median(values)
        against = f"  {median / base:.3f}x channels_last" if base else ""
        print(f"torch {torch.__version__} {arch} batch {batch} {size}px {layout:6s} {median:8.2f} images/CPU-s"
              f"{against}  rounds: " + " ".join(f"{value:.1f}" for value in values))


main()
