#!/usr/bin/env bash
# Runs every ```sh block of docs/guide.md, in order, in one shell, as a reader would: from a scratch
# directory holding a copy of examples/, with the trainpoint under test first in PATH. Blocks fenced
# ```sh cluster need a Kubernetes cluster: without WITH_CLUSTER they are not run, but the files they name must
# exist; with it (tests/k8s's tp-with-cluster) they run after the others, from the directory the reader ends in,
# against a control plane on loopback, as the notebook account of namespace `guide` with the guide's Secret
# `minio-keys`. Two words of the guide change then, in every block, because the pods run on this machine: they
# clone the reader's repository from its directory instead of https://git.example.org, and ask for no GPUs.
# Usage: run_guide.sh TRAINPOINT_BINARY SOURCE_DIR [WITH_CLUSTER]
set -euo pipefail
export PATH="/usr/bin:$PATH"  # Debian's python3, which has python3-torch
trainpoint="$1"
source_dir="$2"
with_cluster="${3:-}"
guide="$source_dir/docs/guide.md"
work="$(mktemp -d /tmp/trainpoint-guide.XXXXXX)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin"
ln -s "$trainpoint" "$work/bin/trainpoint"
cp -r "$source_dir/examples" "$work/examples"

python3 - "$guide" "$work/guide.sh" "$work/cluster.sh" "$with_cluster" <<'PY'
import sys
guide, script, cluster, with_cluster = sys.argv[1:]
blocks, current, kind = {"sh": [], "sh cluster": []}, None, None
for line in open(guide):
    stripped = line.rstrip("\n")
    if current is None and stripped.startswith("```sh"):
        kind, current = stripped[3:].strip(), []
    elif current is not None and stripped == "```":
        blocks.setdefault(kind, []).append("".join(current))
        current = None
    elif current is not None:
        current.append(line)
if not blocks["sh"]:
    sys.exit("no ```sh blocks in " + guide)
if with_cluster:
    liberties = {"https://git.example.org/team/moons.git": '"$PWD"', "--gpus 4": "--gpus 0"}
    for word, local in liberties.items():
        if word not in "".join(blocks["sh cluster"]):
            sys.exit(f"the guide's cluster blocks no longer say {word}: update the liberties of run_guide.sh")
        blocks = {kind: [block.replace(word, local) for block in texts] for kind, texts in blocks.items()}
with open(script, "w") as out:
    out.write("set -euxo pipefail\n")
    for number, block in enumerate(blocks["sh"], 1):
        out.write(f"echo '== guide block {number}'\n{block}")
open(cluster, "w").write("".join(blocks["sh cluster"]))
print(f"{len(blocks['sh'])} blocks to run, {len(blocks['sh cluster'])} cluster blocks to check")
PY

cd "$work"
# The guide works in ${TMPDIR:-/tmp}/guide, outside the source tree: here inside the scratch directory.
export TMPDIR="$work/tmp"
mkdir -p "$TMPDIR"
echo 'pwd > "$GUIDE_LAST_DIR"' >> "$work/guide.sh"
PATH="$work/bin:$PATH" GUIDE_LAST_DIR="$work/last_dir" bash "$work/guide.sh"
# The cluster blocks apply files the runnable blocks made, from the directory the reader ends in.
last_dir="$(cat "$work/last_dir")"
for file in $(grep -o -- 'apply -f [^ ]*' "$work/cluster.sh" | cut -d' ' -f3); do
  [ -f "$last_dir/$file" ] || { echo "a cluster block applies $file, which the guide's commands did not make" >&2; exit 1; }
done
if [ -n "$with_cluster" ]; then
  (cd "$last_dir" && PATH="$work/bin:$PATH" "$with_cluster" --namespace guide --secret minio-keys -- bash -euxo pipefail "$work/cluster.sh")
  echo "guide: all commands ran, the cluster blocks against the control plane"
else
  echo "guide: all commands ran"
fi
