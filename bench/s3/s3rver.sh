# shellcheck shell=bash
# Sourced by bench/s3/run.sh and bench/s3/cpu.sh: a work directory with a tmpfs the tools write into, and
# s3rver on loopback serving the bucket "bench", both gone when the script exits. After it: $work, $work/mnt
# (the tmpfs, as root; else a plain directory), $port, $endpoint, $server_pid, $server_node_pid (the Node process
# whose CPU time bench/s3/cpu.sh reads), and the AWS_* variables the tools take the endpoint and keys from.
#
#   start_s3rver ROOT NAME      (ROOT: the repository, whose .deps/npm holds s3rver; NAME: the temporary's prefix)
start_s3rver() {
  local root=$1 name=$2
  work="$(mktemp -d "/tmp/$name.XXXXXX")"
  server_pid=""
  trap 'stop_s3rver' EXIT
  # The tools write into a tmpfs (as root): on this machine's ext4, creating files right after a mass delete
  # is several times slower (docs/benchmarks.md, "Git"), and writeback of earlier runs would be timed too.
  mkdir -p "$work/mnt" "$work/server"
  mount -t tmpfs -o size=3g "$name" "$work/mnt" 2>/dev/null || echo "# no tmpfs: writing to $work" >&2
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  endpoint="http://127.0.0.1:$port"
  NODE_OPTIONS=--openssl-legacy-provider "$root/.deps/npm/node_modules/.bin/s3rver" -d "$work/server" \
    -a 127.0.0.1 -p "$port" --configure-bucket bench --silent >"$work/s3rver.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
  server_node_pid=$(pgrep -f "s3rver -d $work/server" | tail -1)
  export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_DEFAULT_REGION=us-east-1
  export AWS_ENDPOINT_URL="$endpoint"
}

stop_s3rver() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  if mountpoint -q "$work/mnt"; then umount "$work/mnt"; fi
  rm -rf "$work"
}
