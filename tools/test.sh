#!/usr/bin/env bash
# The whole test suite: installs what is missing, then
#   1. a gcc build (CUDA compiled whenever nvcc is found) and every test,
#      then the ARM NEON kernel tests cross-built and run under qemu;
#   2. a clang build with AddressSanitizer + UndefinedBehaviorSanitizer and
#      libFuzzer, running every CPU test again plus each fuzz target for a
#      bounded time.
# MS_WERROR=ON (set by CI) turns warnings into errors.
#
#   tools/test.sh                (no arguments)
set -euo pipefail
# --help prints the header above; an unknown option is refused (exit 2).
for a in "$@"; do
  case $a in
    -h|--help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "test.sh: unknown option $a (see --help)" >&2; exit 2 ;;
  esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
werror=${MS_WERROR:-OFF}
jobs=$(nproc)

bash tools/install-deps.sh

echo "== test.sh: release build (gcc, CUDA AUTO) ==" >&2
cmake -S . -B build/test-release -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMS_WERROR="$werror" >/dev/null
cmake --build build/test-release -j"$jobs"
# A test that fails is run once more before it counts (--repeat until-pass:2):
# one unexplained failure of test_http was seen on a loaded machine and could
# not be reproduced in 24 runs; a real fault still fails both times.
ctest --test-dir build/test-release --output-on-failure -j"$jobs" --repeat until-pass:2

# The ARM NEON kernels: an aarch64 cross build of test_qdot under qemu user
# mode, with and without dotprod / i8mm (about 2 minutes; exit 77 where the
# cross compiler or qemu cannot be installed: reported, not failed).
echo "== test.sh: aarch64 kernels under qemu (tools/test-arm.sh) ==" >&2
arm_rc=0
bash tools/test-arm.sh || arm_rc=$?
if [ "$arm_rc" = 77 ]; then
  echo "test.sh: SKIPPED the aarch64 kernel tests (cross compiler or qemu not installable)" >&2
elif [ "$arm_rc" != 0 ]; then
  echo "test.sh: the aarch64 kernel tests FAILED (exit $arm_rc)" >&2
  exit 1
fi

echo "== test.sh: sanitizer + fuzz build (clang, ASan + UBSan) ==" >&2
CC=clang cmake -S . -B build/test-asan -DCMAKE_BUILD_TYPE=Debug -DMS_SANITIZE=ON -DMS_FUZZ=ON -DMS_CUDA=OFF \
  -DMS_WERROR="$werror" >/dev/null
cmake --build build/test-asan -j"$jobs"
# The fuzz targets are built with libFuzzer's own ASan runtime; leak checks on
# for everything.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build/test-asan --output-on-failure -j"$jobs" --repeat until-pass:2
