"""Exports the model trainpoint trains: a small ResNet-style CNN for 3-channel 32x32 images, as TorchScript.

    python3 export.py            # writes model.ts; commit it, then trainpoint trains it (model.torchscript)

trainpoint calls forward(images) with a float batch [N, 3, 32, 32] and expects class scores [N, classes].
"""
import argparse

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(x + self.bn2(self.conv2(y)))


class Net(nn.Module):
    def __init__(self, classes: int, width: int = 16):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.blocks = nn.Sequential(Block(width), nn.MaxPool2d(2), Block(width), nn.MaxPool2d(2))
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--classes", type=int, default=3)
    parser.add_argument("--out", default="model.ts")
    args = parser.parse_args()
    torch.manual_seed(0)
    scripted = torch.jit.script(Net(args.classes))
    scripted.save(args.out)
    print(f"wrote {args.out}: {sum(p.numel() for p in scripted.parameters())} parameters")
