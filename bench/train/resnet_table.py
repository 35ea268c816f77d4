"""bench/train/resnet.sh's table: medians of each engine's images per CPU-second (on a GPU: images per second)
for each configuration, and each trainpoint build's ratio to Python eager (NCHW, as a user writes it) and to
eager with channels_last.
usage: resnet_table.py RESULTS.jsonl [cpu|cuda]"""
import json
import statistics
import sys

runs = [json.loads(line) for line in open(sys.argv[1])]
measure = "images_per_s" if sys.argv[2:] == ["cuda"] else "images_per_cpu_s"
print(f"({measure.replace('_', ' ')})")
engines = list(dict.fromkeys(r["engine"] for r in runs))
builds = [e for e in engines if e.startswith("trainpoint")]
others = [e for e in engines if not e.startswith("trainpoint")]
short = {e: e.replace("trainpoint (LibTorch ", "").rstrip(")") for e in builds}
header = ["model, batch, input, precision"] + engines
header += [f"{short[b]} / {o}" for b in builds for o in ("python eager", "python eager, channels_last")]
print("| " + " | ".join(header) + " |")
print("|---|" + "---:|" * (len(header) - 1))
for config in dict.fromkeys((r["config"], r["precision"]) for r in runs):
    medians = {}
    for engine in engines:
        mine = [r[measure] for r in runs if (r["config"], r["precision"]) == config and r["engine"] == engine]
        medians[engine] = statistics.median(mine) if mine else None
    cells = [f"{config[0]}, {config[1]}"] + [f"{medians[e]:.2f}" if medians[e] else "" for e in engines]
    for build in builds:
        for other in ("python eager", "python eager, channels_last"):
            cells.append(f"**{medians[build] / medians[other]:.2f}x**" if medians.get(other) else "")
    print("| " + " | ".join(cells) + " |")
