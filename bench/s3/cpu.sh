#!/usr/bin/env bash
# Where the CPU of a 1 GiB download goes (not a test): s3rver on loopback serves one 1 GiB object to
# trainpoint (tp_s3_bench cp: 8 MiB ranges in parallel, MD5 against the ETag) and to one plain curl (nothing
# verified), alternating; for each run it prints the wall time, the client's CPU seconds (user + system) and
# the server's (its Node process, from /proc), then the medians. On a machine whose cores the server shares,
# (client + server CPU) / cores bounds the wall time from below.
#
# usage: [TP_OPTIONS="--part-size-mib 32"] bench/s3/cpu.sh BUILD_DIR [RUNS]   (BUILD_DIR holds bench/s3/tp_s3_bench)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$(cd "${1:?usage: cpu.sh BUILD_DIR [RUNS]}" && pwd)"
runs="${2:-5}"
trainpoint="$build/bench/s3/tp_s3_bench"
work="$(mktemp -d /tmp/tp-s3-cpu.XXXXXX)"
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  if mountpoint -q "$work/mnt"; then umount "$work/mnt"; fi
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/mnt" "$work/server"
mount -t tmpfs -o size=3g tp-s3-cpu "$work/mnt"  # as bench/s3/run.sh: no file system's slowness measured
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
NODE_OPTIONS=--openssl-legacy-provider "$root/.deps/npm/node_modules/.bin/s3rver" -d "$work/server" -a 127.0.0.1 \
  -p "$port" --configure-bucket bench --silent >"$work/s3rver.log" 2>&1 &
server_pid=$!
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
node_pid=$(pgrep -f "s3rver -d $work/server" | tail -1)
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_DEFAULT_REGION=us-east-1
export AWS_ENDPOINT_URL="http://127.0.0.1:$port"
head -c $((1 << 30)) /dev/urandom >"$work/blob.bin"
"$trainpoint" cp "$work/blob.bin" s3://bench/blob.bin >/dev/null
rm "$work/blob.bin"

server_cpu() { awk '{print ($14 + $15) / 100}' "/proc/$node_pid/stat"; }
median() { sort -g | awk '{t[NR]=$1} END {print t[int((NR+1)/2)]}'; }
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
for run in $(seq "$runs"); do
  for tool in trainpoint curl; do
    rm -f "$work/mnt/blob.bin"
    sync
    before=$(server_cpu)
    if [ "$tool" = curl ]; then
      /usr/bin/time -f "%e %U %S" -o "$work/time" curl -sS --fail --aws-sigv4 "aws:amz:us-east-1:s3" \
        --user S3RVER:S3RVER -H x-amz-content-sha256:UNSIGNED-PAYLOAD -o "$work/mnt/blob.bin" \
        "$AWS_ENDPOINT_URL/bench/blob.bin"
    else
      # shellcheck disable=SC2086  # TP_OPTIONS: extra options of trainpoint s3 cp, split by the shell
      /usr/bin/time -f "%e %U %S" -o "$work/time" "$trainpoint" cp ${TP_OPTIONS:-} s3://bench/blob.bin "$work/mnt/blob.bin" >/dev/null
    fi
    after=$(server_cpu)
    read -r wall user system <"$work/time"
    echo "$tool $wall $(echo "$user + $system" | bc) $(echo "$after - $before" | bc)" | tee -a "$work/$tool.txt" >&2
  done
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
echo "1 GiB from s3rver on loopback, $(nproc) cores; medians of $runs runs; load average $load_start at the start, $load_end at the end"
echo
echo "| tool | wall s | client CPU s | server CPU s | (client + server CPU) / $(nproc) cores, s |"
echo "|---|---:|---:|---:|---:|"
for tool in trainpoint curl; do
  wall=$(awk '{print $2}' "$work/$tool.txt" | median)
  client=$(awk '{print $3}' "$work/$tool.txt" | median)
  server=$(awk '{print $4}' "$work/$tool.txt" | median)
  echo "| $tool | $wall | $client | $server | $(echo "scale=2; ($client + $server) / $(nproc)" | bc) |"
done
