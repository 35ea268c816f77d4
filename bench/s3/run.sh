#!/usr/bin/env bash
# S3 staging benchmark (not a test): 2,000 x 100 KiB objects and one 1 GiB object from s3rver on loopback,
# downloaded by trainpoint (tp_s3_bench = `trainpoint s3`), the awscli, rclone, and parallel curl (the
# server's ceiling), in one run. Prints medians, rates and ratios as a Markdown table.
#
# usage: bench/s3/run.sh BUILD_DIR [RUNS]      (BUILD_DIR holds bench/s3/tp_s3_bench)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$(cd "${1:?usage: run.sh BUILD_DIR [RUNS]}" && pwd)"
runs="${2:-3}"
trainpoint="$build/bench/s3/tp_s3_bench"
small_count=2000
small_kib=100
parallelism=32

# shellcheck source=bench/s3/s3rver.sh
source "$root/bench/s3/s3rver.sh"
start_s3rver "$root" tp-s3-bench
dest="$work/mnt/dest"

rclone_remote=(--config /dev/null --s3-provider Other --s3-endpoint "$endpoint" --s3-access-key-id S3RVER
  --s3-secret-access-key S3RVER --s3-region us-east-1)

echo "# generating and uploading the data" >&2
mkdir -p "$work/src/small" "$work/src/large"
python3 - "$work/src/small" "$small_count" "$small_kib" <<'PY'
import os, sys
directory, count, kib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(count):
    with open(os.path.join(directory, f"img{i:05d}.bin"), "wb") as f:
        f.write(os.urandom(kib * 1024))
PY
head -c $((1024 * 1024 * 1024)) /dev/urandom >"$work/src/large/blob.bin"
"$trainpoint" cp --recursive "$work/src/small" s3://bench/small/ >/dev/null
"$trainpoint" cp "$work/src/large/blob.bin" s3://bench/large/blob.bin >/dev/null

# A fresh s3rver is slower for its first ~2,000 requests (facts.md): warm it up before timing.
warm_config="$work/warm.curl"
for i in $(seq 0 $((small_count - 1))); do
  printf 'url = "%s/bench/small/img%05d.bin"\noutput = "/dev/null"\n' "$endpoint" "$i"
done >"$warm_config"
curl_signed=(curl -sS --fail --aws-sigv4 "aws:amz:us-east-1:s3" --user S3RVER:S3RVER -H x-amz-content-sha256:UNSIGNED-PAYLOAD)
"${curl_signed[@]}" -Z --parallel-max "$parallelism" -K "$warm_config" >"$work/warm.log" 2>&1

# time_once COMMAND...: runs COMMAND into a fresh $dest and prints the seconds it took.
time_once() {
  rm -rf "$dest"
  mkdir -p "$dest"
  sync
  local start end
  start=$(date +%s.%N)
  "$@" >"$work/last.log" 2>&1 || { echo "failed: $*" >&2; tail -5 "$work/last.log" >&2; exit 1; }
  end=$(date +%s.%N)
  echo "$end - $start" | bc -l
}
median() { printf '%s\n' "$@" | sort -g | awk '{t[NR]=$1} END {print t[int((NR+1)/2)]}'; }

small_config="$work/small.curl"
for i in $(seq 0 $((small_count - 1))); do
  printf 'url = "%s/bench/small/img%05d.bin"\noutput = "%s/img%05d.bin"\n' "$endpoint" "$i" "$dest" "$i"
done >"$small_config"

declare -A small_cmd large_cmd small large
small_cmd[trainpoint]="$trainpoint cp --recursive s3://bench/small/ $dest --parallelism $parallelism"
small_cmd[awscli]="aws s3 cp --recursive --quiet s3://bench/small/ $dest"
small_cmd[rclone]="env -u AWS_CA_BUNDLE rclone copy ${rclone_remote[*]} :s3:bench/small $dest"
small_cmd[rclone_t32]="env -u AWS_CA_BUNDLE rclone copy ${rclone_remote[*]} --transfers $parallelism :s3:bench/small $dest"
small_cmd[curl]="${curl_signed[*]} -Z --parallel-max $parallelism -K $small_config"
large_cmd[trainpoint]="$trainpoint cp s3://bench/large/blob.bin $dest/blob.bin --parallelism 8"
large_cmd[awscli]="aws s3 cp --quiet s3://bench/large/blob.bin $dest/blob.bin"
large_cmd[rclone]="env -u AWS_CA_BUNDLE rclone copy ${rclone_remote[*]} :s3:bench/large $dest"
large_cmd[curl]="${curl_signed[*]} -o $dest/blob.bin $endpoint/bench/large/blob.bin"
# The verifying ceiling: one curl writing the file while md5sum hashes the same bytes (tee), on the same cores.
printf 'set -o pipefail\n%s %s | tee %s | md5sum\n' "${curl_signed[*]}" "$endpoint/bench/large/blob.bin" \
  "$dest/blob.bin" >"$work/curl_md5.sh"
large_cmd[curl_md5]="bash $work/curl_md5.sh"
tools=(trainpoint awscli rclone rclone_t32 curl curl_md5)

# Runs alternate between tools, so that a drifting server or a busy machine affects every tool alike: each run
# times every tool's small objects, then every tool's large object, starting one tool later than the run
# before (s3rver is slower for a while after serving the 1 GiB object, which would favour whoever follows).
declare -A small_times large_times
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
for run in $(seq "$runs"); do
  echo "# run $run" >&2
  order=("${tools[@]:$(((run - 1) % ${#tools[@]}))}" "${tools[@]:0:$(((run - 1) % ${#tools[@]}))}")
  for tool in "${order[@]}"; do
    [ -n "${small_cmd[$tool]:-}" ] || continue
    # shellcheck disable=SC2086 # the commands are word lists without spaces in their words
    small_times[$tool]+=" $(time_once ${small_cmd[$tool]})"
    [ "$tool" = trainpoint ] && [ "$(find "$dest" -type f -name 'img*.bin' | wc -l)" -ne "$small_count" ] &&
      { echo "trainpoint did not stage every object" >&2; exit 1; }
  done
  for tool in "${order[@]}"; do
    [ -n "${large_cmd[$tool]:-}" ] || continue
    # shellcheck disable=SC2086
    large_times[$tool]+=" $(time_once ${large_cmd[$tool]})"
    cmp "$work/src/large/blob.bin" "$dest/blob.bin"
  done
  for tool in "${tools[@]}"; do echo "  $tool: small${small_times[$tool]:-} large${large_times[$tool]:-}" >&2; done
done
for tool in "${tools[@]}"; do
  # shellcheck disable=SC2086
  [ -n "${small_times[$tool]:-}" ] && small[$tool]=$(median ${small_times[$tool]})
  # shellcheck disable=SC2086
  [ -n "${large_times[$tool]:-}" ] && large[$tool]=$(median ${large_times[$tool]})
done

mib=1024
echo "| tool | ${small_count} x ${small_kib} KiB: s | objects/s | 1 GiB: s | MB/s |"
echo "|---|---|---|---|---|"
for tool in "${tools[@]}"; do
  s=${small[$tool]:-}
  l=${large[$tool]:-}
  printf '| %s | %s | %s | %s | %s |\n' "$tool" "${s:+$(printf '%.2f' "$s")}" "${s:+$(printf '%.0f' "$(echo "$small_count / $s" | bc -l)")}" \
    "${l:+$(printf '%.2f' "$l")}" "${l:+$(printf '%.0f' "$(echo "$mib * 1.048576 / $l" | bc -l)")}"
done
echo
printf 'small objects: trainpoint/awscli %.2fx, trainpoint/rclone %.2fx (rclone --transfers %d: %.2fx), trainpoint/curl ceiling %.2f\n' \
  "$(echo "${small[awscli]} / ${small[trainpoint]}" | bc -l)" "$(echo "${small[rclone]} / ${small[trainpoint]}" | bc -l)" \
  "$parallelism" "$(echo "${small[rclone_t32]} / ${small[trainpoint]}" | bc -l)" "$(echo "${small[curl]} / ${small[trainpoint]}" | bc -l)"
printf 'large object: trainpoint/awscli %.2fx, trainpoint/rclone %.2fx, trainpoint/curl ceiling %.2f, trainpoint/(curl | md5sum) %.2f\n' \
  "$(echo "${large[awscli]} / ${large[trainpoint]}" | bc -l)" "$(echo "${large[rclone]} / ${large[trainpoint]}" | bc -l)" \
  "$(echo "${large[curl]} / ${large[trainpoint]}" | bc -l)" "$(echo "${large[curl_md5]} / ${large[trainpoint]}" | bc -l)"
echo "load average at the start: $load_start; at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
