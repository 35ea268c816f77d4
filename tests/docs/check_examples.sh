#!/usr/bin/env bash
# Each example repository: its spec is valid, its job.yaml is exactly what render-job makes today
# (the command is job.yaml's first line), and the TorchScript example exports and trains as its README says,
# with images from trainpoint make-dataset, and shapes/predict.py classifies images with the model.
# Usage: check_examples.sh TRAINPOINT_BINARY SOURCE_DIR
set -euo pipefail
export PATH="/usr/bin:$PATH"  # Debian's python3, which has python3-torch
trainpoint="$1"
examples="$2/examples"
work="$(mktemp -d /tmp/trainpoint-examples.XXXXXX)"
trap 'rm -rf "$work"' EXIT

for dir in "$examples"/*/; do
  name="$(basename "$dir")"
  "$trainpoint" check --spec "$dir/train.toml" >/dev/null
  [ -f "$dir/job.yaml" ] || { echo "examples/$name has no job.yaml" >&2; exit 1; }
  command="$(head -n 1 "$dir/job.yaml" | sed -n 's/^# trainpoint render-job /render-job /p')"
  [ -n "$command" ] || { echo "examples/$name/job.yaml: line 1 must be '# trainpoint render-job ...'" >&2; exit 1; }
  (cd "$dir" && eval "\"$trainpoint\" $command") > "$work/$name.yaml"
  if ! diff -u <(tail -n +2 "$dir/job.yaml") "$work/$name.yaml"; then
    echo "examples/$name/job.yaml is not what '$command' makes now: regenerate it" >&2
    exit 1
  fi
  echo "examples/$name: spec valid, job.yaml current"
done

# The TorchScript example end to end: export the model, commit it, train one epoch from the commit.
cp -r "$examples/torchscript" "$work/repo"
(cd "$work/repo" && python3 export.py --classes 3 >/dev/null)
(cd "$work/repo" && "$trainpoint" make-dataset images --out data --classes 3 --per-class 30 --seed 2 >/dev/null)
git -C "$work/repo" init -q -b main
git -C "$work/repo" add -A
git -C "$work/repo" -c user.name=t -c user.email=t@t commit -q -m torchscript
"$trainpoint" run --repo "$work/repo" --ref main --spec train.toml --workdir "$work/run" --set train.epochs=1 \
  --set dist.nproc_per_node=1
[ -s "$work/run/output/shapes-torchscript/model.pt" ] || { echo "the TorchScript example wrote no model" >&2; exit 1; }
python3 "$examples/shapes/predict.py" "$work/run/output/shapes-torchscript/model.pt" "$work/repo/data/circle/000000.png" \
  | grep -Eq "000000.png (circle|square|triangle) [01]\.[0-9]{4}$" || { echo "shapes/predict.py gave no class" >&2; exit 1; }
echo "examples/torchscript: exported and trained"
