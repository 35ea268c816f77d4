"""Predictions the usual PyTorch way, to set beside `trainpoint predict`: torch.jit.load(model.pt) and a
torchvision DataLoader over the image files below DATA (every .jpg/.jpeg/.png, in path order), each made into the
model's input by what model.pt carries (Resize((S, S)) bilinear with antialias, ToTensor, Normalize by pixel_mean
and pixel_std), W worker processes, batches of B, torch.no_grad(), softmax, top 3, written as CSV lines as
trainpoint writes them. Prints one JSON line: images, seconds, CPU seconds of this process and its workers.
usage: python_predict.py MODEL.pt DATA OUT.csv --workers W [--batch B] [--threads T]"""
import argparse
import csv
import json
import os
import resource
import time

import torch
from PIL import Image
from torchvision import transforms


class Files(torch.utils.data.Dataset):
    def __init__(self, root, transform):
        self.root = root
        self.files = sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs
                            if f.lower().endswith((".jpg", ".jpeg", ".png")))
        self.transform = transform

    def __len__(self):
        return len(self.files)

    def __getitem__(self, index):
        with Image.open(os.path.join(self.root, self.files[index])) as image:
            return self.transform(image.convert("RGB")), index


def cpu_seconds():
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("data")
    parser.add_argument("out")
    parser.add_argument("--workers", type=int, required=True)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    started, cpu_started = time.perf_counter(), cpu_seconds()
    model = torch.jit.load(args.model).eval()
    size = model.image_size
    transform = transforms.Compose([transforms.Resize((size, size), antialias=True), transforms.ToTensor(),
                                    transforms.Normalize(model.pixel_mean, model.pixel_std)])
    dataset = Files(args.data, transform)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch, num_workers=args.workers)
    classes = model.class_names
    with open(args.out, "w", newline="") as file, torch.no_grad():
        out = csv.writer(file)
        out.writerow(["id", "prediction", "probability", "class_2", "probability_2", "class_3", "probability_3"])
        for inputs, indices in loader:
            top = torch.softmax(model(inputs), 1).topk(min(3, len(classes)))
            for index, values, picks in zip(indices.tolist(), top.values.tolist(), top.indices.tolist()):
                row = [dataset.files[index]]
                for value, pick in zip(values, picks):
                    row += [classes[pick], f"{value:.6g}"]
                out.writerow(row)
    del loader  # the workers exit, so that their CPU time is counted
    print(json.dumps({"engine": "python", "images": len(dataset), "seconds": time.perf_counter() - started,
                      "cpu_seconds": cpu_seconds() - cpu_started, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
