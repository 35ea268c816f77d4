#!/usr/bin/env bash
# The Dockerfile's source builds (the *-source stages) compile from only the files they COPY into /src:
# configures those files alone, with the stage's own cmake options, and checks that every source stage
# copies the same sources (a script a stage runs, under scripts/, may differ). Usage:
# source_build_configures.sh SOURCE_DIR
set -euo pipefail
source_dir="$1"
dockerfile="$source_dir/Dockerfile"
work="$(mktemp -d /tmp/trainpoint-dockerfile-sources.XXXXXX)"
trap 'rm -rf "$work"' EXIT

# Each source stage's "COPY SRC /src/..." lines of sources, one list per stage.
awk '/^FROM .* AS .*-source$/ {stage = $NF} /^FROM / && !/-source$/ {stage = ""}
     stage != "" && /^COPY / && $3 ~ /^\/src/ && $2 !~ /^scripts\// {print stage, $2}' "$dockerfile" > "$work/copies"
stages=$(awk '{print $1}' "$work/copies" | sort -u)
[ -n "$stages" ] || { echo "FAIL: no source stage copies anything into /src in $dockerfile" >&2; exit 1; }
first=$(echo "$stages" | head -1)
for stage in $stages; do
  if ! diff <(awk -v s="$first" '$1 == s {print $2}' "$work/copies") \
            <(awk -v s="$stage" '$1 == s {print $2}' "$work/copies") >/dev/null; then
    echo "FAIL: the source stages $first and $stage copy different files into /src" >&2
    exit 1
  fi
done

mkdir -p "$work/src"
for path in $(awk -v s="$first" '$1 == s {print $2}' "$work/copies"); do
  cp -r "$source_dir/$path" "$work/src/$path"
done
# The -D options of the stage's configure step (continuation lines joined), without those computed by
# the shell in the image (CMAKE_PREFIX_PATH from the PyTorch wheel).
options=$(awk -v s="$first" '/^FROM .* AS / {in_stage = ($NF == s)} in_stage' "$dockerfile" |
          sed -e ':a' -e '/\\$/N; s/\\\n//; ta' | grep -m1 '^RUN cmake -S /src' |
          grep -o -- '-D[A-Z_]*=[^ $"]*' || true)
echo "configuring the $first stage's sources ($(awk -v s="$first" '$1 == s {printf "%s ", $2}' "$work/copies"))" \
     "with:" $options
# shellcheck disable=SC2086
if ! cmake -S "$work/src" -B "$work/build" $options > "$work/configure.log" 2>&1; then
  cat "$work/configure.log" >&2
  echo "FAIL: the Dockerfile's $first stage does not configure from the files it copies" >&2
  exit 1
fi
echo "PASS"
