#!/usr/bin/env bash
# Builds the reference engine, llama.cpp, outside the repository: from the PyPI
# source distribution llama-cpp-python==0.3.36 (it vendors llama.cpp commit
# 0c1e57098), CPU only, native SIMD. Used for reference outputs and as the
# baseline of every speed claim; none of its code or binaries is committed.
#
#   tools/build-llamacpp.sh            build (idempotent), print the bin folder
#   tools/build-llamacpp.sh --bin      print the bin folder only (built or not)
#   tools/build-llamacpp.sh --isa avx2 [--bin]
#                                      the same, AVX2 + FMA + F16C only (no AVX-512,
#                                      no AMX), in build-avx2/: the fair baseline
#                                      for this engine's MS_ISA=avx2 on a bigger CPU
#   tools/build-llamacpp.sh --isa avxvnni [--bin]
#                                      the same plus AVX-VNNI (-DGGML_AVX_VNNI=ON), in
#                                      build-avxvnni/: the baseline for MS_ISA=avxvnni
#
# Folder: $MS_LLAMACPP_DIR, default ${XDG_CACHE_HOME:-$HOME/.cache}/microspec/llama.cpp-0.3.36.
# Targets: llama-server llama-bench llama-tokenize llama-speculative-simple
# llama-cli. About 9 minutes on 2 cores. Exit 3 when pip cannot fetch the sdist.
set -euo pipefail

version=0.3.36
dir=${MS_LLAMACPP_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/microspec/llama.cpp-$version}
targets=(llama-server llama-bench llama-tokenize llama-speculative-simple llama-cli)

build=build
isa_flags=(-DGGML_NATIVE=ON)
print_bin=false
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --bin) print_bin=true ;;
    --isa)
      case "${2:-}" in
        native) ;;
        avx2)
          build=build-avx2
          isa_flags=(-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF
            -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF) ;;
        avxvnni)
          build=build-avxvnni
          isa_flags=(-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX_VNNI=ON -DGGML_FMA=ON -DGGML_F16C=ON
            -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF) ;;
        *) echo "build-llamacpp: --isa takes native, avx2 or avxvnni, not '${2:-}'" >&2; exit 2 ;;
      esac
      shift ;;
    *) echo "build-llamacpp: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if $print_bin; then echo "$dir/$build/bin"; exit 0; fi

have_all=true
for t in "${targets[@]}"; do [ -x "$dir/$build/bin/$t" ] || have_all=false; done
if $have_all; then
  echo "build-llamacpp: present in $dir/$build/bin" >&2
  echo "$dir/$build/bin"
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
echo "build-llamacpp: configuring in $dir/$build (${isa_flags[*]})" >&2
cmake -S "$dir/src" -B "$dir/$build" -DCMAKE_BUILD_TYPE=Release "${isa_flags[@]}" -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF >"$dir/$build.configure.log" 2>&1 ||
  { tail -30 "$dir/$build.configure.log" >&2; exit 1; }
echo "build-llamacpp: building ${targets[*]} (about 9 minutes on 2 cores; log: $dir/$build.log)" >&2
cmake --build "$dir/$build" -j"$(nproc)" --target "${targets[@]}" >"$dir/$build.log" 2>&1 ||
  { tail -30 "$dir/$build.log" >&2; exit 1; }
echo "build-llamacpp: built in $dir/$build/bin" >&2
echo "$dir/$build/bin"
