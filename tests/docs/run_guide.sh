#!/usr/bin/env bash
# Runs every ```sh block of docs/guide.md, in order, in one shell, as a reader would: from a scratch
# directory holding a copy of examples/, with the trainpoint under test first in PATH. Blocks fenced
# ```sh cluster need a Kubernetes cluster: they are not run, but the files they name must exist.
# Usage: run_guide.sh TRAINPOINT_BINARY SOURCE_DIR
set -euo pipefail
export PATH="/usr/bin:$PATH"  # Debian's python3, which has python3-torch
trainpoint="$1"
source_dir="$2"
guide="$source_dir/docs/guide.md"
work="$(mktemp -d /tmp/trainpoint-guide.XXXXXX)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin"
ln -s "$trainpoint" "$work/bin/trainpoint"
cp -r "$source_dir/examples" "$work/examples"

python3 - "$guide" "$work/guide.sh" "$work/cluster.sh" <<'PY'
import sys
guide, script, cluster = sys.argv[1:]
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
echo "guide: all commands ran"
