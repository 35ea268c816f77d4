# shellcheck shell=bash
# Sourced by bench/s3/run.sh and bench/s3/cpu.sh: a work directory with a tmpfs the tools write into, and
# MinIO (scripts/minio.sh) on loopback serving the bucket "bench", both gone when the script exits. After it:
# $work, $work/mnt (the tmpfs, as root; else a plain directory), $port, $endpoint, $server_pid (MinIO, whose
# CPU time bench/s3/cpu.sh reads), and the AWS_* variables the tools take the endpoint and keys from.
#
#   start_bench_server ROOT NAME      (ROOT: the repository; NAME: the temporary's prefix)
start_bench_server() {
  local root=$1 name=$2
  work="$(mktemp -d "/tmp/$name.XXXXXX")"
  server_pid=""
  trap 'stop_bench_server' EXIT
  # The tools write into a tmpfs (as root): on this machine's ext4, creating files right after a mass delete
  # is several times slower (docs/benchmarks.md, "Git"), and writeback of earlier runs would be timed too.
  # MinIO's own data stays on disk, as a server's would.
  mkdir -p "$work/mnt" "$work/server"
  mount -t tmpfs -o size=3g "$name" "$work/mnt" 2>/dev/null || echo "# no tmpfs: writing to $work" >&2
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  endpoint="http://127.0.0.1:$port"
  "$root/scripts/install-go-tools" minio mc s5cmd
  # shellcheck source=scripts/minio.sh
  source "$root/scripts/minio.sh"
  start_minio "$work/server" "$port" bench
  server_pid=$minio_pid
  export AWS_ACCESS_KEY_ID=$minio_access_key AWS_SECRET_ACCESS_KEY=$minio_secret_key AWS_DEFAULT_REGION=us-east-1
  export AWS_ENDPOINT_URL="$endpoint"
}

stop_bench_server() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  if mountpoint -q "$work/mnt"; then umount "$work/mnt"; fi
  rm -rf "$work"
}
