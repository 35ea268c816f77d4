"""Where oneDNN's time goes in a ResNet training step on the CPU: runs torchvision's model (trainpoint's built-in
resnets are the same ops) for a few steps with oneDNN's verbose log on, and sums the log's execution times by
primitive, implementation and pass (forward, backward for data, backward for weights, reorders between layouts).
Wall-clock milliseconds as oneDNN logs them: read the shares, not the speeds, when anything runs beside.
usage: onednn_share.py ARCH LAYOUT BATCH SIZE [STEPS]     LAYOUT: cl (channels_last, as trainpoint trains) or nchw
(issue 47, docs/benchmarks.md "where the 224-pixel step goes")"""
import collections
import os
import subprocess
import sys


def run_steps(arch, layout, batch, size, steps):
    import torch
    import torch.nn.functional as F
    import torchvision
    torch.set_num_threads(1)
    model = getattr(torchvision.models, arch)(num_classes=10).train()
    inputs = torch.randn(batch, 3, size, size)
    labels = torch.randint(0, 10, (batch,))
    if layout == "cl":
        model = model.to(memory_format=torch.channels_last)
        inputs = inputs.contiguous(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for _ in range(steps):
        optimizer.zero_grad()
        F.cross_entropy(model(inputs), labels).backward()
        optimizer.step()


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
    arch, layout, batch, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    steps = int(sys.argv[5]) if len(sys.argv) > 5 else 2
    if os.environ.get("ONEDNN_SHARE_CHILD"):
        run_steps(arch, layout, batch, size, steps)
        return
    # oneDNN reads its verbose switch once, at its first use: a child process with it set (DNNL_ for oneDNN 2, as in
    # LibTorch 1.13; ONEDNN_ for oneDNN 3), whose standard output is the log.
    env = dict(os.environ, ONEDNN_SHARE_CHILD="1", DNNL_VERBOSE="1", ONEDNN_VERBOSE="1")
    child = subprocess.run([sys.executable, __file__, *sys.argv[1:]], env=env, check=True,
                           stdout=subprocess.PIPE, text=True)
    summarise(child.stdout)


main()
