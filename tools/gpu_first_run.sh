#!/usr/bin/env bash
# gpu_first_run.sh — everything a lent GPU machine should do in one call, from
# the pack tools/dev/gpu_pack.sh made (.gpu/, carried by the run tool):
#
#   1. model-weights inventory (Hugging Face caches, models--* folders, every
#      *.safetensors / *.gguf / *.bin (and *.pt *.pth *.ckpt *.onnx) over 1 MiB
#      on the local file systems)                           → weights.txt
#   2. the GPU, driver and CUDA versions                    → env.txt
#   3. every packed `cuda` test, from the repo root, with a time limit:
#      PASSED / FAILED / SKIPPED (exit 77) / TIMEOUT        → tests.tsv
#   4. microspec-gpu-bench --out $OUT/gpu_bench             → gpu_bench.json/.csv
#   5. stories260K converted on the fly, greedy: AR on cpu (against the llama2.c
#      golden file), AR on cuda, speculative (layerskip) on cuda in each
#      vocabulary mode; outputs compared, tokens/s           → e2e.txt
#   6. a summary table, printed LAST                         → summary.txt
#   (optional step `sanitize`, not in the default GPU_STEPS: every packed test
#   under compute-sanitizer, tools from GPU_SANITIZE (default "memcheck
#   racecheck synccheck initcheck"); an error report or a changed exit code is
#   FAILED; its log goes to logs.txt               → sanitize.tsv)
# All logs go to one file, logs.txt: 8 files in $OUT, none in folders.
#
#   bash tools/gpu_first_run.sh                (OUT defaults to /tmp/gpu-out)
#
# Without a GPU (e.g. on the dev machine) it still runs: the tests report
# SKIPPED, the bench exits 2 (reported SKIPPED), the cuda end-to-end rows are
# SKIPPED; SKIPPED is never counted as passed.
#
# Environment (all optional):
#   GPU_STEPS      steps to run, default "inventory env tests bench e2e"
#   GPU_ONLY       run only these tests (space or comma separated names)
#   GPU_BUDGET_S   whole-run time budget in seconds (default 540; the run
#                  tool kills a command at 600)
#   GPU_BENCH_REPS microspec-gpu-bench --reps (default 5)
#   GPU_TEST_CAP_S upper limit per test in seconds (default: its ctest TIMEOUT)
#   GPU_SANITIZE   compute-sanitizer tools for the sanitize step
#
# If .gpu/ is absent it tries to build from source with the image's cmake —
# which fails at configure there, as the image lacks our Debian libraries; it
# says so, and still does the inventory and the environment.
set -u
# --help prints the header above; an unknown option is refused (exit 2).
for a in "$@"; do
  case $a in
    -h|--help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu_first_run.sh: unknown option $a (see --help)" >&2; exit 2 ;;
  esac
done
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT" || exit 1
OUT=$(cd "$OUT" && pwd)
T0=$(date +%s)
BUDGET=${GPU_BUDGET_S:-540}
STEPS=" ${GPU_STEPS:-inventory env tests bench e2e} "
ONLY=" $(echo "${GPU_ONLY:-}" | tr ',' ' ') "
PACK=$root/.gpu
work=$(mktemp -d "${TMPDIR:-/tmp}/ms-gpu.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/tmp" "$work/lib"
LOGS=$OUT/logs.txt
SUM=$work/summary.rows
: >"$LOGS"
: >"$SUM"

elapsed() { echo $(($(date +%s) - T0)); }
left() { echo $((BUDGET - $(elapsed))); }
step() { case $STEPS in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
banner() { printf '\n===== %s (t=%ss) =====\n' "$1" "$(elapsed)" | tee -a "$LOGS"; }
# row SECTION ITEM STATUS DETAIL — one line of the final table
row() { printf '%-9s %-32s %-8s %s\n' "$1" "$2" "$3" "$4" >>"$SUM"; }
# addlog TITLE FILE — append FILE to logs.txt, at most ~1 MiB of it
addlog() {
  printf '\n----- %s -----\n' "$1" >>"$LOGS"
  local n
  n=$(stat -c %s "$2" 2>/dev/null || echo 0)
  if [ "$n" -gt 1048576 ]; then
    head -c 204800 "$2" >>"$LOGS"
    printf '\n[... %s bytes cut ...]\n' $((n - 1048576)) >>"$LOGS"
    tail -c 843776 "$2" >>"$LOGS"
  else
    cat "$2" >>"$LOGS" 2>/dev/null
  fi
}
lastline() { grep -v '^[[:space:]]*$' "$1" 2>/dev/null | tail -n 1 | cut -c1-70; }
status_of() { # exit code → status word
  case $1 in 0) echo PASSED ;; 77) echo SKIPPED ;; 124 | 137) echo TIMEOUT ;; *) echo "FAILED" ;; esac
}

# --- 1. model-weights inventory ------------------------------------------------
inventory() {
  banner "1. model-weights inventory"
  local f=$OUT/weights.txt mounts=() m t
  # Local file systems: every mount but pseudo, memory and network ones.
  while read -r _ m t _; do
    m=$(printf '%b' "$m")
    case $t in
      proc | sysfs | devtmpfs | devpts | cgroup | cgroup2 | securityfs | debugfs | tracefs | mqueue | hugetlbfs | pstore | \
        bpf | configfs | fusectl | binfmt_misc | autofs | nsfs | rpc_pipefs | nfs | nfs4 | cifs | smb3 | fuse.sshfs | efivarfs) continue ;;
    esac
    case $t in tmpfs | ramfs) [ "$m" = /tmp ] || continue ;; esac # memory: nothing persists there
    case $m in /proc | /proc/* | /sys | /sys/* | /dev | /dev/* | /run | /run/*) continue ;; esac
    mounts+=("$m")
  done </proc/mounts 2>/dev/null
  [ ${#mounts[@]} -gt 0 ] || mounts=(/)
  local t0 rc
  t0=$(date +%s)
  timeout -k 5 150 find "${mounts[@]}" -xdev \
    \( -path /proc -o -path /sys -o -path /dev -o -path "$root" -o -path "$work" -o -path "$OUT" \) -prune -o \
    \( -type d -name 'models--*' -printf 'D\t%p\n' \) -o \
    \( -type f \( -name '*.safetensors' -o -name '*.gguf' -o -name '*.bin' -o -name '*.pt' -o -name '*.pth' \
    -o -name '*.ckpt' -o -name '*.onnx' \) -size +1024k -printf 'F\t%s\t%p\n' \) 2>/dev/null | sort -u >"$work/found"
  rc=${PIPESTATUS[0]}
  {
    echo "# model-weights inventory: $(date -u +%Y-%m-%dT%H:%M:%SZ), host $(hostname 2>/dev/null)"
    echo "# searched (find -xdev, skipping /proc /sys /dev and the repo): ${mounts[*]}"
    [ "$rc" = 124 ] || [ "$rc" = 137 ] && echo "# WARNING: the search hit its 150 s limit: the list is INCOMPLETE"
    echo "## Hugging Face cache folders (bytes, path)"
    local d
    for d in "${HF_HOME:-}" "${HF_HUB_CACHE:-}" "${TRANSFORMERS_CACHE:-}" "${HOME:-/root}/.cache/huggingface" \
      /root/.cache/huggingface; do
      if [ -n "$d" ] && [ -d "$d" ]; then
        printf '%s\t%s\n' "$(timeout 30 du -sb "$d" 2>/dev/null | cut -f1)" "$(readlink -f "$d")"
      fi
    done | sort -u -k2
    echo "## models--* folders (bytes, path), then their snapshot files over 1 MiB (bytes, path)"
    grep '^D' "$work/found" | cut -f2 | while read -r d; do
      printf '%s\t%s\n' "$(timeout 30 du -sbL "$d" 2>/dev/null | cut -f1)" "$d"
      [ -d "$d/snapshots" ] && timeout 30 find -L "$d/snapshots" -type f -size +1024k -printf '  %s\t%p\n' 2>/dev/null
    done
    echo "## weight files over 1 MiB (bytes, MiB, path)"
    grep '^F' "$work/found" | awk -F'\t' '{printf "%s\t%.1f\t%s\n", $2, $2/1048576, $3}'
    echo "## total: $(grep -c '^F' "$work/found") files, $(grep '^F' "$work/found" | awk -F'\t' '{s+=$2} END{printf "%.1f MiB", s/1048576}'),"\
      "$(grep -c '^D' "$work/found") models--* folders; search took $(($(date +%s) - t0)) s"
  } >"$f"
  cat "$f"
  WEIGHTS_ROW="$(grep -c '^F' "$work/found") files ($(grep '^F' "$work/found" | awk -F'\t' '{s+=$2} END{printf "%.1f MiB", s/1048576}')), $(grep -c '^D' "$work/found") models--* dirs"
  { [ "$rc" = 124 ] || [ "$rc" = 137 ]; } && WEIGHTS_ROW="$WEIGHTS_ROW, INCOMPLETE (timeout)"
  row inventory weights.txt DONE "$WEIGHTS_ROW"
}

# --- 2. environment -----------------------------------------------------------------
HAVE_GPU=0
environment() {
  banner "2. GPU, driver, CUDA"
  {
    echo "## nvidia-smi -L"
    nvidia-smi -L 2>&1 || echo "(nvidia-smi failed or absent)"
    echo "## name, driver, memory, compute capability"
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>&1 || true
    echo "## driver's CUDA version"
    nvidia-smi 2>/dev/null | grep -o 'CUDA Version: [0-9.]*' || echo "(unknown)"
    echo "## nvcc"
    { command -v nvcc >/dev/null && nvcc --version; } || /usr/local/cuda/bin/nvcc --version 2>&1 || echo "(no nvcc)"
    echo "## CUDA libraries in /usr/local/cuda/lib64"
    for l in /usr/local/cuda/lib64/lib{cudart,cublas,cublasLt,nccl}.so*; do [ -e "$l" ] && echo "$l"; done
    echo "## system"
    uname -a
    (. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")
    ldd --version 2>&1 | head -n1
    echo "cpus: $(nproc)"
    free -g 2>/dev/null | head -n2
    [ -f "$PACK/MANIFEST" ] && { echo "## pack"; head -n 9 "$PACK/MANIFEST"; }
  } >"$OUT/env.txt" 2>&1
  cat "$OUT/env.txt"
  if nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then HAVE_GPU=1; fi
  local g
  g=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n1)
  row env gpu "$([ $HAVE_GPU = 1 ] && echo FOUND || echo NONE)" \
    "${g:-no GPU}; $(nvidia-smi 2>/dev/null | grep -o 'CUDA Version: [0-9.]*' || echo 'no driver')"
}

# --- 0. binaries: the pack, or a build from source -----------------------------------
BIN=
TESTS_TSV=
BUILD_OK=0
setup_pack() {
  banner "0. pack"
  BIN=$PACK/bin
  TESTS_TSV=$PACK/tests.tsv
  chmod +x "$BIN"/* 2>/dev/null # in case the copy lost the modes
  local z lib
  for z in "$PACK"/lib/*.xz; do
    [ -e "$z" ] || continue
    lib=$work/lib/$(basename "$z" .xz)
    if command -v xz >/dev/null; then
      xz -dc "$z" >"$lib"
    else
      python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$z" "$lib"
    fi || { echo "cannot unpack $z"; row pack unpack FAILED "$(basename "$z")"; }
  done
  export LD_LIBRARY_PATH="$PACK/lib:$work/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # Libraries the image should have (CUDA) but has elsewhere: look for them.
  local missing name d added=""
  for _ in 1 2; do
    missing=$(for b in "$BIN"/*; do ldd "$b" 2>/dev/null | awk '/not found/ {print $1}'; done | sort -u)
    [ -n "$missing" ] || break
    for name in $missing; do
      d=$(timeout 60 find /usr/local /usr/lib /usr/lib64 /opt -name "$name" \( -type f -o -type l \) 2>/dev/null | head -n1)
      [ -n "$d" ] && { LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$(dirname "$d")"; added="$added $(dirname "$d")"; }
    done
  done
  export LD_LIBRARY_PATH
  local verr
  verr=$(for b in "$BIN"/*; do ldd "$b" 2>&1 | grep -E 'not found|version .* not found' | sed "s|^|$(basename "$b"): |"; done | sort -u)
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  ldd "$BIN/microspec-generate" 2>&1 | sed 's/^/  /'
  if [ -n "$verr" ]; then
    echo "UNRESOLVED:"; echo "$verr"
    row pack libraries FAILED "$(echo "$verr" | awk '{print $2}' | sort -u | tr '\n' ' ' | cut -c1-60)"
  else
    row pack libraries OK "all resolved${added:+; added$added}"
  fi
  # The tests spawn MS_BUILD_DIR/tools/microspec-mkmodel (an absolute path of
  # the dev machine): give that path to the packed tools where it is absent.
  local bd t made=0
  bd=$(cat "$PACK/BUILD_DIR" 2>/dev/null)
  if [ -n "$bd" ]; then
    for t in microspec-mkmodel microspec-mkeagle convert-llama2c; do
      [ -x "$bd/tools/$t" ] && continue
      mkdir -p "$bd/tools" 2>/dev/null && ln -sf "$BIN/$t" "$bd/tools/$t" && made=$((made + 1))
    done
    if [ -x "$bd/tools/microspec-mkmodel" ]; then
      row pack build-dir OK "$bd/tools ($([ $made -gt 0 ] && echo "linked $made tools to .gpu/bin" || echo present))"
    else
      row pack build-dir FAILED "cannot create $bd/tools: test_cuda_model/spec will fail"
    fi
  fi
  BUILD_OK=1
}

setup_source() {
  banner "0. FALLBACK: .gpu/ is absent — building from source"
  local msg="no .gpu/ pack: run tools/dev/gpu_pack.sh on the dev machine and carry .gpu. Building from source instead, \
which needs libzmq, msgpack, libconfig, jansson, pcre2, utf8proc, openblas and microhttpd: this GPU image has none \
of them, so the configure step is EXPECTED TO FAIL here."
  echo "$msg"
  local b=$work/build gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  if ! command -v cmake >/dev/null; then
    row build configure FAILED "no cmake"
    return
  fi
  if ! cmake -S "$root" -B "$b" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DMS_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DMS_SHARED_DIR:STRING=.gpu/shared >"$work/configure.log" 2>&1; then
    grep -E 'not found|No package|Could NOT|Error' "$work/configure.log" | head -n 12
    addlog "fallback configure" "$work/configure.log"
    row build configure FAILED "missing Debian libraries (expected: pack with tools/dev/gpu_pack.sh)"
    return
  fi
  if ! cmake --build "$b" -j"$(nproc)" >"$work/build.log" 2>&1; then
    tail -n 20 "$work/build.log"
    addlog "fallback build" "$work/build.log"
    row build compile FAILED "see logs.txt"
    return
  fi
  row build source OK "built in $work/build"
  mkdir -p "$work/bin"
  BIN=$work/bin
  TESTS_TSV=$work/tests.tsv
  (cd "$b" && ctest -N -L cuda --show-only=json-v1) | python3 -c '
import json, sys
for t in json.load(sys.stdin)["tests"]:
    cmd = t.get("command") or ["-"]
    props = {p["name"]: p["value"] for p in t.get("properties", [])}
    print("\t".join([t["name"], cmd[0], str(int(float(props.get("TIMEOUT", 300)))), " ".join(cmd[1:])]))
' >"$work/tests.raw"
  while IFS=$'\t' read -r n e to a; do
    ln -sf "$e" "$BIN/$(basename "$e")"
    printf '%s\t%s\t%s\t%s\n' "$n" "$(basename "$e")" "$to" "$a"
  done <"$work/tests.raw" >"$TESTS_TSV"
  local t
  for t in microspec-gpu-bench microspec-generate convert-llama2c microspec-freqlist microspec-mkmodel microspec-mkeagle; do
    [ -x "$b/tools/$t" ] && ln -sf "$b/tools/$t" "$BIN/$t"
  done
  BUILD_OK=1
}

# --- 3. tests ------------------------------------------------------------------------------
N_PASS=0 N_FAIL=0 N_SKIP=0
run_tests() {
  banner "3. cuda tests (from the repo root, LD_LIBRARY_PATH as above)"
  printf 'test\tstatus\texit\tseconds\tlast line\n' >"$OUT/tests.tsv"
  local name exe to args cap t0 rc st dt reserve=180
  while IFS=$'\t' read -r name exe to args; do
    [ -n "$name" ] || continue
    if [ "$ONLY" != "  " ] && [[ $ONLY != *" $name "* ]]; then continue; fi
    cap=$to
    [ -n "${GPU_TEST_CAP_S:-}" ] && [ "$GPU_TEST_CAP_S" -lt "$cap" ] && cap=$GPU_TEST_CAP_S
    step bench || step e2e || reserve=20
    [ $(($(left) - reserve)) -lt "$cap" ] && cap=$(($(left) - reserve))
    if [ "$cap" -lt 15 ]; then
      row test "$name" "NOT RUN" "time budget spent (GPU_ONLY=$name to run it alone)"
      printf '%s\tNOT RUN\t-\t0\ttime budget\n' "$name" >>"$OUT/tests.tsv"
      N_FAIL=$((N_FAIL + 1))
      continue
    fi
    t0=$(date +%s)
    # shellcheck disable=SC2086 # args are ctest's, split on spaces
    TMPDIR=$work/tmp timeout -k 10 "$cap" "$BIN/$exe" $args >"$work/test.log" 2>&1 </dev/null
    rc=$?
    dt=$(($(date +%s) - t0))
    st=$(status_of $rc)
    case $st in PASSED) N_PASS=$((N_PASS + 1)) ;; SKIPPED) N_SKIP=$((N_SKIP + 1)) ;; *) N_FAIL=$((N_FAIL + 1)) ;; esac
    printf '%-22s %-8s exit %-3s %4ss  %s\n' "$name" "$st" "$rc" "$dt" "$(lastline "$work/test.log")"
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$st" "$rc" "$dt" "$(lastline "$work/test.log")" >>"$OUT/tests.tsv"
    row test "$name" "$st" "exit $rc, ${dt}s$([ "$st" = TIMEOUT ] && echo " (limit ${cap}s)"): $(lastline "$work/test.log" | cut -c1-48)"
    addlog "test $name $args: $st (exit $rc, ${dt}s, limit ${cap}s)" "$work/test.log"
  done <"$TESTS_TSV"
}

# --- 3b. compute-sanitizer over the packed tests (optional step) --------------------------
run_sanitize() {
  banner "3b. compute-sanitizer"
  local cs
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer /opt/nvidia/*/compute-sanitizer 2>/dev/null | head -n1)
  if [ -z "$cs" ] || [ $HAVE_GPU = 0 ]; then
    row sanitize compute-sanitizer SKIPPED "$([ -z "$cs" ] && echo "not installed" || echo "no CUDA device")"
    return
  fi
  printf 'tool\ttest\tstatus\texit\tseconds\terrors\n' >"$OUT/sanitize.tsv"
  local tool name exe to args cap t0 rc st dt nerr
  for tool in ${GPU_SANITIZE:-memcheck racecheck synccheck initcheck}; do
    while IFS=$'\t' read -r name exe to args; do
      [ -n "$name" ] || continue
      if [ "$ONLY" != "  " ] && [[ $ONLY != *" $name "* ]]; then continue; fi
      cap=$((to * 4))
      [ -n "${GPU_TEST_CAP_S:-}" ] && [ "$GPU_TEST_CAP_S" -lt "$cap" ] && cap=$GPU_TEST_CAP_S
      [ $(($(left) - 20)) -lt "$cap" ] && cap=$(($(left) - 20))
      if [ "$cap" -lt 15 ]; then
        row sanitize "$tool $name" "NOT RUN" "time budget spent"
        N_FAIL=$((N_FAIL + 1))
        continue
      fi
      t0=$(date +%s)
      local extra=()
      [ "$tool" = memcheck ] && extra=(--leak-check full)
      # shellcheck disable=SC2086 # args are ctest's, split on spaces
      TMPDIR=$work/tmp timeout -k 10 "$cap" "$cs" --tool "$tool" "${extra[@]}" --error-exitcode 99 \
        --print-limit 20 "$BIN/$exe" $args >"$work/san.log" 2>&1 </dev/null
      rc=$?
      dt=$(($(date +%s) - t0))
      nerr=$(grep -oE 'SUMMARY: [0-9]+ (error|hazard)' "$work/san.log" | tail -n1 | awk '{print $2}')
      case $rc in
        0) st=PASSED ;; 77) st=SKIPPED ;; 124 | 137) st=TIMEOUT ;; *) st=FAILED ;;
      esac
      case $st in PASSED) N_PASS=$((N_PASS + 1)) ;; SKIPPED) N_SKIP=$((N_SKIP + 1)) ;; *) N_FAIL=$((N_FAIL + 1)) ;; esac
      printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$tool" "$name" "$st" "$rc" "$dt" "${nerr:-?}" >>"$OUT/sanitize.tsv"
      row sanitize "$tool $name" "$st" "exit $rc, ${dt}s, ${nerr:-?} errors"
      addlog "compute-sanitizer --tool $tool $name: $st (exit $rc, ${dt}s)" "$work/san.log"
    done <"$TESTS_TSV"
  done
}

# --- 4. benchmark --------------------------------------------------------------------------
run_bench() {
  banner "4. microspec-gpu-bench"
  local reps=${GPU_BENCH_REPS:-5} cap rc st t0
  cap=$(($(left) - 70))
  step e2e || cap=$(($(left) - 10))
  [ "$cap" -gt 300 ] && cap=300
  if [ ! -x "$BIN/microspec-gpu-bench" ] || [ "$cap" -lt 20 ]; then
    row bench microspec-gpu-bench "NOT RUN" "$([ "$cap" -lt 20 ] && echo "time budget spent" || echo "not built")"
    return
  fi
  t0=$(date +%s)
  timeout -k 10 "$cap" "$BIN/microspec-gpu-bench" --out "$OUT/gpu_bench" --reps "$reps" \
    >"$work/bench.md" 2>"$work/bench.err" </dev/null
  rc=$?
  case $rc in
    0) st=PASSED ;; 2) st=SKIPPED ;; 124 | 137) st=TIMEOUT ;; *) st=FAILED ;;
  esac
  cat "$work/bench.md"
  addlog "microspec-gpu-bench --reps $reps: stdout" "$work/bench.md"
  addlog "microspec-gpu-bench: stderr" "$work/bench.err"
  local d
  case $st in
    PASSED) d="ran, --reps $reps, $(($(date +%s) - t0))s: gpu_bench.json/.csv" ;;
    SKIPPED) d="exit 2: $(lastline "$work/bench.err" | cut -c1-50)" ;;
    *) d="exit $rc, limit ${cap}s: $(lastline "$work/bench.err" | cut -c1-45)" ;;
  esac
  row bench microspec-gpu-bench "$st" "$d"
}

# --- 5. end to end ---------------------------------------------------------------------------
# gen LABEL OUTFILE ARGS... — one greedy generation of stories260K; the
# tokens/s it reports lands in $work/tps.LABEL.
gen() {
  local label=$1 out=$2 rc
  shift 2
  timeout -k 5 90 "$BIN/microspec-generate" --prompt "Once upon a time" --steps 256 --echo "$@" \
    >"$out" 2>"$work/gen.err" </dev/null
  rc=$?
  {
    echo "### $label: microspec-generate $* → exit $rc"
    cat "$work/gen.err"
    echo "--- output ($(wc -c <"$out") bytes):"
    cat "$out"
    echo
  } >>"$OUT/e2e.txt"
  # AR prints "decode: X tok/s"; speculative "speed: X tokens/s end to end".
  local v
  v=$(grep -o 'speed: [0-9.]* tokens/s end to end' "$work/gen.err" | head -n1 | awk '{print $2}')
  [ -n "$v" ] || v=$(grep -o 'decode: [0-9.]* tok/s' "$work/gen.err" | head -n1 | awk '{print $2}')
  echo "${v:-?}" >"$work/tps.$label"
  return $rc
}
# firstdiff A B — nothing when the files are equal, else where they differ
firstdiff() {
  cmp -s "$1" "$2" && return 0
  local o
  o=$(cmp "$1" "$2" 2>&1)
  case $o in
    *differ:*) echo "byte $(echo "$o" | sed 's/.*byte \([0-9]*\).*/\1/')" ;;
    *EOF*) echo "byte $(echo "$o" | sed 's/.*after byte \([0-9]*\).*/\1/') (one output is a prefix of the other)" ;;
    *) echo "? ($o)" ;;
  esac
}

run_e2e() {
  banner "5. end to end: stories260K, greedy, \"Once upon a time\", 256 positions"
  : >"$OUT/e2e.txt"
  local src=$root/.gpu/shared/models/stories260k m=$work/stories rc d
  if [ ! -f "$src/stories260K.bin" ] || [ ! -x "$BIN/microspec-generate" ]; then
    row e2e stories260K "NOT RUN" "no .gpu/shared or no microspec-generate"
    return
  fi
  if ! timeout 60 "$BIN/convert-llama2c" "$src/stories260K.bin" "$src/tok512.bin" "$m" >>"$OUT/e2e.txt" 2>&1; then
    row e2e convert FAILED "convert-llama2c"
    return
  fi
  timeout 60 "$BIN/microspec-freqlist" --tokenizer "$m" --k 128 --out "$work/static.list" \
    "$src/golden_once_upon_a_time_t0_n256.txt" >>"$OUT/e2e.txt" 2>&1 || row e2e freqlist FAILED "static list"

  # CPU AR: must be byte-identical to llama2.c's output (golden file).
  gen cpu-ar "$work/cpu.txt" --model "$m" --device cpu
  rc=$?
  d=$(firstdiff "$work/cpu.txt" "$src/golden_once_upon_a_time_t0_n256.txt")
  if [ $rc -eq 0 ] && [ -z "$d" ]; then
    row e2e "AR cpu f32 vs golden" PASSED "byte-identical; $(cat "$work/tps.cpu-ar") tok/s"
  else
    row e2e "AR cpu f32 vs golden" FAILED "exit $rc${d:+, first diff at $d}"
  fi

  if [ $HAVE_GPU = 0 ]; then
    row e2e "cuda runs (AR + 4 speculative)" SKIPPED "no CUDA device"
    return
  fi
  # CUDA AR (bf16 activations): compared with the CPU f32 output for
  # information — bf16 rounding may flip a near-tie argmax.
  gen cuda-ar "$work/cuda.txt" --model "$m" --device cuda
  rc=$?
  if [ $rc -ne 0 ]; then
    row e2e "AR cuda bf16" FAILED "exit $rc: $(grep ERROR "$OUT/e2e.txt" | tail -n1 | cut -c1-50)"
    return
  fi
  d=$(firstdiff "$work/cuda.txt" "$work/cpu.txt")
  row e2e "AR cuda bf16 vs AR cpu" "$([ -z "$d" ] && echo MATCH || echo DIFF)" \
    "$([ -z "$d" ] && echo "identical" || echo "first diff at $d (bf16 rounding?)"); $(cat "$work/tps.cuda-ar") tok/s"
  # Speculative on cuda must emit what AR on cuda emits (docs/architecture.md §4); a
  # divergence is a defect unless it sits on a bf16 near-tie (see test_cuda_spec).
  local mode label
  # W_max 128 of the 512 ids, so the dynamic window really packs rows.
  for mode in "full" "static --vocab-list $work/static.list" "dynamic --w-max 128" \
    "dynamic --w-max 128 --lm-head indexed"; do
    label="spec-$(echo "$mode" | awk '{print $1}')$(echo "$mode" | grep -q indexed && echo -idx)"
    # shellcheck disable=SC2086 # mode holds options
    gen "$label" "$work/$label.txt" --model "$m" --device cuda --draft-kind layerskip --draft-layers 2 --vocab $mode
    rc=$?
    if [ $rc -ne 0 ]; then
      row e2e "$label (layerskip-2, cuda)" FAILED "exit $rc"
      continue
    fi
    d=$(firstdiff "$work/$label.txt" "$work/cuda.txt")
    row e2e "$label vs AR cuda" "$([ -z "$d" ] && echo PASSED || echo DIFF)" \
      "$([ -z "$d" ] && echo identical || echo "first diff at $d"); $(cat "$work/tps.$label") tok/s"
  done
}

# --- run ---------------------------------------------------------------------------------------
echo "gpu_first_run: repo $root, OUT $OUT, steps:$STEPS, budget ${BUDGET}s"
step inventory && inventory
step env && environment
[ $HAVE_GPU = 1 ] || nvidia-smi -L 2>/dev/null | grep -q '^GPU ' && HAVE_GPU=1
if step tests || step sanitize || step bench || step e2e; then
  if [ -d "$PACK/bin" ]; then setup_pack; else setup_source; fi
  if [ $BUILD_OK = 1 ]; then
    step tests && run_tests
    step sanitize && run_sanitize
    step bench && run_bench
    step e2e && run_e2e
  fi
fi
[ -f "$OUT/e2e.txt" ] && addlog "e2e.txt (also a file of its own)" "$OUT/e2e.txt"

{
  echo
  echo "===== SUMMARY (gpu_first_run.sh, $(elapsed)s; files in $OUT: $(cd "$OUT" && ls | tr '\n' ' ')) ====="
  printf '%-9s %-32s %-8s %s\n' section item status detail
  cat "$SUM"
  echo "tests: $N_PASS passed, $N_FAIL failed/timeout/not run, $N_SKIP SKIPPED (skipped is not passed)"
} | tee "$OUT/summary.txt"
[ "$N_FAIL" = 0 ] && ! grep -q ' FAILED ' "$SUM"
