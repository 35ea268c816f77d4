"""Where a ResNet training step spends its time, op by op, for trainpoint's model against torchvision's, under
one PyTorch: trainpoint's TorchScript model.pt (a built-in resnet that `trainpoint run` wrote; the graph executor's
optimisation off, as the trainer sets it) or torchvision's eager resnet of the same name; synthetic batch;
cross-entropy, backward, SGD with momentum (foreach); one thread. Prints images per CPU-second and PyTorch
profiler's table of the ops' own CPU time over 5 steps. Layout nchw (every weight contiguous) or cl (model and
input in channels_last, as trainpoint trains by default).
usage: profile_step.py tp MODEL_PT LAYOUT BATCH SIZE [ROWS]    or    profile_step.py tv ARCH LAYOUT BATCH SIZE [ROWS]
(issue 47, docs/benchmarks.md "ResNets on the CPU")"""
import sys
import time

import torch
import torch.nn.functional as F


def main():
    which, model_name, layout = sys.argv[1:4]
    batch, size = int(sys.argv[4]), int(sys.argv[5])
    rows = int(sys.argv[6]) if len(sys.argv) > 6 else 25
    torch.set_num_threads(1)
    torch.manual_seed(0)
    if which == "tp":
        torch._C._set_graph_executor_optimize(False)
        model = torch.jit.load(model_name)
        classes = model(torch.zeros(1, 3, size, size)).shape[1]
    else:
        import torchvision
        classes = 10
        model = getattr(torchvision.models, model_name)(num_classes=classes)
    model.train()
    inputs = torch.randn(batch, 3, size, size)
    labels = torch.randint(0, classes, (batch,))
    if layout == "cl":
        model = model.to(memory_format=torch.channels_last)
        inputs = inputs.contiguous(memory_format=torch.channels_last)
    else:  # model.pt keeps the layout it was saved in: trainpoint saves channels_last weights
        for parameter in model.parameters():
            parameter.data = parameter.data.contiguous()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, foreach=True)

    def step():
        optimizer.zero_grad()
        F.cross_entropy(model(inputs), labels).backward()
        optimizer.step()

    for _ in range(3):
        step()
    began = time.process_time()
    for _ in range(5):
        step()
    print(f"{which} {model_name} {layout} torch {torch.__version__}: "
          f"{5 * batch / (time.process_time() - began):.1f} images per CPU-second")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        for _ in range(5):
            step()
    print(profile.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows))


main()
