#!/usr/bin/env bash
# Cross-builds the quantized-matmul test (tests/test_qdot.c) as a static
# aarch64 binary and runs it under qemu user mode on two emulated CPUs:
#   qemu-aarch64 -cpu max         NEON + dotprod + i8mm: test_qdot checks the
#                                 neon, dotprod and i8mm levels (ms_isa.h)
#   qemu-aarch64 -cpu cortex-a57  plain NEON (ARMv8.0): the neon level alone,
#                                 and no instruction above it may run
# Each level's quantizer and products must equal the scalar twin bit for bit
# (kernels/cpu/arm/ms_k_qdot_neon.c). Fails if the build or either run fails.
# qemu checks results, not speed: nothing here times the ARM kernels.
#
# Installs what it needs when missing (Debian packages gcc-aarch64-linux-gnu,
# libc6-dev-arm64-cross, qemu-user; needs root or sudo then); exits 77
# (skipped) only where they cannot be installed. Builds with exactly the
# sources test_qdot needs (no OpenBLAS: kernels/cpu/ms_k_cpu.c is left out;
# kernels/cpu/x86/*.c compile to empty fill functions on aarch64).
# Each run is bounded by MS_ARM_TIMEOUT seconds (default 600); the two run
# side by side. On a 2-core x86 VM (qemu 7.2): build 5 s, -cpu max 105-111 s,
# -cpu cortex-a57 46 s alone, 72 s beside the other; about 2 minutes in all.
#
#   tools/dev/test-arm.sh [--build-dir DIR]     (default: a temporary folder, removed after)
#   CROSS_CC=aarch64-linux-gnu-gcc QEMU=qemu-aarch64 tools/dev/test-arm.sh
set -euo pipefail
# --help prints the header above; an unknown option is refused (exit 2).
build_dir=""
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --build-dir) [ $# -ge 2 ] || { echo "test-arm.sh: --build-dir needs a folder" >&2; exit 2; }
                 build_dir=$2; shift ;;
    *) echo "test-arm.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

root=$(cd "$(dirname "$0")/../.." && pwd)
timeout_s=${MS_ARM_TIMEOUT:-600}
cc=${CROSS_CC:-aarch64-linux-gnu-gcc}

# ---- the toolchain and qemu -------------------------------------------------------

find_qemu() {
  if [ -n "${QEMU:-}" ]; then command -v "$QEMU" || true; return; fi
  command -v qemu-aarch64 || command -v qemu-aarch64-static || true
}

packages=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# packages missing but their tools present (another install, CROSS_CC / QEMU): fine
if [ ${#missing[@]} -gt 0 ] && command -v "$cc" >/dev/null && [ -n "$(find_qemu)" ] &&
   echo 'int main(void){return 0;}' | "$cc" -static -x c -o /dev/null - 2>/dev/null; then
  missing=()
fi
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then sudo=()
  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo=(sudo -n)
  else
    echo "test-arm.sh: SKIPPED: needs ${missing[*]} and cannot install them (not root, no sudo)" >&2
    exit 77
  fi
  echo "test-arm: installing ${missing[*]}" >&2
  apt_install() { DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}" >&2; }
  # a stale package list is the usual reason an install fails: update once, retry
  if ! apt_install; then
    "${sudo[@]}" apt-get update >&2 || true
    if ! apt_install; then
      echo "test-arm.sh: SKIPPED: apt-get could not install ${missing[*]}" >&2
      exit 77
    fi
  fi
fi
qemu=$(find_qemu)
if ! command -v "$cc" >/dev/null || [ -z "$qemu" ]; then
  # the packages are installed: a CROSS_CC or QEMU that names nothing is a mistake, not a skip
  echo "test-arm.sh: no compiler '$cc' or no qemu '${QEMU:-qemu-aarch64}' (check CROSS_CC / QEMU)" >&2
  exit 2
fi

# ---- build ------------------------------------------------------------------------

if [ -z "$build_dir" ]; then
  build_dir=$(mktemp -d "${TMPDIR:-/tmp}/ms-test-arm.XXXXXX")
  trap 'rm -rf "$build_dir"' EXIT
fi
mkdir -p "$build_dir"
bin=$build_dir/test_qdot

cd "$root"
srcs=(
  tests/test_qdot.c tests/test_fs.c
  common/ms_common.c common/ms_tensor.c
  kernels/cpu/ms_k_qdot.c kernels/cpu/ms_k_qdot_ref.c kernels/cpu/ms_isa.c kernels/cpu/ms_k_quant.c
  kernels/cpu/ms_pool.c kernels/cpu/arm/ms_k_qdot_neon.c
)
for f in kernels/cpu/x86/*.c; do srcs+=("$f"); done
flags=(-std=c11 -O2 -Wall -Wextra -Werror -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE
       -Icommon -Ikernels -Ikernels/cpu -Itests
       "-DMS_SOURCE_DIR=\"$root\"" "-DMS_SHARED_DIR=\"$root/../shared\"" "-DMS_BUILD_DIR=\"$build_dir\"")
echo "test-arm: $("$cc" --version | head -n 1)"
echo "test-arm: $("$qemu" --version | head -n 1)"
echo "test-arm: $cc -static ${flags[*]} -o $bin ${srcs[*]} -lm -lpthread"
t0=$(date +%s)
"$cc" -static "${flags[@]}" -o "$bin" "${srcs[@]}" -lm -lpthread
echo "test-arm: built in $(( $(date +%s) - t0 )) s"

# ---- run: both CPUs side by side, each bounded -------------------------------------

cpus=(max cortex-a57)
declare -A pid rc secs
for c in "${cpus[@]}"; do
  ( s=$(date +%s); r=0
    timeout "$timeout_s" "$qemu" -cpu "$c" "$bin" >"$build_dir/$c.log" 2>&1 || r=$?
    echo "$r $(( $(date +%s) - s ))" >"$build_dir/$c.rc" ) &
  pid[$c]=$!
done
fail=0
for c in "${cpus[@]}"; do
  wait "${pid[$c]}" || true
  read -r "rc[$c]" "secs[$c]" <"$build_dir/$c.rc"
  echo
  echo "test-arm: ---- $qemu -cpu $c $bin ----"
  cat "$build_dir/$c.log"
  if [ "${rc[$c]}" -eq 0 ]; then
    echo "test-arm: -cpu $c: passed in ${secs[$c]} s"
  elif [ "${rc[$c]}" -eq 124 ]; then
    echo "test-arm: -cpu $c: FAILED: still running after ${timeout_s} s (MS_ARM_TIMEOUT)"; fail=1
  else
    echo "test-arm: -cpu $c: FAILED (exit ${rc[$c]}) after ${secs[$c]} s"; fail=1
  fi
done
echo
for c in "${cpus[@]}"; do
  printf 'test-arm: %-10s %s, %s s\n' "$c" "$([ "${rc[$c]}" -eq 0 ] && echo passed || echo FAILED)" "${secs[$c]}"
done
exit $fail
