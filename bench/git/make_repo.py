#!/usr/bin/env python3
"""Writes a git fast-import stream for a benchmark repository: FILES files of about 1 KiB in 50
directories, then COMMITS-1 more commits that each rewrite a few files. Deterministic (seeded).

    python3 make_repo.py 2000 5000 | git -C REPO fast-import --quiet
"""
import random
import sys

commits, files = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(42)
out = sys.stdout.buffer
paths = [f"src/dir{i % 50:02d}/file{i:05d}.py" for i in range(files)]


def blob_text(path, version):
    lines = [f"# {path} version {version}"]
    lines += [f"value_{n} = {rng.randrange(10**9)}" for n in range(40)]
    return ("\n".join(lines) + "\n").encode()


def commit(number, changes):
    message = f"commit {number}\n".encode()
    out.write(b"commit refs/heads/main\n")
    out.write(f"committer Bench <bench@example.com> {1700000000 + number * 60} +0000\n".encode())
    out.write(b"data %d\n%s" % (len(message), message))
    for path, data in changes:
        out.write(f"M 100644 inline {path}\n".encode())
        out.write(b"data %d\n%s\n" % (len(data), data))


commit(0, [(path, blob_text(path, 0)) for path in paths])
for number in range(1, commits):
    commit(number, [(path, blob_text(path, number)) for path in rng.sample(paths, 3)])
out.write(b"done\n")
