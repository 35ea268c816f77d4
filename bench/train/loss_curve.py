"""Helper of bench/train/loss_curve.sh: ResNet-18's loss curve in trainpoint against Python PyTorch's.

  loss_curve.py init SEED CLASSES OUT.pt          torchvision resnet18's random init for SEED, as a state dict
  loss_curve.py train DATA INIT.pt OUT.jsonl ...  trains torchvision's resnet18 as trainpoint's built-in engine
                                                  does (see train's --help), one metrics line per epoch
  loss_curve.py train ... --order TRACE           the same, on trainpoint's own sample order (its
                                                  TRAINPOINT_TRACE_SAMPLES file): the engines apart from the order
  loss_curve.py check MODEL.pt DATA METRICS.jsonl trainpoint's model.pt on this script's validation inputs:
                                                  its loss against trainpoint's last valid_loss (same inputs?)
  loss_curve.py table RESULTS_DIR                 Markdown table of RESULTS_DIR/{python,trainpoint}-SEED.jsonl
                                                  and the verdict; with replay-SEED.jsonl (--order runs), how far
                                                  trainpoint is from Python on the same order

DATA holds train/ and valid/, each with one folder of images per class (trainpoint's fastai layout).
What trainpoint does, and this script copies (runtime/train, runtime/data; docs/spec.md):
- inputs: RGB, (pixel / 255 - ImageNet mean) / ImageNet std, no augmentation (images already image_size:
  no resize on either side);
- SGD as torch.optim.SGD (coupled weight decay on every parameter, BatchNorm's and biases too; one group);
- the lr set before each step from the epochs trained so far, counted by samples (epoch + samples done
  before the step / samples per epoch), over train.epochs: one_cycle (fastai's: cosine from lr/25 up to lr over
  `warmup` of the run, then cosine down to lr/1e5) or constant; no momentum cycling;
- train_loss: the mean of the epoch's batch losses weighted by their samples (train mode, as computed in the
  step); valid_loss and accuracy over the whole validation set in eval mode;
- a new shuffle each epoch, the last partial batch kept (drop_last false).
"""
import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def images(folder, size):
    """Every image under folder/<class>/ (classes and files sorted, as ImageFolder and trainpoint sort them),
    as one uint8 tensor N x 3 x size x size and the labels."""
    import numpy
    import torch
    from PIL import Image

    classes = sorted(p.name for p in Path(folder).iterdir() if p.is_dir())
    pixels, labels = [], []
    for label, name in enumerate(classes):
        for file in sorted((Path(folder) / name).iterdir()):
            if file.suffix.lower() not in (".jpg", ".jpeg", ".png"):
                continue
            with Image.open(file) as image:
                image = image.convert("RGB")
                if image.size != (size, size):
                    image = image.resize((size, size), Image.BILINEAR)
                pixels.append(numpy.asarray(image).copy())
            labels.append(label)
    x = torch.from_numpy(numpy.stack(pixels)).permute(0, 3, 1, 2).contiguous()
    return x, torch.tensor(labels), classes


def normalize(pixels):
    import torch

    mean = torch.tensor(MEAN).view(1, 3, 1, 1)
    std = torch.tensor(STD).view(1, 3, 1, 1)
    return (pixels.float() / 255 - mean) / std


def learning_rate(schedule, peak, warmup, position):
    """runtime/train/schedule.cpp's learning_rate; position in [0, 1] over the whole run."""
    position = min(max(position, 0.0), 1.0)

    def cosine(start, end, progress):
        return end + (start - end) * (1 + math.cos(math.pi * progress)) / 2

    if schedule == "constant":
        return peak
    if schedule == "one_cycle":
        if warmup > 0 and position < warmup:
            return cosine(peak / 25, peak, position / warmup)
        return cosine(peak, peak / 1e5, 1.0 if warmup >= 1 else (position - warmup) / (1 - warmup))
    raise SystemExit(f"loss_curve.py: schedule {schedule}: only one_cycle and constant are copied here")


def trace_order(path):
    """A TRAINPOINT_TRACE_SAMPLES file ("<epoch> <sample>" per trained sample, in training order): the order of
    each epoch, as index tensors."""
    import torch

    epochs = {}
    for line in open(path):
        epoch, sample = line.split()
        epochs.setdefault(int(epoch), []).append(int(sample))
    return [torch.tensor(epochs[e]) for e in sorted(epochs)]


def evaluate(model, x, y, batch_size):
    import torch
    import torch.nn.functional as F

    model.eval()
    loss_sum, correct = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(y), batch_size):
            inputs, targets = normalize(x[start:start + batch_size]), y[start:start + batch_size]
            output = model(inputs)
            loss_sum += F.cross_entropy(output, targets).item() * len(targets)
            correct += (output.argmax(1) == targets).sum().item()
    model.train()
    return loss_sum / len(y), correct / len(y)


def init(args):
    import torch
    import torchvision

    torch.manual_seed(args.seed)
    model = torchvision.models.resnet18(num_classes=args.classes)
    torch.save(dict(model.state_dict()), args.out)


def train(args):
    import torch
    import torch.nn.functional as F
    import torchvision

    torch.set_num_threads(args.threads)
    train_x, train_y, classes = images(Path(args.data) / "train", args.image_size)
    valid_x, valid_y, _ = images(Path(args.data) / "valid", args.image_size)
    model = torchvision.models.resnet18(num_classes=len(classes))
    model.load_state_dict(torch.load(args.weights))
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                                weight_decay=args.weight_decay)
    generator = torch.Generator().manual_seed(args.seed)
    orders = trace_order(args.order) if args.order else None
    if orders and (len(orders) < args.epochs or any(sorted(o.tolist()) != list(range(len(train_y))) for o in orders)):
        raise SystemExit(f"loss_curve.py train: {args.order} does not hold {args.epochs} epochs of each sample once")
    n = len(train_y)
    steps_out = open(args.steps_out, "w") if args.steps_out else None
    with open(args.out, "w") as out:
        step = 0
        for epoch in range(args.epochs):
            started = time.time()
            order = orders[epoch] if orders else torch.randperm(n, generator=generator)
            loss_sum = 0.0
            for start in range(0, n, args.batch_size):
                index = order[start:start + args.batch_size]
                inputs, targets = normalize(train_x[index]), train_y[index]
                if args.channels_last:
                    inputs = inputs.contiguous(memory_format=torch.channels_last)
                lr = learning_rate(args.schedule, args.lr, args.warmup, (epoch + start / n) / args.epochs)
                for group in optimizer.param_groups:
                    group["lr"] = lr
                optimizer.zero_grad()
                loss = F.cross_entropy(model(inputs), targets)
                loss.backward()
                optimizer.step()
                loss_sum += loss.item() * len(targets)
                step += 1
                if steps_out:
                    steps_out.write(json.dumps({"step": step, "train_loss": loss.item()}) + "\n")
            valid_loss, accuracy = evaluate(model, valid_x, valid_y, args.batch_size)
            line = {"epoch": epoch + 1, "step": step, "lr": lr, "train_loss": loss_sum / n, "valid_loss": valid_loss,
                    "accuracy": accuracy, "seconds": time.time() - started}
            out.write(json.dumps(line) + "\n")
            out.flush()
            print(f"python seed {args.seed} epoch {epoch + 1}/{args.epochs}: train_loss {line['train_loss']:.4f} "
                  f"valid_loss {valid_loss:.4f} accuracy {accuracy:.4f} lr {lr:.3g} ({line['seconds']:.1f}s)",
                  file=sys.stderr, flush=True)


def check(args):
    """trainpoint's saved model (eval mode, the last epoch's weights) on this script's validation inputs: the
    same loss as trainpoint's own last valid_loss says both sides decode, normalize and evaluate alike."""
    import torch

    torch.set_num_threads(1)
    model = torch.jit.load(args.model)
    valid_x, valid_y, classes = images(Path(args.data) / "valid", int(model.image_size))
    if list(model.class_names) != classes:
        raise SystemExit(f"loss_curve.py check: trainpoint's classes {list(model.class_names)} are not {classes}")
    loss, accuracy = evaluate(model, valid_x, valid_y, 64)
    last = [json.loads(line) for line in open(args.metrics)][-1]
    difference = abs(loss - last["valid_loss"])
    print(f"check: trainpoint's model.pt on Python's validation inputs: valid_loss {loss:.6f} accuracy {accuracy:.4f}; "
          f"trainpoint said {last['valid_loss']:.6f} {last['accuracy']:.4f} (difference {difference:.2e})")
    if difference > 1e-3 * max(1.0, last["valid_loss"]) or abs(accuracy - last["accuracy"]) > 2.5 / len(valid_y):
        raise SystemExit("check: the two sides do not see the same validation inputs")


def spread(values):
    return f"{statistics.mean(values):.4f} ({min(values):.4f}-{max(values):.4f})"


def table(args):
    """Per epoch, each side's mean (min-max) over the seeds. A trainpoint mean outside Python's min-max is marked
    with *; the verdict: within (every trainpoint mean inside Python's min-max), within the noise (the ones
    outside are still overlapped: Python's mean lies inside trainpoint's own min-max) or outside (the two seed
    spreads apart: neither mean inside the other's min-max)."""
    results = Path(args.results)
    runs = {}
    for engine in ("python", "trainpoint"):
        runs[engine] = {}
        for file in sorted(results.glob(f"{engine}-*.jsonl")):
            seed = file.stem.split("-", 1)[1]
            runs[engine][seed] = [json.loads(line) for line in open(file) if line.strip()]
    if not runs["python"] or not runs["trainpoint"]:
        raise SystemExit(f"loss_curve.py table: no runs of both engines in {results}")
    epochs = min(len(lines) for engine in runs.values() for lines in engine.values())
    metrics = (("train_loss", "train loss"), ("valid_loss", "valid loss"), ("accuracy", "accuracy"))
    print(f"Python {len(runs['python'])} seeds ({', '.join(runs['python'])}), trainpoint {len(runs['trainpoint'])} "
          f"({', '.join(runs['trainpoint'])}); mean (min-max) over the seeds; * trainpoint's mean outside Python's "
          f"min-max\n")
    header = ["epoch"] + [f"{engine} {label}" for _, label in metrics for engine in ("Python", "trainpoint")]
    print("| " + " | ".join(header) + " |")
    print("|---|" + "---:|" * (len(header) - 1))
    overlapped, apart, gaps = [], [], {}
    for e in range(epochs):
        row = [str(e + 1)]
        for key, label in metrics:
            py = [lines[e][key] for lines in runs["python"].values()]
            tp = [lines[e][key] for lines in runs["trainpoint"].values()]
            py_mean, tp_mean = statistics.mean(py), statistics.mean(tp)
            inside = min(py) <= tp_mean <= max(py)
            row += [spread(py), spread(tp) + ("" if inside else " *")]
            sd = statistics.stdev(py) if len(py) > 1 else 0.0
            gap = tp_mean - py_mean
            sigmas = abs(gap) / sd if sd > 0 else (0.0 if gap == 0 else math.inf)
            if key not in gaps or sigmas > gaps[key][0]:
                gaps[key] = (sigmas, e + 1, gap)
            if not inside:
                beyond = min(py) - tp_mean if tp_mean < min(py) else tp_mean - max(py)
                note = (f"{label} at epoch {e + 1}: {tp_mean:.4f}, {beyond:.4f} beyond Python's "
                        f"{min(py):.4f}-{max(py):.4f} (Python's mean {py_mean:.4f}")
                if min(tp) <= py_mean <= max(tp):
                    overlapped.append(note + " inside trainpoint's min-max)")
                else:
                    apart.append(note + f" outside trainpoint's {min(tp):.4f}-{max(tp):.4f})")
        print("| " + " | ".join(row) + " |")
    print()
    for key, label in metrics:
        sigmas, epoch, gap = gaps[key]
        print(f"- {label}: the largest gap between the means, {gap:+.4f} (trainpoint - Python) at epoch {epoch}, is "
              f"{sigmas:.1f}x Python's seed-to-seed standard deviation there")
    print()
    replays = {file.stem.split("-", 1)[1]: [json.loads(line) for line in open(file) if line.strip()]
               for file in sorted(results.glob("replay-*.jsonl"))}
    if replays:
        print(f"Python on trainpoint's own sample order and memory format (seeds {', '.join(replays)}) against "
              f"trainpoint: per epoch, the largest difference over those seeds (trainpoint - Python on its order); "
              f"in brackets the same for Python's own shuffle (NCHW)\n")
        print("| epoch | train loss | valid loss | accuracy |")
        print("|---|---:|---:|---:|")
        for e in range(epochs):
            row = [str(e + 1)]
            for key, _ in metrics:
                same = [runs["trainpoint"][seed][e][key] - lines[e][key] for seed, lines in replays.items()
                        if seed in runs["trainpoint"]]
                own = [runs["trainpoint"][seed][e][key] - lines[e][key] for seed, lines in runs["python"].items()
                       if seed in runs["trainpoint"] and seed in replays]
                row.append(f"{max(same, key=abs):+.4f} ({max(own, key=abs):+.4f})")
            print("| " + " | ".join(row) + " |")
        print()
        for seed in replays:
            mine = results / "steps" / f"trainpoint-{seed}.jsonl"
            theirs = results / "steps" / f"replay-{seed}.jsonl"
            if not (mine.exists() and theirs.exists()):
                continue
            a = [json.loads(line)["train_loss"] for line in open(mine) if line.strip()]
            b = [json.loads(line)["train_loss"] for line in open(theirs) if line.strip()]
            parted = next((i + 1 for i, (x, y) in enumerate(zip(a, b)) if abs(x - y) > 0.01 * abs(y)), None)
            print(f"- seed {seed}, step by step on the same order: step 1's loss {a[0]:.7f} against {b[0]:.7f} "
                  f"(difference {abs(a[0] - b[0]):.1e}), step 2's difference {abs(a[1] - b[1]):.1e}; the losses first "
                  f"differ by more than 1% at step {parted} of {min(len(a), len(b))}")
        print()
    cells = len(metrics) * epochs
    if apart:
        print(f"**Verdict: outside** Python's seed-to-seed spread in {len(apart)} of {cells} (epoch, metric) "
              f"cells, the two spreads apart: " + "; ".join(apart)
              + ("" if not overlapped else "; and outside Python's min-max but overlapped: " + "; ".join(overlapped)))
    elif overlapped:
        print(f"**Verdict: within the noise**: trainpoint's mean is inside Python's seed-to-seed min-max in "
              f"{cells - len(overlapped)} of {cells} (epoch, metric) cells; in the others the spreads overlap: "
              + "; ".join(overlapped))
    else:
        print(f"**Verdict: within**: trainpoint's mean is inside Python's seed-to-seed min-max at every epoch for "
              f"the train loss, the valid loss and the accuracy ({cells} of {cells})")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("init")
    p.add_argument("seed", type=int)
    p.add_argument("classes", type=int)
    p.add_argument("out")
    p = commands.add_parser("train")
    p.add_argument("data")
    p.add_argument("weights")
    p.add_argument("out")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--schedule", default="one_cycle")
    p.add_argument("--warmup", type=float, default=0.25)
    p.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1")))
    p.add_argument("--channels-last", action="store_true", help="as trainpoint (default: NCHW, as a user writes it)")
    p.add_argument("--order", help="trainpoint's TRAINPOINT_TRACE_SAMPLES file: its sample order, not a shuffle")
    p.add_argument("--steps-out", help="a JSON line per step: its loss, as trainpoint's steps.jsonl")
    p = commands.add_parser("check")
    p.add_argument("model")
    p.add_argument("data")
    p.add_argument("metrics")
    p = commands.add_parser("table")
    p.add_argument("results")
    args = parser.parse_args()
    {"init": init, "train": train, "check": check, "table": table}[args.command](args)


if __name__ == "__main__":
    main()
