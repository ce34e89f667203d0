#!/usr/bin/env bash
# The whole test suite: installs what is missing, then
#   1. a gcc build (CUDA compiled whenever nvcc is found) and every test,
#      then the ARM NEON kernel tests cross-built and run under qemu;
#   2. a clang build with AddressSanitizer + UndefinedBehaviorSanitizer and
#      libFuzzer, running every CPU test again plus each fuzz target for a
#      bounded time.
# MS_WERROR=ON (set by CI) turns warnings into errors.
#
# No test is run twice, except the one named below (--retry of
# tools/dev/ctest_account.py), and a test that needed its rerun is printed as
# FLAKY. Every stage is counted; the output ends with the passed, failed and
# skipped counts of each stage and every skipped test with its reason. A skip
# is allowed only for the GPU tests (label cuda) on a machine without a GPU,
# or for tests matched by $MS_ALLOW_SKIP (a regular expression, for a machine
# knowingly without the models or ../shared); any other skip, like any
# failure, makes the run fail.
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
# The one retried test: test_http failed once on a loaded machine and could
# not be reproduced in 24 runs. It gets one rerun, reported as FLAKY.
retry=(--retry test_http)
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
red=0
# stage NAME BUILD_DIR [ENV=VALUE...] — ctest over BUILD_DIR, then its account.
stage() {
  local name=$1 dir=$2 junit=$2/ctest-$1.xml
  shift 2
  rm -f "$junit"
  env "$@" ctest --test-dir "$dir" --output-on-failure -j"$jobs" --output-junit "$junit" || true
  env "$@" python3 tools/dev/ctest_account.py --build "$dir" --junit "$junit" --stage "$name" "${retry[@]}" \
    --summary "$summary" || red=1
}

bash tools/install-deps.sh

echo "== test.sh: release build (gcc, CUDA AUTO) ==" >&2
cmake -S . -B build/test-release -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMS_WERROR="$werror" >/dev/null
cmake --build build/test-release -j"$jobs"
stage release "$root/build/test-release"

# The ARM NEON kernels: an aarch64 cross build of test_qdot under qemu user
# mode, with and without dotprod / i8mm (about 2 minutes; exit 77 where the
# cross compiler or qemu cannot be installed: reported, not failed).
echo "== test.sh: aarch64 kernels under qemu (tools/dev/test-arm.sh) ==" >&2
arm_rc=0
bash tools/dev/test-arm.sh || arm_rc=$?
if [ "$arm_rc" = 77 ]; then
  echo "aarch64 (tools/dev/test-arm.sh): skipped: cross compiler or qemu not installable" >>"$summary"
elif [ "$arm_rc" != 0 ]; then
  echo "aarch64 (tools/dev/test-arm.sh): FAILED (exit $arm_rc)" >>"$summary"
  red=1
else
  echo "aarch64 (tools/dev/test-arm.sh): passed" >>"$summary"
fi

echo "== test.sh: sanitizer + fuzz build (clang, ASan + UBSan) ==" >&2
CC=clang cmake -S . -B build/test-asan -DCMAKE_BUILD_TYPE=Debug -DMS_SANITIZE=ON -DMS_FUZZ=ON -DMS_CUDA=OFF \
  -DMS_WERROR="$werror" >/dev/null
cmake --build build/test-asan -j"$jobs"
# The fuzz targets are built with libFuzzer's own ASan runtime; leak checks on
# for everything. A fuzz crash keeps its input (build/test-asan/tests/fuzz-crashes/).
stage asan "$root/build/test-asan" ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

echo "== test.sh summary ==" >&2
cat "$summary" >&2
if [ "$red" != 0 ]; then
  echo "test.sh: FAILED (see the summary above)" >&2
  exit 1
fi
echo "test.sh: all stages green" >&2
