"""Runs one command (a packer or one rank's loader, trainpoint's or a Python tool's) and measures it from outside,
the same way for every tool, then prints its last JSON line with these fields added:

  wall_s        seconds from the start of the command to its exit (Python's imports included)
  tree_cpu_s    user + system seconds of the command and every descendant it reaped (wait4's rusage)
  peak_rss_mb   the sum over the process tree (the command, its DataLoader workers, their s5cmd pipes, ...) of
                each process's largest RSS, sampled every 0.1 s, and at least the largest RSS of any one of them
                (wait4's ru_maxrss, exact, which a short command's samples could miss). A forked worker's pages
                shared with its parent (torch's libraries, the dataset object) are counted in both, as a sum of
                RSS counts them; for trainpoint, one process with threads, it is that process's peak RSS. A
                peak_rss_mb the command printed itself is kept as own_peak_rss_mb.
  peak_pss_mb   the largest sum of PSS over the tree, sampled every 0.5 s: shared pages divided among the
                processes that share them, so the memory the tree really holds at its peak.
  disk_mb       the disk (allocated blocks, as du counts) of the --cache directories when the command ended
  peak_disk_mb  the largest disk of the --cache directories, sampled every 0.5 s
Lines that are not JSON go to stderr. Exits with the command's status.

usage: measure.py [--cache DIR]... [--set KEY=VALUE]... -- COMMAND [ARG...]
"""
import argparse
import fcntl
import json
import os
import subprocess
import sys
import threading
import time

import psutil


def disk_bytes(directories):
    total = 0
    for top in directories:
        for root, _, files in os.walk(top):
            for name in files:
                try:
                    total += os.lstat(os.path.join(root, name)).st_blocks * 512
                except OSError:
                    pass  # removed while walking (a cache evicting)
    return total


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cache", action="append", default=[])
    parser.add_argument("--set", action="append", default=[])
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    lines = []

    def read_stdout():
        for line in child.stdout:
            lines.append(line)
            if not line.startswith("{"):
                sys.stderr.write(line)

    reader = threading.Thread(target=read_stdout, daemon=True)
    reader.start()
    root = psutil.Process(child.pid)
    peak_rss = {}  # pid -> largest RSS seen
    peak_pss = 0
    peak_disk = 0
    tick = 0
    status = None
    rusage = None
    while True:
        pid, wait_status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid == child.pid:
            status, rusage = os.waitstatus_to_exitcode(wait_status), usage
            break
        try:
            tree = [root] + root.children(recursive=True)
        except psutil.NoSuchProcess:
            tree = []
        pss = 0
        for process in tree:
            try:
                if tick % 5 == 0:
                    info = process.memory_full_info()
                    pss += info.pss
                else:
                    info = process.memory_info()
                key = (process.pid, process.create_time())
                peak_rss[key] = max(peak_rss.get(key, 0), info.rss)
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                pass
        if tick % 5 == 0:
            peak_pss = max(peak_pss, pss)
            peak_disk = max(peak_disk, disk_bytes(args.cache))
        tick += 1
        time.sleep(0.1)
    wall = time.perf_counter() - start
    child.returncode = status
    reader.join(timeout=10)
    end_disk = disk_bytes(args.cache)
    result = {}
    for line in reversed(lines):
        if line.startswith("{"):
            result = json.loads(line)
            break
    for item in args.set:
        key, _, value = item.partition("=")
        try:
            result[key] = json.loads(value)
        except json.JSONDecodeError:
            result[key] = value
    if "peak_rss_mb" in result:
        result["own_peak_rss_mb"] = result.pop("peak_rss_mb")
    result.update({
        "status": status,
        "wall_s": round(wall, 3),
        "tree_cpu_s": round(rusage.ru_utime + rusage.ru_stime, 3),
        "peak_rss_mb": round(max(sum(peak_rss.values()), rusage.ru_maxrss * 1024) / 2**20, 1),
        "peak_pss_mb": round(peak_pss / 2**20, 1),
        "processes": len(peak_rss),
        "disk_mb": round(end_disk / 2**20, 1),
        "peak_disk_mb": round(max(peak_disk, end_disk) / 2**20, 1),
    })
    # One write of the whole line under a lock: the ranks of a job append to one results file at once.
    sys.stdout.flush()
    fcntl.flock(1, fcntl.LOCK_EX)
    try:
        os.write(1, (json.dumps(result) + "\n").encode())
    finally:
        fcntl.flock(1, fcntl.LOCK_UN)
    sys.exit(status if status >= 0 else 128 - status)  # a signal as the shell reports it


if __name__ == "__main__":
    main()
