"""Training throughput of ResNet-50 fed from JPEGs on local disk the usual PyTorch way, to set beside
trainpoint's image_folder input (data.resize="stretch", normalize="imagenet", no augmentation): torchvision's
ImageFolder (one subfolder per class) with Resize((S, S)), ToTensor and ImageNet's Normalize, read by a
DataLoader with W worker processes (shuffled, pinned on cuda, persistent workers, whole batches only); SGD
with momentum 0.9, lr 0.01, cross-entropy, torchvision's resnet50 (or --arch) with a class per subfolder.
WARMUP steps untimed, then STEPS timed (after torch.cuda.synchronize() on cuda), going round the folder again
when an epoch ends. On cuda, cudnn.benchmark on as in python_eager.py, and GPU 0's utilisation
sampled every 100 ms while timing (gpu_util.py, when pynvml imports). One JSON line.
usage: python_loader.py --data DIR --batch B --size S --workers W --steps N [--warmup N] [--device cpu|cuda]
       [--precision fp32|bf16] [--channels-last] [--arch resnet50]"""
import argparse
import contextlib
import json
import sys
import time

import torch
import torch.nn.functional as F
import torchvision
from torchvision import transforms

from gpu_util import start_gpu_util_sampling

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="image folder: one subfolder of JPEGs per class")
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--size", type=int, required=True, help="images stretched to SIZE x SIZE")
    parser.add_argument("--workers", type=int, required=True, help="DataLoader worker processes")
    parser.add_argument("--steps", type=int, required=True, help="timed steps")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    parser.add_argument("--channels-last", action="store_true")
    parser.add_argument("--arch", default="resnet50", help="a torchvision.models name")
    return parser.parse_args()


def endless(loader):
    """The loader's batches, epoch after epoch."""
    while True:
        yield from loader


def main():
    args = parse_args()
    torch.manual_seed(1)
    if args.device == "cuda":
        torch.cuda.set_device(0)
        torch.backends.cudnn.benchmark = True
    dataset = torchvision.datasets.ImageFolder(args.data, transforms.Compose([
        transforms.Resize((args.size, args.size)), transforms.ToTensor(),
        transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)]))
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch, shuffle=True,
                                         num_workers=args.workers, pin_memory=args.device == "cuda",
                                         persistent_workers=args.workers > 0, drop_last=True)
    memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
    model = getattr(torchvision.models, args.arch)(num_classes=len(dataset.classes))
    model = model.to(args.device, memory_format=memory_format).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    batches = endless(loader)

    def autocast():
        if args.precision == "bf16":
            return torch.autocast(args.device, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def step():
        images, labels = next(batches)
        images = images.to(args.device, non_blocking=True, memory_format=memory_format)
        labels = labels.to(args.device, non_blocking=True)
        optimizer.zero_grad()
        with autocast():
            loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()

    def synchronize():
        if args.device == "cuda":
            torch.cuda.synchronize()

    for _ in range(args.warmup):
        step()
    finish_sampling = None
    if args.device == "cuda":
        try:
            finish_sampling = start_gpu_util_sampling()
        except Exception as error:  # ImportError, or pynvml.NVMLError (only a working import can name it)
            print(f"python_loader.py: GPU utilisation not sampled: {type(error).__name__}: {error}",
                  file=sys.stderr)
    synchronize()
    started = time.perf_counter()
    for _ in range(args.steps):
        step()
    synchronize()
    seconds = time.perf_counter() - started
    gpu_util = finish_sampling() if finish_sampling else {"gpu_util_percent": None, "gpu_util_samples": None}
    config = (f"{args.arch} from JPEG, batch {args.batch} at {args.size}, {args.workers} workers, "
              f"{args.precision}")
    print(json.dumps({"engine": "python DataLoader", "config": config,
                      "images_per_s": round(args.batch * args.steps / seconds, 1), **gpu_util,
                      "device": args.device, "channels_last": args.channels_last}))


if __name__ == "__main__":
    main()
