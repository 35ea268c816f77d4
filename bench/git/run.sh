#!/usr/bin/env bash
# Benchmark: trainpoint's clone-and-checkout at a SHA vs `git clone -n` + `git checkout`, over
# HTTPS (nginx + fcgiwrap + git http-backend on loopback, a CA made here), cold and with a warm
# mirror cache. Each run times the fetch and the checkout apart, wall and CPU (user + system, children
# included), the tools alternating; prints the medians as a Markdown table, with the load average at the
# start and the end. The checkouts go to a fresh ext4 file system (a loop-mounted image, as root) and every
# run writes into new directories: ext4 creates files 5-20x slower for a while after a mass delete
# (docs/benchmarks.md), which the benchmark would otherwise measure as much as the tools.
#
#   bench/git/run.sh [BENCH_BINARY] [RUNS]
#
# BENCH_BINARY: git_checkout_bench built from bench/git (default build/bench/git/git_checkout_bench).
# WORK_DIR=DIR puts the work directories (the checkouts) there instead, e.g. on a tmpfs.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bench="$(realpath "${1:-$here/../../build/bench/git/git_checkout_bench}")"
runs="${2:-5}"
commits="${COMMITS:-2000}"
files="${FILES:-5000}"
root="$(mktemp -d /tmp/trainpoint-git-bench-XXXXXX)"
pids=()
# Servers run in their own sessions, so that their whole process groups can be stopped.
cleanup() {
  for pid in "${pids[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
  rm -rf "${work:-}"
  if mountpoint -q "$root/fs"; then umount "$root/fs"; fi
  rm -rf "$root"
}
trap cleanup EXIT

echo "generating $commits commits x $files files in $root/repos/bench.git" >&2
mkdir -p "$root/repos" "$root/tls" "$root/nginx"
git init -q --bare "$root/repos/bench.git"
python3 "$here/make_repo.py" "$commits" "$files" | git -C "$root/repos/bench.git" fast-import --quiet --done
git -C "$root/repos/bench.git" repack -adfq
git -C "$root/repos/bench.git" symbolic-ref HEAD refs/heads/main
sha="$(git -C "$root/repos/bench.git" rev-parse main~500)"
# The same tree as a tar in memory: `tar -x` of it writes the files and nothing else, the floor of any checkout
# on this file system.
git -C "$root/repos/bench.git" archive "$sha" >"$root/tree.tar"

cd "$root/tls"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=bench CA" -keyout ca.key -out ca.crt 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout server.key -out server.csr 2>/dev/null
printf 'subjectAltName=DNS:127.0.0.1,IP:127.0.0.1\n' >san.ext
openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 -extfile san.ext \
  -out server.crt 2>/dev/null

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
setsid fcgiwrap -c 4 -s "unix:$root/fcgiwrap.sock" </dev/null >/dev/null 2>&1 & pids+=($!)
cat >"$root/nginx/nginx.conf" <<CONF
daemon off; user root; worker_processes 2; pid $root/nginx/nginx.pid; error_log $root/nginx/error.log;
events { worker_connections 128; }
http {
  access_log off; client_max_body_size 0;
  client_body_temp_path $root/nginx/body; fastcgi_temp_path $root/nginx/fastcgi; proxy_temp_path $root/nginx/proxy;
  uwsgi_temp_path $root/nginx/uwsgi; scgi_temp_path $root/nginx/scgi;
  server {
    listen 127.0.0.1:$port ssl;
    ssl_certificate $root/tls/server.crt; ssl_certificate_key $root/tls/server.key;
    location ~ ^/git(/.*)\$ {
      include /etc/nginx/fastcgi_params;
      fastcgi_pass unix:$root/fcgiwrap.sock;
      fastcgi_param SCRIPT_FILENAME /usr/lib/git-core/git-http-backend;
      fastcgi_param GIT_PROJECT_ROOT $root/repos;
      fastcgi_param GIT_HTTP_EXPORT_ALL "";
      fastcgi_param PATH_INFO \$1;
    }
  }
}
CONF
for _ in $(seq 100); do [ -S "$root/fcgiwrap.sock" ] && break; sleep 0.05; done
setsid nginx -c "$root/nginx/nginx.conf" </dev/null >/dev/null 2>&1 & pids+=($!)
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
url="https://127.0.0.1:$port/git/bench.git"

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
# timed FILE COMMAND...: runs COMMAND, appends "WALL CPU" to FILE.
timed() {
  local file=$1; shift
  /usr/bin/time -f "%e %U %S" -o "$root/time.txt" "$@" >/dev/null
  awk '{printf "%s %.3f\n", $1, $2 + $3}' "$root/time.txt" >>"$file"
}
column() { awk -v c="$1" '{print $c}' "$2" | median; }
if [ -n "${WORK_DIR:-}" ]; then
  work="$WORK_DIR/work-$$"
else
  truncate -s 4G "$root/fs.img"
  mkfs.ext4 -q -F "$root/fs.img"
  mkdir -p "$root/fs"
  mount -o loop "$root/fs.img" "$root/fs"
  work="$root/fs/work"
fi
mkdir -p "$work"

# Warm the mirror cache once; the warm runs then check out into fresh work directories.
"$bench" "$url" "$sha" "$work/prime" "$root/cache" "$root/tls/ca.crt" >/dev/null
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
for run in $(seq "$runs"); do
  timed "$root/git-fetch.txt" env GIT_SSL_CAINFO="$root/tls/ca.crt" git clone -q -n "$url" "$work/g$run"
  timed "$root/git-checkout.txt" git -C "$work/g$run" checkout -q "$sha"
  mkdir -p "$work/t$run"
  timed "$root/tar.txt" tar -xf "$root/tree.tar" -C "$work/t$run"
  "$bench" "$url" "$sha" "$work/cold$run" - "$root/tls/ca.crt" | cut -d' ' -f2- >>"$root/cold.txt"
  "$bench" "$url" "$sha" "$work/warm$run" "$root/cache" "$root/tls/ca.crt" | cut -d' ' -f2- >>"$root/warm.txt"
  echo "run $run: git $(tail -1 "$root/git-fetch.txt") + $(tail -1 "$root/git-checkout.txt")," \
    "trainpoint cold $(tail -1 "$root/cold.txt"), warm $(tail -1 "$root/warm.txt")" >&2
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
# Same tree from all three (the .git directories aside).
diff -rq --exclude=.git "$work/g1" "$work/cold1/checkouts/$sha" >/dev/null
diff -rq --exclude=.git "$work/g1" "$work/warm1/checkouts/$sha" >/dev/null
# Warm cache and the checkout already in the work directory (a restarted container on the same volume).
reuse=$("$bench" "$url" "$sha" "$work/warm1" "$root/cache" "$root/tls/ca.crt" | awk '{printf "%.3f", $2 + $4}')

git_fetch=$(column 1 "$root/git-fetch.txt"); git_fetch_cpu=$(column 2 "$root/git-fetch.txt")
git_checkout=$(column 1 "$root/git-checkout.txt"); git_checkout_cpu=$(column 2 "$root/git-checkout.txt")
git_total=$(paste -d' ' "$root/git-fetch.txt" "$root/git-checkout.txt" | awk '{print $1 + $3}' | median)
cold_total=$(awk '{print $1 + $3}' "$root/cold.txt" | median)
warm_total=$(awk '{print $1 + $3}' "$root/warm.txt" | median)
echo "repository: $commits commits, $files files, checkout of main~500 over https (nginx + git http-backend);" \
  "work directories in $(df --output=fstype "$work" | tail -1); medians of $runs runs; load average $load_start at the start, $load_end at the end"
echo
echo "| | fetch: wall s | fetch: CPU s | checkout: wall s | checkout: CPU s | total: wall s |"
echo "|---|---:|---:|---:|---:|---:|"
echo "| git clone -n + git checkout | $git_fetch | $git_fetch_cpu | $git_checkout | $git_checkout_cpu | $git_total |"
for kind in cold warm; do
  printf '| trainpoint %s | %s | %s | %s | %s | %s |\n' "$([ $kind = cold ] && echo "cold (no cache)" || echo "warm mirror, new work directory")" \
    "$(column 1 "$root/$kind.txt")" "$(column 2 "$root/$kind.txt")" "$(column 3 "$root/$kind.txt")" \
    "$(column 4 "$root/$kind.txt")" "$([ $kind = cold ] && echo "$cold_total" || echo "$warm_total")"
done
tar_wall=$(column 1 "$root/tar.txt")
echo "| tar -x of the same tree, one thread (its files written, nothing else) | | | $tar_wall | $(column 2 "$root/tar.txt") | $tar_wall |"
echo
echo "git CLI / trainpoint cold: $(echo "scale=2; $git_total / $cold_total" | bc)x; cold / warm: $(echo "scale=1; $cold_total / $warm_total" | bc)x;" \
  "warm cache with the checkout already there: ${reuse}s"
warm_fetch=$(column 1 "$root/warm.txt")
echo "cold / (warm fetch + tar -x): $(echo "scale=1; $cold_total / ($warm_fetch + $tar_wall)" | bc)x (a warm run that wrote its" \
  "files as fast as one tar thread)"
