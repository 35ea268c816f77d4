# shellcheck shell=bash
# Sourced by the scripts that need an S3 server (scripts/fault-suite, scripts/image-test, bench/s3): MinIO on
# loopback with its root user, as tests/s3/s3_server.cpp starts it for ctest. scripts/install-go-tools builds
# minio and mc into $TRAINPOINT_CACHE/go-tools/bin (default /var/cache/trainpoint).
#
#   start_minio DIR PORT BUCKET...   MinIO on 127.0.0.1:PORT with its data in DIR/data and log in DIR/minio.log,
#                                    the buckets made; sets minio_pid (the caller stops it)
#   minio_mc PORT ARGS...            mc with the alias `tp` for the server on PORT, as its root user
# After sourcing: $minio_access_key and $minio_secret_key, the root user's keys.
minio_bin="${TRAINPOINT_CACHE:-/var/cache/trainpoint}/go-tools/bin"
minio_access_key=trainpoint-test
minio_secret_key=trainpoint-test-secret

minio_mc() {
  local port=$1; shift
  MC_CONFIG_DIR="${TMPDIR:-/tmp}/trainpoint-mc-$port" \
    MC_HOST_tp="http://$minio_access_key:$minio_secret_key@127.0.0.1:$port" "$minio_bin/mc" --quiet --no-color "$@"
}

start_minio() {
  local dir=$1 port=$2 bucket console
  shift 2
  [[ -x $minio_bin/minio && -x $minio_bin/mc ]] ||
    { echo "no MinIO in $minio_bin: run scripts/install-go-tools" >&2; return 1; }
  mkdir -p "$dir/data"
  console=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  HOME="$dir" MINIO_ROOT_USER="$minio_access_key" MINIO_ROOT_PASSWORD="$minio_secret_key" MINIO_BROWSER=off \
    MINIO_UPDATE=off "$minio_bin/minio" server --quiet --address "127.0.0.1:$port" \
    --console-address "127.0.0.1:$console" "$dir/data" > "$dir/minio.log" 2>&1 &
  minio_pid=$!
  # MinIO accepts connections before it serves requests (503 XMinioServerNotInitialized): retry the buckets.
  for bucket in "$@"; do
    local tries=0
    until minio_mc "$port" mb --ignore-existing "tp/$bucket" > /dev/null 2>&1; do
      tries=$((tries + 1))
      if [[ $tries -gt 300 ]] || ! kill -0 "$minio_pid" 2>/dev/null; then
        echo "MinIO on port $port did not create the bucket $bucket; its log:" >&2
        tail -n 20 "$dir/minio.log" >&2
        return 1
      fi
      sleep 0.1
    done
  done
}
