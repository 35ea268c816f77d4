"""Where oneDNN's time goes in a ResNet training step on the CPU: runs bench/train/profile_step.py (trainpoint's
model.pt or torchvision's model, 13 steps) with oneDNN's verbose log on, and sums the log's execution times by
primitive, implementation and pass (forward, backward for data, backward for weights, reorders between layouts).
Wall-clock milliseconds as oneDNN logs them: read the shares, not the speeds, when anything runs beside.
usage: onednn_share.py tp MODEL_PT LAYOUT BATCH SIZE    or    onednn_share.py tv ARCH LAYOUT BATCH SIZE
(profile_step.py's arguments; issue 47, docs/benchmarks.md "where the 224-pixel step goes")"""
import collections
import os
import subprocess
import sys


def summarise(log):
    """Milliseconds per (primitive, implementation, pass) from the log's `exec` lines (time is the last field);
    oneDNN 2 (LibTorch 1.13) writes `dnnl_verbose,exec,cpu,...`, oneDNN 3 `onednn_verbose,v1,primitive,exec,cpu,...`."""
    totals, counts = collections.defaultdict(float), collections.Counter()
    for line in log.splitlines():
        fields = line.split(",")
        if fields[1:3] == ["v1", "primitive"]:  # oneDNN 3 names its log's version and kind first
            fields = fields[:1] + fields[3:]
        if len(fields) < 7 or not fields[0].endswith("_verbose") or fields[1] != "exec":
            continue
        key = f"{fields[3]} {fields[4]} {fields[5]}"
        totals[key] += float(fields[-1])
        counts[key] += 1
    whole = sum(totals.values()) or 1.0
    print(f"{'ms':>10} {'share':>6} {'calls':>6}  primitive implementation pass")
    for key, ms in sorted(totals.items(), key=lambda item: -item[1]):
        print(f"{ms:10.1f} {100 * ms / whole:5.1f}% {counts[key]:6d}  {key}")


def main():
    # oneDNN reads its verbose switch once, at its first use: a child process with it set (DNNL_ for oneDNN 2, as in
    # LibTorch 1.13; ONEDNN_ for oneDNN 3), whose standard output holds the log.
    env = dict(os.environ, DNNL_VERBOSE="1", ONEDNN_VERBOSE="1")
    profile_step = os.path.join(os.path.dirname(os.path.abspath(__file__)), "profile_step.py")
    child = subprocess.run([sys.executable, profile_step, *sys.argv[1:6], "0"], env=env, check=True,
                           stdout=subprocess.PIPE, text=True)
    summarise(child.stdout)


main()
