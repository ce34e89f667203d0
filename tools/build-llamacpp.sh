#!/usr/bin/env bash
# Builds the reference engine, llama.cpp, outside the repository: from the PyPI
# source distribution llama-cpp-python==0.3.36 (it vendors llama.cpp commit
# 0c1e57098), CPU only, native SIMD. Used for reference outputs and as the
# baseline of every speed claim; none of its code or binaries is committed.
#
#   tools/build-llamacpp.sh            build (idempotent), print the bin folder
#   tools/build-llamacpp.sh --bin      print the bin folder only (built or not)
#
# Folder: $MS_LLAMACPP_DIR, default ${XDG_CACHE_HOME:-$HOME/.cache}/microspec/llama.cpp-0.3.36.
# Targets: llama-server llama-bench llama-tokenize llama-speculative-simple
# llama-cli. About 9 minutes on 2 cores. Exit 3 when pip cannot fetch the sdist.
set -euo pipefail

version=0.3.36
dir=${MS_LLAMACPP_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/microspec/llama.cpp-$version}
targets=(llama-server llama-bench llama-tokenize llama-speculative-simple llama-cli)

case "${1:-}" in
  -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  --bin) echo "$dir/build/bin"; exit 0 ;;
  "") ;;
  *) echo "build-llamacpp: unknown option $1 (see --help)" >&2; exit 2 ;;
esac

have_all=true
for t in "${targets[@]}"; do [ -x "$dir/build/bin/$t" ] || have_all=false; done
if $have_all; then
  echo "build-llamacpp: present in $dir/build/bin" >&2
  echo "$dir/build/bin"
  exit 0
fi

mkdir -p "$dir"
if [ ! -f "$dir/src/CMakeLists.txt" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  echo "build-llamacpp: fetching llama-cpp-python==$version (source distribution) with pip" >&2
  if ! pip download --no-deps --no-binary=:all: --disable-pip-version-check -q -d "$tmp" \
    "llama-cpp-python==$version" >&2; then
    echo "build-llamacpp: pip could not fetch llama-cpp-python==$version" >&2
    exit 3
  fi
  tar xzf "$tmp"/llama_cpp_python-$version.tar.gz -C "$tmp"
  rm -rf "$dir/src"
  mv "$tmp/llama_cpp_python-$version/vendor/llama.cpp" "$dir/src"
fi
echo "build-llamacpp: configuring in $dir/build" >&2
cmake -S "$dir/src" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF >"$dir/configure.log" 2>&1 ||
  { tail -30 "$dir/configure.log" >&2; exit 1; }
echo "build-llamacpp: building ${targets[*]} (about 9 minutes on 2 cores; log: $dir/build.log)" >&2
cmake --build "$dir/build" -j"$(nproc)" --target "${targets[@]}" >"$dir/build.log" 2>&1 ||
  { tail -30 "$dir/build.log" >&2; exit 1; }
echo "build-llamacpp: built in $dir/build/bin" >&2
echo "$dir/build/bin"
