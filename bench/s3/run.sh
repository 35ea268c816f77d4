#!/usr/bin/env bash
# S3 transfer benchmark (not a test): 2,000 x 100 KiB objects and one 1 GiB object, downloaded from and uploaded
# to MinIO on loopback by trainpoint (tp_s3_bench = `trainpoint s3`), s5cmd, rclone, the awscli, boto3's
# transfer manager (with the CRT when it installs) and parallel `curl --aws-sigv4` (the server's ceiling: it
# verifies nothing), in one run, the order rotated between runs. trainpoint verifies every download (the
# object's CRC64NVME, kept since its upload) and sends a CRC64NVME with every upload. Prints medians, rates and
# ratios as Markdown tables, with the tools' versions and the load average.
#
# usage: bench/s3/run.sh BUILD_DIR [RUNS]      (BUILD_DIR holds bench/s3/tp_s3_bench; RUNS default 5)
# The awscli, boto3 and the CRT come from PyPI into a venv in $TRAINPOINT_CACHE/bench-s3 (made once);
# s5cmd and MinIO from scripts/install-go-tools.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$(cd "${1:?usage: run.sh BUILD_DIR [RUNS]}" && pwd)"
runs="${2:-5}"
trainpoint="$build/bench/s3/tp_s3_bench"
small_count=2000
small_kib=100
parallelism=32

venv="${TRAINPOINT_CACHE:-/var/cache/trainpoint}/bench-s3/venv"
if [ ! -x "$venv/bin/aws" ]; then
  echo "# the awscli, boto3 and the CRT from PyPI into $venv" >&2
  rm -rf "$venv" && /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q awscli==1.46.3 'boto3[crt]' >&2
fi

# shellcheck source=bench/s3/server.sh
source "$root/bench/s3/server.sh"
start_bench_server "$root" tp-s3-bench
s5cmd="$minio_bin/s5cmd --endpoint-url $endpoint"
dest="$work/mnt/dest"
src="$work/mnt/src"

rclone_remote=(--config /dev/null --s3-provider Minio --s3-endpoint "$endpoint" --s3-access-key-id
  "$AWS_ACCESS_KEY_ID" --s3-secret-access-key "$AWS_SECRET_ACCESS_KEY" --s3-region us-east-1)
curl_signed=(curl -sS --fail --aws-sigv4 "aws:amz:us-east-1:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY"
  -H x-amz-content-sha256:UNSIGNED-PAYLOAD)

echo "# generating and uploading the data" >&2
mkdir -p "$src/small" "$src/large"
python3 - "$src/small" "$small_count" "$small_kib" <<'PY'
import os, sys
directory, count, kib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(count):
    with open(os.path.join(directory, f"img{i:05d}.bin"), "wb") as f:
        f.write(os.urandom(kib * 1024))
PY
head -c $((1024 * 1024 * 1024)) /dev/urandom >"$src/large/blob.bin"
"$trainpoint" cp --recursive "$src/small" s3://bench/small/ >/dev/null
"$trainpoint" cp "$src/large/blob.bin" s3://bench/large/blob.bin >/dev/null

# boto3's transfer manager, as a Python data loader or script would use it: the CRT when it is there.
cat >"$work/boto3_transfer.py" <<'PY'
import concurrent.futures, os, sys
import boto3
from boto3.s3.transfer import TransferConfig
direction, bucket, prefix, directory, workers = sys.argv[1:6]
client = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
config = TransferConfig(max_concurrency=int(workers), preferred_transfer_client="auto")
if direction == "download":
    keys = [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
            for o in page.get("Contents", [])]
    def one(key):
        client.download_file(bucket, key, os.path.join(directory, os.path.basename(key)), Config=config)
else:
    keys = sorted(os.listdir(directory))
    def one(name):
        client.upload_file(os.path.join(directory, name), bucket, prefix + name, Config=config)
# Many small objects in parallel as a loader would; one large object through the transfer manager's own parts.
with concurrent.futures.ThreadPoolExecutor(int(workers) if len(keys) > 1 else 1) as pool:
    list(pool.map(one, keys))
PY

for i in $(seq 0 $((small_count - 1))); do
  printf 'url = "%s/bench/small/img%05d.bin"\noutput = "/dev/null"\n' "$endpoint" "$i"
done >"$work/warm.curl"
"${curl_signed[@]}" -Z --parallel-max "$parallelism" -K "$work/warm.curl" >"$work/warm.log" 2>&1

# time_once COMMAND...: runs COMMAND with a fresh, empty $dest and prints the seconds it took.
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
upload_config="$work/upload.curl"
printf 'url = "%s/bench/up-curl/blob.bin"\nupload-file = "%s"\n' "$endpoint" "$src/large/blob.bin" >"$upload_config"

boto3=("$venv/bin/python" "$work/boto3_transfer.py")
declare -A small_cmd large_cmd upload_cmd small large upload
small_cmd[trainpoint]="$trainpoint cp --recursive s3://bench/small/ $dest --parallelism $parallelism"
small_cmd[s5cmd]="$s5cmd --numworkers $parallelism cp s3://bench/small/* $dest/"
small_cmd[awscli]="$venv/bin/aws s3 cp --recursive --quiet s3://bench/small/ $dest"
small_cmd[boto3]="${boto3[*]} download bench small/ $dest $parallelism"
small_cmd[rclone]="env -u AWS_CA_BUNDLE rclone copy ${rclone_remote[*]} --transfers $parallelism :s3:bench/small $dest"
small_cmd[curl]="${curl_signed[*]} -Z --parallel-max $parallelism -K $small_config"
large_cmd[trainpoint]="$trainpoint cp s3://bench/large/blob.bin $dest/blob.bin"
large_cmd[s5cmd]="$s5cmd cp s3://bench/large/blob.bin $dest/blob.bin"
large_cmd[awscli]="$venv/bin/aws s3 cp --quiet s3://bench/large/blob.bin $dest/blob.bin"
large_cmd[boto3]="${boto3[*]} download bench large/ $dest 8"
large_cmd[rclone]="env -u AWS_CA_BUNDLE rclone copy ${rclone_remote[*]} :s3:bench/large $dest"
large_cmd[curl]="${curl_signed[*]} -o $dest/blob.bin $endpoint/bench/large/blob.bin"
# Uploads of the 1 GiB file, each tool to its own key (overwritten run after run).
upload_cmd[trainpoint]="$trainpoint cp $src/large/blob.bin s3://bench/up-trainpoint/blob.bin --parallelism 8"
upload_cmd[s5cmd]="$s5cmd cp $src/large/blob.bin s3://bench/up-s5cmd/blob.bin"
upload_cmd[awscli]="$venv/bin/aws s3 cp --quiet $src/large/blob.bin s3://bench/up-awscli/blob.bin"
upload_cmd[boto3]="${boto3[*]} upload bench up-boto3/ $src/large 8"
# --ignore-times: rclone would skip a file the destination already has with the same size and time.
upload_cmd[rclone]="env -u AWS_CA_BUNDLE rclone copy ${rclone_remote[*]} --ignore-times $src/large :s3:bench/up-rclone"
upload_cmd[curl]="${curl_signed[*]} -K $upload_config"
tools=(trainpoint s5cmd awscli boto3 rclone curl)

# Runs alternate between tools, so that a drifting server or a busy machine affects every tool alike: each run
# times every tool's small objects, then every tool's large object, then every tool's upload, starting one
# tool later than the run before.
declare -A small_times large_times upload_times
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
for run in $(seq "$runs"); do
  echo "# run $run" >&2
  order=("${tools[@]:$(((run - 1) % ${#tools[@]}))}" "${tools[@]:0:$(((run - 1) % ${#tools[@]}))}")
  for tool in "${order[@]}"; do
    # shellcheck disable=SC2086 # the commands are word lists without spaces in their words
    small_times[$tool]+=" $(time_once ${small_cmd[$tool]})"
    [ "$(find "$dest" -type f -name 'img*.bin' | wc -l)" -eq "$small_count" ] ||
      { echo "$tool did not download every object" >&2; exit 1; }
  done
  for tool in "${order[@]}"; do
    # shellcheck disable=SC2086
    large_times[$tool]+=" $(time_once ${large_cmd[$tool]})"
    cmp "$src/large/blob.bin" "$dest/blob.bin"
  done
  for tool in "${order[@]}"; do
    # shellcheck disable=SC2086
    upload_times[$tool]+=" $(time_once ${upload_cmd[$tool]})"
  done
  for tool in "${tools[@]}"; do
    echo "  $tool: small${small_times[$tool]} large${large_times[$tool]} upload${upload_times[$tool]}" >&2
  done
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
for tool in "${tools[@]}"; do
  # shellcheck disable=SC2086
  small[$tool]=$(median ${small_times[$tool]})
  # shellcheck disable=SC2086
  large[$tool]=$(median ${large_times[$tool]})
  # shellcheck disable=SC2086
  upload[$tool]=$(median ${upload_times[$tool]})
done
# Every upload landed whole: the sizes on the server.
$s5cmd ls 's3://bench/up-*' | awk '{print $NF, $(NF-1)}' >&2

mib=1024
echo "MinIO $(cat "$minio_bin/minio.version"), s5cmd $(cat "$minio_bin/s5cmd.version"), $("$venv/bin/aws" --version 2>&1), boto3 $("$venv/bin/python" -c 'import boto3; print(boto3.__version__)'), $(rclone version | head -n 1), $(curl --version | head -n 1 | cut -d' ' -f1-2); $(nproc) cores; medians of $runs runs"
echo
echo "| tool | ${small_count} x ${small_kib} KiB down: s | objects/s | 1 GiB down: s | MB/s | 1 GiB up: s | MB/s |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for tool in "${tools[@]}"; do
  printf '| %s | %.2f | %.0f | %.2f | %.0f | %.2f | %.0f |\n' "$tool" "${small[$tool]}" \
    "$(echo "$small_count / ${small[$tool]}" | bc -l)" "${large[$tool]}" "$(echo "$mib * 1.048576 / ${large[$tool]}" | bc -l)" \
    "${upload[$tool]}" "$(echo "$mib * 1.048576 / ${upload[$tool]}" | bc -l)"
done
echo
ratio() { printf '%.2f' "$(echo "$2 / $1" | bc -l)"; }  # ratio TRAINPOINT_SECONDS OTHER_SECONDS: speed-up
echo "small objects: trainpoint/s5cmd $(ratio "${small[trainpoint]}" "${small[s5cmd]}")x, trainpoint/curl ceiling $(ratio "${small[trainpoint]}" "${small[curl]}")"
echo "1 GiB download (verified): trainpoint/s5cmd $(ratio "${large[trainpoint]}" "${large[s5cmd]}")x, trainpoint/curl ceiling $(ratio "${large[trainpoint]}" "${large[curl]}")"
echo "1 GiB upload (with a checksum): trainpoint/s5cmd $(ratio "${upload[trainpoint]}" "${upload[s5cmd]}")x, trainpoint/curl $(ratio "${upload[trainpoint]}" "${upload[curl]}")"
echo "load average at the start: $load_start; at the end: $load_end"
