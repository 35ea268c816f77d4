"""One epoch of torchvision's DataLoader over an image folder with the same transforms as tp-bench-data
(RandomResizedCrop 224, RandomHorizontalFlip, ToTensor, Normalize with ImageNet statistics), batch 64.
Prints one JSON line: images, seconds, CPU seconds (this process and its worker processes)."""
import json
import resource
import sys
import time

import torch
from torchvision import datasets, transforms


def cpu_seconds():
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def main():
    directory, workers = sys.argv[1], int(sys.argv[2])
    batch, size = 64, 224
    torch.set_num_threads(1)
    transform = transforms.Compose([
        transforms.RandomResizedCrop(size),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
    ])
    dataset = datasets.ImageFolder(directory, transform)
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch, shuffle=True, num_workers=workers)
    cpu_start = cpu_seconds()
    start = time.perf_counter()
    images = 0
    for inputs, _ in loader:
        images += inputs.shape[0]
    seconds = time.perf_counter() - start
    del loader  # joins the workers, so their CPU time is counted
    print(json.dumps({"loader": "torchvision", "workers": workers, "images": images, "seconds": round(seconds, 3),
                      "cpu_seconds": round(cpu_seconds() - cpu_start, 3)}))


if __name__ == "__main__":
    main()
