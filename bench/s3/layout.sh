#!/usr/bin/env bash
# How a 1 GiB download's range layout changes its time (not a test): MinIO on loopback serves one 1 GiB object
# (uploaded by trainpoint, so it has a CRC64NVME) to trainpoint with each given layout, to s5cmd (its
# defaults: 5 streams of 50 MiB) and to one `curl --aws-sigv4` stream (nothing verified), alternating, the
# order rotated by one per run. Prints each one's median and runs, and the load average.
#
# usage: bench/s3/layout.sh BUILD_DIR [RUNS] [LAYOUT...]
#        LAYOUT: PARALLELISM or PARALLELISMxPART_MIB (default: 16 (trainpoint's defaults), 8x8, 4x32, 5x50)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$(cd "${1:?usage: layout.sh BUILD_DIR [RUNS] [LAYOUT...]}" && pwd)"
runs="${2:-7}"
layouts=("${@:3}")
[ ${#layouts[@]} -gt 0 ] || layouts=(16 8x8 4x32 5x50)
trainpoint="$build/bench/s3/tp_s3_bench"
# shellcheck source=bench/s3/server.sh
source "$root/bench/s3/server.sh"
start_bench_server "$root" tp-s3-layout
dest="$work/mnt/dest"
head -c $((1 << 30)) /dev/urandom >"$work/server-blob.bin"
"$trainpoint" cp "$work/server-blob.bin" s3://bench/blob.bin >/dev/null

declare -A command times
for layout in "${layouts[@]}"; do
  options="--parallelism ${layout%x*}"
  [[ $layout == *x* ]] && options+=" --part-size-mib ${layout#*x}"
  command["trainpoint $layout"]="$trainpoint cp s3://bench/blob.bin $dest/blob.bin $options"
done
command[s5cmd]="$minio_bin/s5cmd --endpoint-url $endpoint cp s3://bench/blob.bin $dest/blob.bin"
command[curl]="curl -sS --fail --aws-sigv4 aws:amz:us-east-1:s3 --user $AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY
  -H x-amz-content-sha256:UNSIGNED-PAYLOAD -o $dest/blob.bin $endpoint/bench/blob.bin"
tools=()
for layout in "${layouts[@]}"; do tools+=("trainpoint $layout"); done
tools+=(s5cmd curl)

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
for run in $(seq "$runs"); do
  order=("${tools[@]:$(((run - 1) % ${#tools[@]}))}" "${tools[@]:0:$(((run - 1) % ${#tools[@]}))}")
  for tool in "${order[@]}"; do
    rm -rf "$dest" && mkdir -p "$dest" && sync
    start=$(date +%s.%N)
    # shellcheck disable=SC2086 # the commands are word lists without spaces in their words
    ${command[$tool]} >"$work/last.log" 2>&1 || { echo "failed: $tool" >&2; tail -5 "$work/last.log" >&2; exit 1; }
    end=$(date +%s.%N)
    cmp -s "$work/server-blob.bin" "$dest/blob.bin" || { echo "$tool wrote other bytes" >&2; exit 1; }
    times[$tool]+=" $(echo "$end - $start" | bc -l)"
  done
done
median() { printf '%s\n' "$@" | sort -g | awk '{t[NR]=$1} END {print t[int((NR+1)/2)]}'; }
echo "| 1 GiB download | median s | runs |"
echo "|---|---:|---|"
for tool in "${tools[@]}"; do
  # shellcheck disable=SC2086
  printf '| %s | %.3f |%s |\n' "$tool" "$(median ${times[$tool]})" "$(printf ' %.2f' ${times[$tool]})"
done
echo "load average at the start: $load_start; at the end: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores"
