#!/usr/bin/env bash
# Issue 35 point 8: no process a test starts outlives it, on any exit path.
# Each case starts a node stand-in the way cluster/launch.sh does (nohup in a
# subshell that exits, so it is re-parented to init and is not in the test's
# process tree), then ends the test:
#   A. a lib.sh test killed with its whole process tree (SIGSTOP, SIGKILL: what
#      ctest does on a timeout; lib.sh's own watchdog dies with it) — the
#      stand-in must be gone soon after;
#   B. a lib.sh test that exits 0 with the stand-in still running — it must be
#      killed and the test must fail, naming it;
#   C. tests/proc_guard.sh run around a plain script (bench_reduced's way),
#      the wrapper's tree killed — the stand-in must be gone soon after; and a
#      script that leaves one behind and exits 0 fails.
# "Soon" is a bounded poll (20 s): it answers whether it happened at all.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
: "${MS_BUILD_DIR:?MS_BUILD_DIR must name the build folder}"
guard=$src/tests/proc_guard.sh
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
scratch=$(mktemp -d "${TMPDIR:-/tmp}/ms-proc-guard.XXXXXX")
tree() { local c; echo "$1"; for c in $(ps -o pid= --ppid "$1"); do tree "$c"; done; }
kill_tree() { local ps; ps=$(tree "$1"); kill -STOP $ps 2>/dev/null; kill -KILL $ps 2>/dev/null; }
# Our own cleanup: the cases' trees and the stand-ins, by the pids they wrote (never by name).
cases=()
cleanup() {
  local p f
  for p in "${cases[@]}"; do kill_tree "$p"; done
  for f in "$scratch"/*/orphan; do [ -f "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null; done
  rm -rf "$scratch"
}
trap cleanup EXIT
wait_file() { local i; for i in $(seq 1 200); do [ -e "$1" ] && return 0; sleep 0.1; done; return 1; }
gone() { local i; for i in $(seq 1 200); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done; return 1; }

# The stand-in: re-parented like launch.sh's nodes; its pid in $OUT/orphan.
cat >"$scratch/standin.sh" <<'EOS'
( nohup sleep 300 >/dev/null 2>&1 </dev/null & echo $! >"$OUT/orphan" )
EOS
cat >"$scratch/libtest.sh" <<EOS
source "$src/tests/integration/lib.sh"
it_init guard
source "$scratch/standin.sh"
touch "\$OUT/ready"
[ "\$MODE" = exit ] && it_finish
sleep 300
EOS
cat >"$scratch/plain.sh" <<EOS
source "$scratch/standin.sh"
touch "\$OUT/ready"
[ "\$MODE" = exit ] && exit 0
sleep 300
EOS
run_case() { # run_case NAME MODE CMD... — background; sets $pid, $OUT
  OUT=$scratch/$1
  mkdir -p "$OUT"
  MODE=$2 OUT=$OUT MS_BUILD_DIR=$MS_BUILD_DIR MS_SOURCE_DIR=$src "${@:3}" >"$OUT/log" 2>&1 &
  pid=$!
  cases+=("$pid")
}

# A. lib.sh, tree killed
run_case a kill bash "$scratch/libtest.sh"
if wait_file "$OUT/ready" && [ -s "$OUT/orphan" ]; then
  kill_tree "$pid"
  { wait "$pid"; } 2>/dev/null
  gone "$(cat "$OUT/orphan")" || fail "A: a lib.sh test killed with its tree left its launched process running"
else
  fail "A: the test did not start ($(cat "$OUT/log"))"
fi

# B. lib.sh, exit 0 with the stand-in running
run_case b exit bash "$scratch/libtest.sh"
wait "$pid"
rc=$?
[ "$rc" != 0 ] || fail "B: a lib.sh test that left a process running exited 0"
grep -q "outlived the test" "$OUT/log" || fail "B: no report of the process left running: $(tail -3 "$OUT/log")"
[ -s "$OUT/orphan" ] && gone "$(cat "$OUT/orphan")" || fail "B: the process left running was not killed"

# C. proc_guard.sh run, tree killed; and exit 0 with the stand-in running
run_case c kill bash "$guard" run bash "$scratch/plain.sh"
if wait_file "$OUT/ready" && [ -s "$OUT/orphan" ]; then
  kill_tree "$pid"
  { wait "$pid"; } 2>/dev/null
  gone "$(cat "$OUT/orphan")" || fail "C: proc_guard.sh run, tree killed: the launched process still runs"
else
  fail "C: the guarded script did not start ($(cat "$OUT/log"))"
fi
run_case c2 exit bash "$guard" run bash "$scratch/plain.sh"
wait "$pid"
rc=$?
[ "$rc" = 1 ] && grep -q "outlived the test" "$OUT/log" || fail "C: a guarded script that left a process running: exit $rc, $(tail -2 "$OUT/log")"
[ -s "$OUT/orphan" ] && gone "$(cat "$OUT/orphan")" || fail "C: the process left running was not killed"

[ "$fails" = 0 ] || { echo "test_proc_guard: $fails failure(s)"; exit 1; }
echo "test_proc_guard: ok (A, B, C)"
