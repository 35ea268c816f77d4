"""The GPU check's figures (scripts/gpu-check).

  gpu_table.py trainpoint-run STEPS_JSONL SKIP BATCH UTIL_JSON|'' CONFIG
      One JSON line, like the benchmarks', for a `trainpoint run`: images per second over the steps after the
      first SKIP (the first epoch: cuDNN's algorithm search, warm-up), from steps.jsonl's step times; the share
      of those steps' time the GPU waited for data (data_wait_s, from CUDA events); the GPU's utilisation that
      gpu_util.py sampled meanwhile (UTIL_JSON, or '' for none).
  gpu_table.py table RESULTS_JSONL
      The medians of every engine and configuration in results.jsonl, where their steps' time goes (host and
      GPU milliseconds per step, where the runs say), and the ratios the goals name, as Markdown.
"""
import json
import re
import statistics
import sys


def trainpoint_run(steps_file, skip, batch, util_file, config):
    steps = [json.loads(line) for line in open(steps_file)][int(skip):]
    seconds = sum(step["step_s"] for step in steps)
    data_wait = sum(step["data_wait_s"] for step in steps)
    line = {"engine": "trainpoint run", "config": config, "steps": len(steps),
            "images_per_s": len(steps) * int(batch) / seconds if seconds else None,
            "data_wait_share": data_wait / seconds if seconds else None}
    if util_file:
        line.update(json.load(open(util_file)))
    print(json.dumps(line))


def label(run):
    """The engine, with how trainpoint timed its steps on a GPU and which SGD it ran when not its own."""
    notes = []
    if run.get("step_timer") and run.get("device") == "cuda":
        notes.append(f"{run['step_timer']} step timer")
    if run.get("sgd") == "loop":
        notes.append("LibTorch's per-parameter SGD")
    return f"{run['engine']} ({', '.join(notes)})" if notes else run["engine"]


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def print_step_split(groups):
    """Where a step's time goes, for the runs that say (tp-train-bench, python_eager.py): milliseconds per step
    of the whole step (from images/s), of the host's forward and backward and optimizer calls, and of the GPU's
    (trainpoint on a GPU, from its CUDA events). A host slower than the GPU is what bounds a small model."""
    rows = []
    for (config, engine), group in groups.items():
        split = [r for r in group if "host_ms_per_step" in r]
        if not split:
            continue
        batch = int(re.search(r"batch (\d+)", config).group(1))
        step_ms = median(1000 * batch / r["images_per_s"] for r in split)
        host = [median(r["host_ms_per_step"][part] for r in split) for part in ("forward_backward", "optimizer")]
        gpu = [median(r.get("gpu_ms_per_step", {}).get(part) for r in split)
               for part in ("forward_backward", "optimizer")]
        gpu_text = " | ".join("" if value is None else f"{value:.2f}" for value in gpu)
        rows.append(f"| {config} | {engine} | {step_ms:.2f} | {host[0]:.2f} | {host[1]:.2f} | {gpu_text} |")
    if rows:
        print()
        print("| configuration | engine | ms per step | host: forward + backward | host: optimizer "
              "| GPU: forward + backward | GPU: optimizer |")
        print("|---|---|---|---|---|---|---|")
        print("\n".join(rows))


def table(results_file):
    runs = [json.loads(line) for line in open(results_file) if line.startswith("{")]
    groups = {}
    for run in runs:
        groups.setdefault((run["config"], label(run)), []).append(run)
    print("| configuration | engine | runs | images/s (median) | GPU utilisation % | GPU waiting for data |")
    print("|---|---|---|---|---|---|")
    medians = {}
    for (config, engine), group in groups.items():
        per_s = median(r.get("images_per_s") for r in group)
        util = median(r.get("gpu_util_percent") for r in group)
        wait = median(r.get("data_wait_share") for r in group)
        medians[(config, engine)] = per_s
        print(f"| {config} | {engine} | {len(group)} | {per_s:.0f} | "
              f"{'' if util is None else f'{util:.0f}'} | {'' if wait is None else f'{100 * wait:.1f}%'} |")
    print_step_split(groups)
    print()
    print("| ratio (medians) | value | goal |")
    print("|---|---|---|")
    trainpoint = "trainpoint (events step timer)" if any(r.get("device") == "cuda" for r in runs) else "trainpoint"
    loop_sgd = trainpoint[:-1] + ", LibTorch's per-parameter SGD)" if trainpoint.endswith(")") else \
        "trainpoint (LibTorch's per-parameter SGD)"
    ratio_rows = [
        ("small_cnn", trainpoint, "python eager", "at least 1.5"),
        ("small_cnn", trainpoint, "trainpoint (synchronize step timer)", "above 1: CUDA events' gain"),
        ("resnet50 batch 128", trainpoint, "python DDP", "at least 1.25"),
        ("resnet50 batch 128", trainpoint, "python eager, channels_last", "at least 0.98"),
        ("resnet18", trainpoint, "python eager", "reported (issue 47's GPU leg)"),
        ("resnet18", trainpoint, "python eager, channels_last", "reported (issue 47's GPU leg)"),
        ("resnet34", trainpoint, "python eager", "reported (issue 47's GPU leg)"),
        ("resnet34", trainpoint, "python eager, channels_last", "reported (issue 47's GPU leg)"),
        ("", trainpoint, loop_sgd, "above 1: the foreach SGD's gain"),
        ("from JPEG", "trainpoint run", "python DataLoader", "at least 1 (and GPU as busy)"),
    ]
    for config_part, mine, theirs, goal in ratio_rows:
        for (config, engine), per_s in medians.items():
            other = medians.get((config, theirs))
            if config_part in config and engine == mine and other:
                print(f"| {config}: {engine} / {theirs} | {per_s / other:.2f}x | {goal} |")


if __name__ == "__main__":
    {"trainpoint-run": trainpoint_run, "table": table}[sys.argv[1]](*sys.argv[2:])
