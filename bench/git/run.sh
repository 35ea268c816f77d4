#!/usr/bin/env bash
# Benchmark: trainpoint's clone-and-checkout at a SHA vs `git clone -n` + `git checkout`, over
# HTTPS (nginx + fcgiwrap + git http-backend on loopback, a CA made here), cold and with a warm
# mirror cache. Prints the median of RUNS runs of each (runs interleaved).
#
#   bench/git/run.sh [BENCH_BINARY] [RUNS]
#
# BENCH_BINARY: git_checkout_bench built from bench/git (default build/bench/git/git_checkout_bench).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bench="$(realpath "${1:-$here/../../build/bench/git/git_checkout_bench}")"
runs="${2:-5}"
commits="${COMMITS:-2000}"
files="${FILES:-5000}"
root="$(mktemp -d /tmp/trainpoint-git-bench-XXXXXX)"
pids=()
# Servers run in their own sessions, so that their whole process groups can be stopped.
cleanup() { for pid in "${pids[@]}"; do kill -- "-$pid" 2>/dev/null || true; done; rm -rf "$root"; }
trap cleanup EXIT

echo "generating $commits commits x $files files in $root/repos/bench.git" >&2
mkdir -p "$root/repos" "$root/tls" "$root/nginx"
git init -q --bare "$root/repos/bench.git"
python3 "$here/make_repo.py" "$commits" "$files" | git -C "$root/repos/bench.git" fast-import --quiet --done
git -C "$root/repos/bench.git" repack -adfq
git -C "$root/repos/bench.git" symbolic-ref HEAD refs/heads/main
sha="$(git -C "$root/repos/bench.git" rev-parse main~500)"

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

now() { date +%s.%N; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

# Warm the mirror cache once; the warm runs then check out into fresh work directories.
"$bench" "$url" "$sha" "$root/prime" "$root/cache" "$root/tls/ca.crt" >/dev/null
: >"$root/git.txt"; : >"$root/cold.txt"; : >"$root/warm.txt"; : >"$root/files.txt"
for run in $(seq "$runs"); do
  rm -rf "$root/g" "$root/cold" "$root/warm"
  start=$(now)
  GIT_SSL_CAINFO="$root/tls/ca.crt" git clone -q -n "$url" "$root/g"
  files_start=$(now)
  git -C "$root/g" checkout -q "$sha"
  echo "$(now) - $start" | bc >>"$root/git.txt"
  echo "$(now) - $files_start" | bc >>"$root/files.txt"
  start=$(now)
  "$bench" "$url" "$sha" "$root/cold" - "$root/tls/ca.crt" >/dev/null
  echo "$(now) - $start" | bc >>"$root/cold.txt"
  start=$(now)
  "$bench" "$url" "$sha" "$root/warm" "$root/cache" "$root/tls/ca.crt" >/dev/null
  echo "$(now) - $start" | bc >>"$root/warm.txt"
  echo "run $run: git $(tail -1 "$root/git.txt")s, trainpoint cold $(tail -1 "$root/cold.txt")s," \
    "warm cache $(tail -1 "$root/warm.txt")s" >&2
done
# Same tree from both (the .git directories aside).
diff -rq --exclude=.git "$root/g" "$root/cold/checkouts/$sha" >/dev/null
diff -rq --exclude=.git "$root/g" "$root/warm/checkouts/$sha" >/dev/null
# Warm cache and the checkout already in the work directory (a restarted container on the same volume).
start=$(now)
"$bench" "$url" "$sha" "$root/warm" "$root/cache" "$root/tls/ca.crt" >/dev/null
reuse=$(echo "$(now) - $start" | bc)

git_median=$(median <"$root/git.txt")
cold_median=$(median <"$root/cold.txt")
warm_median=$(median <"$root/warm.txt")
files_median=$(median <"$root/files.txt")
echo "repository: $commits commits, $files files, checkout of main~500 over https (nginx + git http-backend)"
echo "git clone -n + git checkout:            median ${git_median}s (of which git checkout ${files_median}s)"
echo "trainpoint cold (no cache):             median ${cold_median}s"
echo "trainpoint warm mirror cache:           median ${warm_median}s (cold/warm $(echo "scale=1; $cold_median / $warm_median" | bc)x)"
echo "trainpoint warm, checkout already there: ${reuse}s"
