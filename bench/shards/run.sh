#!/usr/bin/env bash
# Packed-shards benchmark (issue 34; not a test): trainpoint against LitData, Mosaic Streaming, WebDataset and the
# AWS s3torchconnector, on MinIO on loopback, over one image folder of small JPEGs made by tp-make-dataset
# (TP_BENCH_IMAGES, default 100,000 of 64x64 in 8 classes, kept in $TRAINPOINT_CACHE/bench-shards).
#   Packing: `trainpoint pack` vs litdata.optimize vs Mosaic's MDSWriter vs WebDataset's ShardWriter, each from
#   the local folder to its own fresh S3 prefix, shards of the same size, the JPEG bytes as they are.
#   Loading: one epoch by TP_BENCH_NODES x TP_BENCH_RANKS_PER_NODE ranks at once (default 1 x 2; one process
#   per rank on this machine), batch 64, the same decode and augmentation (random resized crop to 64, flip,
#   ImageNet normalization), each rank with TP_BENCH_WORKERS decoding workers: trainpoint's tp-bench-data
#   --shards over its pack, LitData's, Mosaic's and WebDataset's readers over theirs, and s3torchconnector over
#   the unpacked images. Several nodes are simulated on this one machine (issue 46): every node its own cache
#   directory (trainpoint's --workdir, LitData's cache_dir, Mosaic's local), its own TMPDIR and, so that
#   Mosaic's ranks of one node do not meet another node's in shared memory, its own /dev/shm (a mount
#   namespace per node, `unshare`; needs root). The ranks start their clocks together (a start barrier
#   after their imports), and MinIO counts the bytes it sends for each tool's epoch (its v3 metrics).
# Every command is measured from outside by bench/shards/measure.py (wall, CPU of the process tree, peak RSS and
# PSS of the tree, the disk of its cache). TP_BENCH_REPEATS rounds (default 5), the tools' order rotated each
# round; medians as Markdown tables, with the versions and the load average.
#
# usage: bench/shards/run.sh [BUILD_DIR]      (default: the repository's build/; it holds entrypoint/trainpoint,
#                                              bench/data/tp-bench-data and tests/tools/tp-make-dataset)
# Environment: TP_BENCH_IMAGES (100000), TP_BENCH_REPEATS (5),
#   TP_BENCH_NODES (1) and TP_BENCH_RANKS_PER_NODE (2): the simulated layout (issue 46's is 2 x 4),
#   TP_BENCH_WORKERS (decoding workers per rank: 1 while the ranks are no more than the cores, else 0: each rank
#   decodes in its own thread; trainpoint's loader, LitData's and torch's DataLoader all take 0),
#   TP_BENCH_CACHE_MB (4096: trainpoint's data.stream_cache_mb, tp-bench-data --cache-mb; LitData and Mosaic
#   keep their defaults, no bound that a node's share reaches),
#   TP_BENCH_PACK_WORKERS (2: trainpoint pack --workers, litdata num_workers, Mosaic's upload threads),
#   TP_BENCH_SHARD_MB (default: the images' size / 8 on one node, / (8 x the ranks) on several, 1 to 64, so that
#   every tool writes at least 8 shards, and each node of several gets many),
#   TP_BENCH_SHUFFLE_BUFFER (1000: the samples shuffled together, trainpoint's data.shuffle_buffer and
#   WebDataset's .shuffle(N); the other tools shuffle their own way),
#   TP_BENCH_TOOLS (a subset, e.g. "litdata mosaic webdataset s3torch"; on several nodes the default is the
#   tools with a node cache: trainpoint litdata mosaic), TP_BENCH_SKIP_TRAINPOINT=1,
#   TP_BENCH_TRAINPOINT (the trainpoint binary), TP_BENCH_LOGS (default /tmp/tp-bench-shards-logs.DATE).
# The Python tools run in bench/shards/python's venv; MinIO, mc and s5cmd come from scripts/install-go-tools.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
images="${TP_BENCH_IMAGES:-100000}"
repeats="${TP_BENCH_REPEATS:-5}"
nodes="${TP_BENCH_NODES:-1}"
ranks_per_node="${TP_BENCH_RANKS_PER_NODE:-2}"
world=$((nodes * ranks_per_node))
[ "$nodes" -ge 1 ] && [ "$ranks_per_node" -ge 1 ] || { echo "TP_BENCH_NODES and TP_BENCH_RANKS_PER_NODE: 1 or more" >&2; exit 2; }
workers="${TP_BENCH_WORKERS:-$([ "$world" -le "$(nproc)" ] && echo 1 || echo 0)}"
cache_mb="${TP_BENCH_CACHE_MB:-4096}"
pack_workers="${TP_BENCH_PACK_WORKERS:-2}"
shuffle_buffer="${TP_BENCH_SHUFFLE_BUFFER:-1000}"
batch=64
size=64
cache="${TRAINPOINT_CACHE:-/var/cache/trainpoint}"
data="$cache/bench-shards/images-$images"
logs="${TP_BENCH_LOGS:-/tmp/tp-bench-shards-logs.$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$logs"
results="$logs/results.jsonl"
: >"$results"
echo "# logs and results in $logs" >&2

# --- trainpoint: its pack command and its loader's --shards, or skipped with the reason.
trainpoint="${TP_BENCH_TRAINPOINT:-$build/entrypoint/trainpoint}"
[ -x "$trainpoint" ] || trainpoint="$build/trainpoint"
tp_bench_data="$build/bench/data/tp-bench-data"
skip_trainpoint=""
if [ -n "${TP_BENCH_SKIP_TRAINPOINT:-}" ]; then
  skip_trainpoint="TP_BENCH_SKIP_TRAINPOINT is set"
elif ! "$trainpoint" pack --help >/dev/null 2>&1; then
  skip_trainpoint="\`$trainpoint pack --help\` failed: no trainpoint with a pack command in $build (build it)"
elif [ ! -x "$tp_bench_data" ] || ! grep -q -a -- "--start-barrier" "$tp_bench_data"; then
  skip_trainpoint="no tp-bench-data with --shards, --nodes and --start-barrier in $build/bench/data (build the bench target)"
fi
if [ -n "$skip_trainpoint" ]; then
  echo "# trainpoint SKIPPED: $skip_trainpoint" >&2
fi
all_tools=(trainpoint litdata mosaic webdataset s3torch)
[ "$nodes" -gt 1 ] && all_tools=(trainpoint litdata mosaic)  # the tools with a cache per node
read -r -a tools <<<"${TP_BENCH_TOOLS:-${all_tools[*]}}"
if [ -n "$skip_trainpoint" ]; then
  read -r -a tools <<<"$(printf '%s\n' "${tools[@]}" | grep -vx trainpoint | tr '\n' ' ')"
fi
pack_tools=()
for tool in "${tools[@]}"; do [ "$tool" != s3torch ] && pack_tools+=("$tool"); done

python=$("$root/bench/shards/python")
"$root/scripts/install-go-tools" minio mc s5cmd >&2
export PATH="$cache/go-tools/bin:$PATH"

# --- The dataset, generated once and kept (the stamp beside it: nothing but classes inside the folder).
if [ ! -f "$data.complete" ]; then
  echo "# generating $images images into $data" >&2
  rm -rf "$data"
  mkdir -p "$(dirname "$data")"
  "$build/tests/tools/tp-make-dataset" images --out "$data" --classes 8 --count "$images" --size 64x64 \
    --format jpeg --seed 1 >&2
  touch "$data.complete"
fi
data_bytes=$(find "$data" -type f -name '*.jpg' -printf '%s\n' | awk '{s += $1} END {print s}')
# One node: the images / 8 (at least 8 shards). Several: / (8 x the ranks), so that each node gets many shards (the
# node-dealt order reads at most one shard twice per node boundary: with 8 shards that alone is ~1.1x).
shard_parts=$([ "$nodes" -gt 1 ] && echo $((8 * world)) || echo 8)
shard_mb="${TP_BENCH_SHARD_MB:-$(awk -v b="$data_bytes" -v n="$shard_parts" 'BEGIN {m = int(b / n / 1048576); print (m < 1 ? 1 : (m > 64 ? 64 : m))}')}"
classes=$(find "$data" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort | paste -sd,)
echo "# $images images, $((data_bytes / 1048576)) MiB of JPEG; shards of $shard_mb MiB" >&2

# --- MinIO on loopback, its data in a temporary directory (on disk, as a server's), gone at the end.
work="$(mktemp -d /tmp/tp-bench-shards.XXXXXX)"
minio_pid=""
node_holders=()
cleanup() {
  [ -n "$minio_pid" ] && kill "$minio_pid" 2>/dev/null || true
  for pid in "${node_holders[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
if [ -z "$skip_trainpoint" ]; then
  # A copy of the two binaries (they link only system libraries): a rebuild during the benchmark changes nothing.
  mkdir -p "$work/bin"
  cp "$trainpoint" "$work/bin/trainpoint"
  cp "$tp_bench_data" "$work/bin/tp-bench-data"
  trainpoint="$work/bin/trainpoint"
  tp_bench_data="$work/bin/tp-bench-data"
fi
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port)
# shellcheck source=scripts/minio.sh
source "$root/scripts/minio.sh"
# Its metrics without a token: the bytes it sends for S3 requests (minio_api_requests_traffic_sent_bytes, v3), read
# before and after each tool's epoch. (The v2 node and cluster metrics lag by up to 10 s; the v3 counter is live.)
export MINIO_PROMETHEUS_AUTH_TYPE=public
start_minio "$work/server" "$port" bench
s3_sent_bytes() {
  curl -sf "http://127.0.0.1:$port/minio/metrics/v3/api/requests" |
    awk '/^minio_api_requests_traffic_sent_bytes\{/ && /type="s3"/ {s += $2} END {printf "%.0f\n", s}'
}
s3_sent_bytes | grep -qx '[0-9]*' || { echo "MinIO's v3 metrics (/minio/metrics/v3/api/requests) did not answer" >&2; exit 1; }
export AWS_ACCESS_KEY_ID=$minio_access_key AWS_SECRET_ACCESS_KEY=$minio_secret_key AWS_DEFAULT_REGION=us-east-1
export AWS_REGION=us-east-1 AWS_ENDPOINT_URL="http://127.0.0.1:$port"
export S3_ENDPOINT_URL="$AWS_ENDPOINT_URL"  # Mosaic Streaming's
export LITDATA_DISABLE_VERSION_CHECK=1       # LitData would ask PyPI for its newest version
export AWS_ALLOW_HTTP=true  # obstore, LitData's S3 client for chunks, refuses an http:// endpoint without it
s5cmd=(s5cmd --endpoint-url "$AWS_ENDPOINT_URL")  # (--log error would hide ls's listing too)

# The unpacked images, once, for s3torchconnector (and nothing else): s3://bench/images/CLASS/FILE.jpg.
if [[ " ${tools[*]} " == *" s3torch "* ]]; then
  echo "# uploading the unpacked images (s5cmd)" >&2
  (cd "$data" && "${s5cmd[@]}" --numworkers 64 cp './*' s3://bench/images/ >/dev/null)
  uploaded=$("${s5cmd[@]}" ls 's3://bench/images/*' | wc -l)
  [ "$uploaded" -eq "$images" ] || { echo "uploaded $uploaded objects of $images" >&2; exit 1; }
fi
# Every packer reads the folder from the page cache. (Clearing the page cache between runs needs root and a
# machine of our own: MinIO's objects and the folder are as cached as the machine leaves them, alike for all.)
find "$data" -type f -exec cat {} + >/dev/null

tool_versions=$("$python" - <<'PY'
import importlib.metadata as m
print(", ".join(f"{n} {m.version(n)}" for n in ("torch", "torchvision", "pillow", "litdata", "mosaicml-streaming",
                                                 "webdataset", "s3torchconnector")))
PY
)
trainpoint_version="not run"
[ -z "$skip_trainpoint" ] && trainpoint_version=$("$trainpoint" version 2>/dev/null | head -n 2 | paste -sd';' | sed 's/;/; /' || true)

# run_measured LOG JSON_FIELDS CACHE_DIR -- COMMAND...: COMMAND under measure.py, its JSON line (with the
# fields added) appended to the results; its output in LOG. Fails only the tool, not the benchmark.
run_measured() {
  local log=$1 fields=$2 cache_dir=$3
  shift 4
  local sets=()
  for field in $fields; do sets+=(--set "$field"); done
  if ! timeout 3600 "$python" "$here/measure.py" --cache "$cache_dir" "${sets[@]}" -- "$@" >>"$results" 2>"$log"; then
    echo "# FAILED ($log): $*" >&2
    tail -n 15 "$log" | sed 's/^/#   /' >&2
    return 1
  fi
}

# pack TOOL ROUND: the tool's pack of the folder into s3://bench/packed/TOOL-ROUND.
pack() {
  local tool=$1 round=$2 url="s3://bench/packed/$1-$2" log="$logs/pack-$1-$2.log"
  local fields="phase=pack tool=$tool round=$round" command
  case $tool in
    trainpoint)
      command=("$trainpoint" pack "$data" "$url" --format image_folder --shard-size-mb "$shard_mb" --valid 0
               --seed 42 --workers "$pack_workers" --workdir "$work/pack-work") ;;
    # TMPDIR: where LitData stages its chunks and Mosaic its shards before the upload, measured as the pack's disk.
    *) mkdir -p "$work/pack-work"
       command=(env TMPDIR="$work/pack-work" "$python" "$here/pack.py" "$tool" "$data" "$url" --shard-mb "$shard_mb"
                --workers "$pack_workers") ;;
  esac
  echo "# round $round: pack $tool" >&2
  if ! run_measured "$log" "$fields" "$work/pack-work" -- "${command[@]}"; then
    rm -rf "$work/pack-work"
    return 0
  fi
  rm -rf "$work/pack-work"
  # What the pack left on S3: its shards (the data files) and all its bytes.
  "${s5cmd[@]}" ls "$url/*" | awk -v tool="$tool" -v round="$round" '
    { bytes += $(NF-1); if ($NF ~ /\.(tar|bin|mds)$/) { shards++; if ($(NF-1) > largest) largest = $(NF-1) } }
    END { printf "{\"phase\": \"packed\", \"tool\": \"%s\", \"round\": %d, \"shards\": %d, \"s3_mb\": %.1f, " \
                 "\"s3_bytes\": %.0f, \"largest_shard_mb\": %.2f}\n", tool, round, shards, bytes / 1048576, bytes, largest / 1048576 }' >>"$results"
}

# node_namespace NODE: a process holding a mount namespace of its own with a fresh /dev/shm (tmpfs), in which the
# node's ranks run (nsenter): a simulated node's shared memory (Mosaic's, torch's) is its own, as on a real node.
# Prints the holder's pid (the caller kills it; the namespace and its /dev/shm go with it).
node_namespace() {
  local ready="$work/ns-ready-$1-$RANDOM"
  unshare --mount --propagation private -- sh -c \
    "mount -t tmpfs -o mode=1777,size=50% tmpfs /dev/shm && touch '$ready' && exec sleep 100000" >/dev/null 2>&1 &
  local holder=$! tries=0
  until [ -f "$ready" ]; do
    tries=$((tries + 1))
    if [ "$tries" -gt 100 ] || ! kill -0 "$holder" 2>/dev/null; then
      echo "unshare --mount failed: several simulated nodes need a mount namespace each (root)" >&2
      return 1
    fi
    sleep 0.05
  done
  rm -f "$ready"
  echo "$holder"
}

# load TOOL ROUND: one epoch of the tool by all the ranks at once, node by node (rank = node x ranks per node +
# local rank), each node's ranks with one cache directory, which each rank's measure.py watches whole.
load() {
  local tool=$1 round=$2 url="s3://bench/packed/$1-$2" rank node local_rank pids=() master_port holders=()
  local cache_dir="$work/cache/$tool-$round" barrier="$work/barrier/$tool-$round" sent_before sent_after
  [ "$tool" = s3torch ] && url="s3://bench/images"
  master_port=$(free_port)
  mkdir -p "$barrier"
  if [ "$tool" = mosaic ] && [ "$nodes" -eq 1 ]; then
    # A Mosaic run that was killed leaves its shared memory behind; its own clean-up, before the clock. (Several
    # nodes: each has a fresh /dev/shm.)
    "$python" -c 'from streaming.base.util import clean_stale_shared_memory; clean_stale_shared_memory()' 2>/dev/null || true
  fi
  if [ "$nodes" -gt 1 ]; then
    for node in $(seq 0 $((nodes - 1))); do
      holders+=("$(node_namespace "$node")") || { echo "# FAILED: load $tool: no namespace for node $node" >&2; return 0; }
    done
    node_holders+=("${holders[@]}")
  fi
  echo "# round $round: load $tool ($nodes node(s) x $ranks_per_node ranks)" >&2
  sent_before=$(s3_sent_bytes)
  for rank in $(seq 0 $((world - 1))); do
    node=$((rank / ranks_per_node))
    local_rank=$((rank % ranks_per_node))
    local dir="$cache_dir/node-$node" tmp="$work/tmp/$tool-$round/node-$node"
    mkdir -p "$dir" "$tmp"
    local command=()
    [ "$nodes" -gt 1 ] && command=(nsenter --target "${holders[$node]}" --mount --)
    case $tool in
      trainpoint)
        command+=("$tp_bench_data" --shards "$url" --rank "$rank" --nodes "$nodes" --ranks-per-node "$ranks_per_node"
                  --workers "$workers" --batch "$batch" --size "$size" --shuffle-buffer "$shuffle_buffer"
                  --cache-mb "$cache_mb" --workdir "$dir" --start-barrier "$barrier") ;;
      *)
        command+=(env RANK="$rank" WORLD_SIZE="$world" LOCAL_RANK="$local_rank" LOCAL_WORLD_SIZE="$ranks_per_node"
                  GLOBAL_RANK="$rank" NODE_RANK="$node" GROUP_RANK="$node" NNODES="$nodes" MASTER_ADDR=127.0.0.1
                  MASTER_PORT="$master_port" TMPDIR="$tmp"
                  "$python" "$here/load.py" "$tool" "$url" --cache "$dir" --workers "$workers" --batch "$batch"
                  --size "$size" --classes "$classes" --shuffle-buffer "$shuffle_buffer" --start-barrier "$barrier") ;;
    esac
    run_measured "$logs/load-$tool-$round-rank$rank.log" \
      "phase=load tool=$tool round=$round rank=$rank node=$node local_rank=$local_rank nodes=$nodes ranks_per_node=$ranks_per_node" \
      "$dir" -- "${command[@]}" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || true; done
  sent_after=$(s3_sent_bytes)
  echo "{\"phase\": \"traffic\", \"tool\": \"$tool\", \"round\": $round, \"s3_sent_bytes\": $((sent_after - sent_before))}" >>"$results"
  for pid in "${holders[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  rm -rf "$cache_dir" "$barrier" "$work/tmp/$tool-$round"
}

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
echo "# load average at the start: $load_start" >&2
for round in $(seq "$repeats"); do
  shift_by=$(((round - 1) % ${#tools[@]}))
  order=("${tools[@]:$shift_by}" "${tools[@]:0:$shift_by}")
  for tool in "${order[@]}"; do
    [ "$tool" = s3torch ] || pack "$tool" "$round"
  done
  for tool in "${order[@]}"; do
    load "$tool" "$round"
  done
  # This round's shards are done with: keep MinIO's disk to one round's.
  "${s5cmd[@]}" rm "s3://bench/packed/*" >/dev/null 2>&1 || true
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

{
  echo "trainpoint: $trainpoint_version"
  [ -n "$skip_trainpoint" ] && echo "trainpoint SKIPPED: $skip_trainpoint"
  echo "Python tools: $tool_versions; MinIO $(sed 's/.*@//' "$minio_bin/minio.version"), s5cmd $(sed 's/.*@//' "$minio_bin/s5cmd.version")"
  echo "$(nproc) cores; $images JPEGs of 64x64 ($((data_bytes / 1048576)) MiB) in 8 classes; shards of $shard_mb MiB;" \
       "pack workers $pack_workers; loading: $nodes node(s) x $ranks_per_node ranks, $workers worker(s) each, batch $batch," \
       "shuffle buffer $shuffle_buffer, trainpoint's stream_cache_mb $cache_mb; $repeats round(s)," \
       "order rotated; page caches not cleared (the folder and MinIO's files as the machine caches them)"
  echo
  python3 "$here/summary.py" "$results"
  echo
  echo "load average at the start: $load_start; at the end: $load_end"
} | tee "$logs/summary.md"
