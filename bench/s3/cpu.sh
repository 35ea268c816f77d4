#!/usr/bin/env bash
# Where the CPU of bench/s3/run.sh's downloads goes (not a test): MinIO on loopback serves one 1 GiB object
# (large) or 2,000 objects of 100 KiB (small) to trainpoint (tp_s3_bench cp as run.sh runs it: every object's
# CRC64NVME checked) and to curl (one stream, or 32 in parallel; nothing verified), alternating.
# Each run prints the wall time, the client's CPU seconds (user + system) and the server's (MinIO's process,
# from /proc); then the medians. On a machine whose cores the server shares, (client + server CPU) / cores
# bounds the wall time from below.
#
# usage: [TP_OPTIONS="--part-size-mib 32"] bench/s3/cpu.sh BUILD_DIR [RUNS] [large|small]
#        (BUILD_DIR holds bench/s3/tp_s3_bench; TP_OPTIONS: more options of trainpoint s3 cp)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$(cd "${1:?usage: cpu.sh BUILD_DIR [RUNS]}" && pwd)"
runs="${2:-5}"
set_name="${3:-large}"
trainpoint="$build/bench/s3/tp_s3_bench"
# shellcheck source=bench/s3/server.sh
source "$root/bench/s3/server.sh"
start_bench_server "$root" tp-s3-cpu
curl_signed=(curl -sS --fail --aws-sigv4 "aws:amz:us-east-1:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY"
  -H x-amz-content-sha256:UNSIGNED-PAYLOAD)
mkdir -p "$work/source"
if [ "$set_name" = large ]; then
  head -c $((1 << 30)) /dev/urandom >"$work/source/blob.bin"
  "$trainpoint" cp "$work/source/blob.bin" s3://bench/blob.bin >/dev/null
  trainpoint_command=("$trainpoint" cp s3://bench/blob.bin "$work/mnt/blob.bin")
  curl_command=("${curl_signed[@]}" -o "$work/mnt/blob.bin" "$AWS_ENDPOINT_URL/bench/blob.bin")
else
  for i in $(seq 0 1999); do head -c $((100 * 1024)) /dev/urandom >"$work/source/img$i.bin"; done
  "$trainpoint" cp --recursive "$work/source" s3://bench/small/ >/dev/null
  for i in $(seq 0 1999); do
    printf 'url = "%s/bench/small/img%d.bin"\noutput = "%s/img%d.bin"\n' "$AWS_ENDPOINT_URL" "$i" "$work/mnt/out" "$i"
  done >"$work/small.curl"
  sed 's|^output = .*|output = "/dev/null"|' "$work/small.curl" >"$work/warm.curl"
  "${curl_signed[@]}" -Z --parallel-max 32 -K "$work/warm.curl" >/dev/null  # warm the server's caches
  trainpoint_command=("$trainpoint" cp --recursive --parallelism 32 s3://bench/small/ "$work/mnt/out")
  curl_command=("${curl_signed[@]}" -Z --parallel-max 32 -K "$work/small.curl")
  # What trainpoint does that the curl ceiling does not: list the prefix.
  listing_command=("$trainpoint" ls --recursive s3://bench/small/)
fi
rm -rf "$work/source"

server_cpu() { awk '{print ($14 + $15) / 100}' "/proc/$server_pid/stat"; }
median() { sort -g | awk '{t[NR]=$1} END {print t[int((NR+1)/2)]}'; }
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
for run in $(seq "$runs"); do
  for tool in trainpoint curl ${listing_command:+listing}; do
    rm -rf "$work/mnt/blob.bin" "$work/mnt/out"
    mkdir -p "$work/mnt/out"
    sync
    before=$(server_cpu)
    if [ "$tool" = curl ]; then
      /usr/bin/time -f "%e %U %S" -o "$work/time" "${curl_command[@]}"
    elif [ "$tool" = listing ]; then
      /usr/bin/time -f "%e %U %S" -o "$work/time" "${listing_command[@]}" >/dev/null
    else
      # shellcheck disable=SC2086  # TP_OPTIONS is split into options
      /usr/bin/time -f "%e %U %S" -o "$work/time" "${trainpoint_command[@]}" ${TP_OPTIONS:-} >/dev/null
    fi
    after=$(server_cpu)
    read -r wall user system <"$work/time"
    echo "$tool $wall $(echo "$user + $system" | bc) $(echo "$after - $before" | bc)" | tee -a "$work/$tool.txt" >&2
  done
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
echo "$([ "$set_name" = large ] && echo "1 GiB" || echo "2,000 x 100 KiB") from MinIO on loopback, $(nproc) cores; medians of $runs runs; load average $load_start at the start, $load_end at the end"
echo
echo "| tool | wall s | client CPU s | server CPU s | (client + server CPU) / $(nproc) cores, s |"
echo "|---|---:|---:|---:|---:|"
for tool in trainpoint curl ${listing_command:+listing}; do
  wall=$(awk '{print $2}' "$work/$tool.txt" | median)
  client=$(awk '{print $3}' "$work/$tool.txt" | median)
  server=$(awk '{print $4}' "$work/$tool.txt" | median)
  echo "| $tool | $wall | $client | $server | $(echo "scale=2; ($client + $server) / $(nproc)" | bc) |"
done
