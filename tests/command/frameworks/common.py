"""What the framework tests' scripts share (copied beside each into the test's repository): the report every
rank writes to TRAINPOINT_OUTPUT_DIR/rank-<N>.json, the parameters' digest, the hold the restart test stops
a job in, the failure the last-line test asks for, and the exit past torch 2.11's teardown."""
import hashlib
import json
import os
import sys
import time

out = os.environ["TRAINPOINT_OUTPUT_DIR"]


def digest(model):
    """sha256 of the parameters, by name: equal on every rank exactly when DDP kept them equal."""
    sha = hashlib.sha256()
    for name, value in sorted(model.named_parameters()):
        sha.update(name.removeprefix("module.").encode())
        sha.update(value.detach().cpu().contiguous().numpy().tobytes())
    return sha.hexdigest()


def hold(rank, stopping=lambda: False):
    """Called after a checkpoint is on disk: waits while $HOLD_FILE exists (the test then sends SIGTERM), or until
    `stopping()`: a framework that handles SIGTERM itself (Lightning) stops at its next step."""
    path = os.environ.get("HOLD_FILE")
    if path and os.path.exists(path):
        open(os.path.join(out, f"held-{rank}"), "w").close()
        while os.path.exists(path) and not stopping():
            time.sleep(0.1)


def fail_if_asked(rank):
    """With $FAIL_RANK: that rank raises here, inside its framework's training, as a script with a bug would (the
    test of trainpoint's last line)."""
    if os.environ.get("FAIL_RANK") == str(rank):
        raise ValueError(f"rank {rank}: label 7 is not one of the 2 classes")


def report(rank, **values):
    values.update(rank=rank, pid=os.getpid(), ppid=os.getppid(),
                  env={name: os.environ.get(name) for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
                                                               "GROUP_RANK", "MASTER_ADDR")})
    with open(os.path.join(out, f"rank-{rank}.json"), "w") as file:
        json.dump(values, file)
        file.write("\n")


def leave():
    """Ends the script once its report is written, without Python's shutdown: there PyTorch 2.11's Gloo worker
    threads, alive past destroy_process_group once DDP ran, may drop a tensor and abort the process (SIGABRT,
    "terminate called without an active exception", about 1 run in 30 under load: pytorch/pytorch#190489;
    examples/ddp-command/train.py does the same). What the tests check is written before it."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
