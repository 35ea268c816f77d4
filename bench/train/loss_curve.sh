#!/usr/bin/env bash
# Does trainpoint train a ResNet-18 as well as Python does (issue 47's accuracy check)? trainpoint's built-in
# resnet18 (`trainpoint run`) and torchvision's resnet18 in Python PyTorch 2.11 (bench/baseline-python) train on
# the same synthetic image folder (`trainpoint make-dataset`: 8 shapes, JPEG, train/ and valid/ made with other
# seeds) from the same initial weights (torchvision's random init for each seed, saved by Python, loaded by
# trainpoint's model.weights), with the same hyperparameters: SGD with momentum, trainpoint's one_cycle schedule
# (copied in bench/train/loss_curve.py), no augmentation, ImageNet normalisation, fp32, one thread each. Each
# seed's runs alternate: Python, then trainpoint. After each trainpoint run, its model.pt is evaluated on
# Python's validation inputs (the same loss says both sides see the same pixels), and Python trains once more
# on trainpoint's own sample order (TRAINPOINT_TRACE_SAMPLES) and memory format (channels_last: in one PyTorch,
# NCHW and channels_last runs part by 1e-4 in step 2's loss): the engines apart from the shuffle. Prints the
# per-epoch train loss, valid loss and accuracy of both, mean (min-max) over the seeds, a verdict (whether
# trainpoint's mean lies within Python's seed-to-seed spread), and how far trainpoint is from Python on its own
# order (bench/train/loss_curve.py table).
# usage: bench/train/loss_curve.sh
#   CURVE_SEEDS ("1 2 3"), CURVE_EPOCHS (5), CURVE_TRAIN (1024 images), CURVE_VALID (512), CURVE_CLASSES (8),
#   CURVE_SIZE (64), CURVE_BATCH (32), CURVE_LR (0.02), CURVE_MOMENTUM (0.9), CURVE_WD (5e-4),
#   CURVE_SCHEDULE (one_cycle or constant), CURVE_CPU (the core both sides are pinned to: `trainpoint run` takes
#   one compute thread per usable core whatever OMP_NUM_THREADS says; default the last), CURVE_DIR (kept; default
#   a new /tmp/tp-loss-curve.XXXXXX), TRAINPOINT (default build/entrypoint/trainpoint).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
trainpoint="${TRAINPOINT:-$root/build/entrypoint/trainpoint}"
python=$("$root/bench/baseline-python")
helper="$root/bench/train/loss_curve.py"
seeds="${CURVE_SEEDS:-1 2 3}" epochs="${CURVE_EPOCHS:-5}" classes="${CURVE_CLASSES:-8}" size="${CURVE_SIZE:-64}"
batch="${CURVE_BATCH:-32}" lr="${CURVE_LR:-0.02}" momentum="${CURVE_MOMENTUM:-0.9}" wd="${CURVE_WD:-5e-4}"
schedule="${CURVE_SCHEDULE:-one_cycle}" cpu="${CURVE_CPU:-$(($(nproc) - 1))}"
dir="${CURVE_DIR:-$(mktemp -d /tmp/tp-loss-curve.XXXXXX)}"
mkdir -p "$dir/results/steps"
export OMP_NUM_THREADS=1
started=$(date +%s)
echo "$(date -u '+%F %H:%M UTC'); load average $(cut -d' ' -f1-3 /proc/loadavg); python: torch" \
  "$("$python" -c 'import torch; print(torch.__version__)'); $("$trainpoint" --version | head -2 | tr '\n' ' ');" \
  "pinned to cpu $cpu; in $dir"

rm -rf "$dir/data"
"$trainpoint" make-dataset images --out "$dir/data/train" --classes "$classes" --count "${CURVE_TRAIN:-1024}" \
  --size "$size" --format jpeg --seed 1
"$trainpoint" make-dataset images --out "$dir/data/valid" --classes "$classes" --count "${CURVE_VALID:-512}" \
  --size "$size" --format jpeg --seed 2
cat > "$dir/spec.toml" <<EOF
[job]
name = "loss-curve"
[data]
source = "$dir/data"
image_size = $size
workers = 0
[model]
arch = "resnet18"
[train]
epochs = $epochs
batch_size = $batch
optimizer = "sgd"
lr = $lr
momentum = $momentum
weight_decay = $wd
schedule = "$schedule"
warmup = 0.25
precision = "fp32"
[checkpoint]
every_epochs = 0
resume = "never"
[log]
tensorboard = false
[report]
top_losses = 0
EOF

for seed in $seeds; do
  "$python" "$helper" init "$seed" "$classes" "$dir/init-$seed.pt"
  python_train=(taskset -c "$cpu" "$python" "$helper" train "$dir/data" "$dir/init-$seed.pt" --seed "$seed"
                --epochs "$epochs" --batch-size "$batch" --image-size "$size" --lr "$lr" --momentum "$momentum"
                --weight-decay "$wd" --schedule "$schedule" --warmup 0.25 --threads 1)
  "${python_train[@]}" "$dir/results/python-$seed.jsonl"
  rm -rf "$dir/out-$seed" "$dir/trace-$seed"
  TRAINPOINT_TRACE_SAMPLES="$dir/trace-$seed" taskset -c "$cpu" "$trainpoint" run --spec "$dir/spec.toml" \
    --workdir "$dir/work" --set "job.seed=$seed" \
    --set "job.output=\"$dir/out-$seed\"" --set "model.weights=\"$dir/init-$seed.pt\"" 2>&1 |
    grep -E "train_loss .*valid_loss|error|warn" | sed "s/^/trainpoint seed $seed: /"
  cp "$dir/out-$seed/metrics.jsonl" "$dir/results/trainpoint-$seed.jsonl"
  "$python" "$helper" check "$dir/out-$seed/model.pt" "$dir/data" "$dir/out-$seed/metrics.jsonl"
  "${python_train[@]}" "$dir/results/replay-$seed.jsonl" --channels-last --order "$dir/trace-$seed/samples-rank-0.txt" \
    --steps-out "$dir/results/steps/replay-$seed.jsonl" 2>&1 |
    sed "s/^python/python on trainpoint's order, channels_last,/"
  cp "$dir/out-$seed/steps.jsonl" "$dir/results/steps/trainpoint-$seed.jsonl"
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); $(($(date +%s) - started)) s"
"$python" "$helper" table "$dir/results"
