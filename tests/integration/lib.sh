# lib.sh — shared helpers of the two-node integration tests (sourced).
#
# Environment (set by tests/integration.cmake): MS_BUILD_DIR, MS_SHARED_DIR,
# MS_SOURCE_DIR. Each test calls it_init NAME first: a temporary folder $WORK,
# and an EXIT trap that stops every process the test started (SIGTERM, then
# SIGKILL after a bounded grace), runs $IT_CLEANUP (extra cleanup, e.g.
# network namespaces), kills (and fails on) any process still carrying the
# test's MS_TEST_TAG (tests/proc_guard.sh), fails on a sanitizer report and
# prints the logs' tails on failure ($WORK/*.log and the globs in
# $IT_MORE_LOGS), and removes $WORK.
# Waits are bounded polls; nothing sleeps for long.
set -u
set -o pipefail

: "${MS_BUILD_DIR:?MS_BUILD_DIR must name the build folder}"
: "${MS_SHARED_DIR:=}"
: "${MS_SOURCE_DIR:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
TOOL=$MS_BUILD_DIR/tests/itest-tool
GEN=$MS_BUILD_DIR/tools/microspec-generate
TARGET_BIN=$MS_BUILD_DIR/bin/microspec-target
DRAFT_BIN=$MS_BUILD_DIR/bin/microspec-draft
IT_FAILS=0
IT_PIDS=()
IT_CLEANUP=""
IT_MORE_LOGS="" # globs of logs beyond $WORK/*.log whose tails a failure prints
# ITEST_SMALL (set by CMake for sanitizer builds): slow nodes — fewer prompts, a
# longer link deadline.
IT_DEADLINE=800
[ -z "${ITEST_SMALL:-}" ] || IT_DEADLINE=4000

it_log() { echo "[$(date +%H:%M:%S)] $*"; }
it_fail() { echo "FAIL: $*"; IT_FAILS=$((IT_FAILS + 1)); }
it_skip() { echo "SKIP: $*"; exit 77; }
it_die() { echo "FAIL: $*"; exit 1; }

it_cleanup() {
  local rc=$?
  local p i
  [ -z "${IT_WATCHDOG:-}" ] || kill "$IT_WATCHDOG" 2>/dev/null
  for p in "${IT_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${IT_PIDS[@]}"; do
    for i in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  [ -z "$IT_CLEANUP" ] || eval "$IT_CLEANUP"
  if [ -n "${MS_TEST_TAG:-}" ]; then # none of this test's processes outlives it
    local left
    left=$(bash "$MS_SOURCE_DIR/tests/proc_guard.sh" kill "$MS_TEST_TAG")
    if [ -n "$left" ]; then
      echo "FAIL: processes outlived the test (killed now):"
      sed 's/^/  /' <<<"$left"
      [ "$rc" != 0 ] && [ "$rc" != 77 ] || rc=1
    fi
  fi
  # Sanitizer builds: a report in any node's log fails the test.
  if [ -d "${WORK:-}" ] && [ "$rc" != 77 ]; then
    local bad=()
    # shellcheck disable=SC2086 # IT_MORE_LOGS: globs, expanded here
    mapfile -t bad < <(grep -lE "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error: " "$WORK"/*.log ${IT_MORE_LOGS:-} 2>/dev/null)
    if [ ${#bad[@]} -gt 0 ]; then
      echo "FAIL: sanitizer reports in: ${bad[*]}"
      grep -hE -A12 "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error: " "${bad[@]}" | head -60
      rc=1
    fi
  fi
  if [ "$rc" != 0 ] && [ "$rc" != 77 ] && [ -d "${WORK:-}" ]; then
    # shellcheck disable=SC2086 # IT_MORE_LOGS: globs under $WORK, expanded now
    for f in "$WORK"/*.log ${IT_MORE_LOGS:-}; do
      [ -f "$f" ] || continue
      echo "---- tail of ${f#"$WORK"/}"
      tail -n 25 "$f"
    done
  fi
  if [ -n "${ITEST_KEEP:-}" ]; then echo "kept $WORK (ITEST_KEEP)"; elif [ -n "${WORK:-}" ]; then rm -rf "$WORK"; fi
  exit "$rc"
}

it_init() { # it_init NAME
  IT_NAME=$1
  for x in "$TOOL" "$GEN" "$TARGET_BIN" "$DRAFT_BIN"; do
    [ -x "$x" ] || it_die "$x missing: build first"
  done
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/ms-itest-$1.XXXXXX") || it_die "mktemp"
  trap it_cleanup EXIT
  trap 'exit 130' INT TERM
  # If this shell is killed outright (ctest's timeout sends SIGKILL, so no trap
  # runs), a watchdog ends what it started: the pids in $WORK/.pids, the
  # commands in $WORK/.cleanup, then the folder.
  local me=$$
  ( trap - EXIT INT TERM
    while kill -0 "$me" 2>/dev/null; do sleep 1; done
    [ -f "$WORK/.pids" ] && while read -r p; do kill -KILL "$p" 2>/dev/null; done <"$WORK/.pids"
    [ -f "$WORK/.cleanup" ] && bash "$WORK/.cleanup"
    [ -n "${ITEST_KEEP:-}" ] || rm -rf "$WORK" ) </dev/null >/dev/null 2>&1 &
  IT_WATCHDOG=$!
  # Issue 35: what cluster/launch.sh starts is re-parented to init, outside
  # the tree ctest kills on a timeout (the watchdog above included). Every
  # descendant carries this tag; a detached watcher (tests/proc_guard.sh)
  # kills the tagged processes once this shell is gone, and it_cleanup kills
  # and reports any still running.
  export MS_TEST_TAG="itest-$IT_NAME-$$-$RANDOM"
  ( setsid bash "$MS_SOURCE_DIR/tests/proc_guard.sh" watch $$ "$MS_TEST_TAG" </dev/null >/dev/null 2>&1 & )
  it_log "$IT_NAME: work folder $WORK"
}

it_finish() {
  if [ "$IT_FAILS" -gt 0 ]; then echo "$IT_NAME: $IT_FAILS failure(s)"; exit 1; fi
  echo "$IT_NAME: ok"
  exit 0
}

it_need_shared() { # it_need_shared RELPATH...
  local f
  [ -n "$MS_SHARED_DIR" ] || it_skip "MS_SHARED_DIR is not set"
  for f in "$@"; do [ -e "$MS_SHARED_DIR/$f" ] || it_skip "$MS_SHARED_DIR/$f absent"; done
}

it_port() { "$TOOL" free-port; }

# it_netns_pair PREFIX — two "hosts": network namespaces ns1=PREFIX$$t
# (10.200.0.1/24) and ns2=PREFIX$$d (10.200.0.2/24) joined by a veth pair,
# loopback up, reachable from each other. On exit (trap or watchdog) the
# cluster of $WORK/run is stopped and both namespaces deleted. Skips (77)
# without `ip`, without root, or where namespaces cannot be created.
it_netns_possible() { # skips (77) early, before costly setup, where it_netns_pair cannot work
  command -v ip >/dev/null || it_skip "no 'ip' command (iproute2)"
  [ "$(id -u)" = 0 ] || it_skip "network namespaces need root"
}
it_netns_pair() {
  it_netns_possible
  ns1=$1$$t ns2=$1$$d
  IT_CLEANUP='[ -f "$WORK/run/pids" ] && RUN_DIR=$WORK/run "$MS_SOURCE_DIR/cluster/stop.sh"; ip netns del $ns1 2>/dev/null; ip netns del $ns2 2>/dev/null'
  printf '%s\n' "[ -f '$WORK/run/pids' ] && RUN_DIR='$WORK/run' '$MS_SOURCE_DIR/cluster/stop.sh'" \
    "ip netns del $ns1" "ip netns del $ns2" >"$WORK/.cleanup" # for the watchdog
  ip netns add "$ns1" 2>/dev/null || it_skip "cannot create network namespaces (ip netns add failed)"
  ip netns add "$ns2" || it_die "ip netns add $ns2"
  ip link add "v$$t" type veth peer name "v$$d" || it_skip "cannot create a veth pair"
  ip link set "v$$t" netns "$ns1" && ip link set "v$$d" netns "$ns2" || it_die "moving the veth ends"
  ip -n "$ns1" addr add 10.200.0.1/24 dev "v$$t" && ip -n "$ns2" addr add 10.200.0.2/24 dev "v$$d" || it_die "addresses"
  local ns
  for ns in "$ns1" "$ns2"; do ip -n "$ns" link set lo up; done
  ip -n "$ns1" link set "v$$t" up && ip -n "$ns2" link set "v$$d" up || it_die "link up"
  # Reachability without ping: a TCP connect to a closed port is refused (not unreachable).
  reach() { local out; out=$(ip netns exec "$ns2" timeout 2 bash -c "exec 3<>/dev/tcp/10.200.0.1/1" 2>&1); grep -q refused <<<"$out"; }
  local deadline=$((SECONDS + 10))
  until reach || [ $SECONDS -ge $deadline ]; do sleep 0.05; done
  reach || it_die "the namespaces cannot reach each other"
  it_log "namespaces $ns1 (10.200.0.1) and $ns2 (10.200.0.2) joined by a veth pair"
}

# ---- models --------------------------------------------------------------------

# stories260K converted to a Hugging Face folder: $WORK/stories
it_stories() {
  local src=$MS_SHARED_DIR/models/stories260k
  "$MS_BUILD_DIR/tools/convert-llama2c" "$src/stories260K.bin" "$src/tok512.bin" "$WORK/stories" >/dev/null 2>"$WORK/convert.err" ||
    { cat "$WORK/convert.err"; it_die "convert-llama2c failed"; }
  STORIES=$WORK/stories
}

# A random tiny Qwen3 pair with the real Qwen3 tokenizer (151,669 ids: the model vocabulary is not padded to 151,936, so a random model cannot emit ids the tokenizer cannot decode):
# $WORK/q3-target, its `lm` draft $WORK/q3-lm and `eagle` head $WORK/q3-eagle.
it_qwen3_pair() {
  local tok=$MS_SHARED_DIR/tokenizers/qwen3/tokenizer.json
  "$MS_BUILD_DIR/tools/microspec-mkmodel" --out "$WORK/q3-target" --arch qwen3 --vocab 151669 --hidden 32 --layers 2 \
    --heads 4 --kv-heads 2 --ffn 48 --seed 31 --bos -1 --eos 151645 --eos 151643 --tokenizer "$tok" >/dev/null 2>&1 ||
    it_die "mkmodel target failed"
  "$MS_BUILD_DIR/tools/microspec-mkmodel" --out "$WORK/q3-lm" --arch qwen3 --vocab 151669 --hidden 16 --layers 1 \
    --heads 2 --kv-heads 1 --ffn 32 --seed 32 --bos -1 --eos 151645 --tokenizer "$tok" >/dev/null 2>&1 ||
    it_die "mkmodel lm draft failed"
  "$MS_BUILD_DIR/tools/microspec-mkeagle" --target "$WORK/q3-target" --out "$WORK/q3-eagle" --seed 33 >/dev/null 2>&1 ||
    it_die "mkeagle failed"
  Q3=$WORK/q3-target
}

# ---- configuration -----------------------------------------------------------------

# it_config FILE — a cluster config from these variables (defaults in brackets):
#   C_MODEL (required), C_KIND [layerskip], C_DRAFT [""], C_LAYERS [1],
#   C_PIPELINE [sync], C_POLICY [all: whole trees every round, so the link's
#   mechanics are exercised; "cost" is the shipped default, run by
#   test_cluster_equiv's "cost" pass], C_PORT (required), C_ENDPOINT [ipc://$WORK/link.sock],
#   C_VOCAB [dynamic], C_LISTEN [127.0.0.1], C_CTX [512], C_WMAX [256], C_TREE ["top_k = 8; depth = 4; total = 32;"],
#   C_HEARTBEAT [500: 100 makes the link flap on a loaded machine — the draft
#   re-announces itself when the target computes for 3 heartbeats, and the target
#   drops it mid-request for that hello; reported], C_QUEUE [8], C_LINK_EXTRA [""], C_HTTP_EXTRA [""], C_TOP_EXTRA [""], C_LOG [info]
it_config() {
  cat >"$1" <<EOF
# written by $IT_NAME
target = { model = "${C_MODEL:?}"; max_ctx = ${C_CTX:-512}; threads = 1; device = "cpu"; };
draft = { enabled = true; kind = "${C_KIND:-layerskip}"; model = "${C_DRAFT:-}"; layers = ${C_LAYERS:-1};
          threads = 1; device = "cpu"; policy = "${C_POLICY:-all}"; };
vocab = { mode = "${C_VOCAB:-dynamic}"; w_max = ${C_WMAX:-256}; k_pre = 3; k_ver = 3; };
tree = { ${C_TREE:-top_k = 8; depth = 4; total = 32;} };
pipeline = "${C_PIPELINE:-sync}";
link = { endpoint = "${C_ENDPOINT:-ipc://$WORK/link.sock}"; deadline_ms = ${C_DEADLINE:-$IT_DEADLINE}; heartbeat_ms = ${C_HEARTBEAT:-500};
         reconnect_ms = 100; ${C_LINK_EXTRA:-} };
http = { listen = "${C_LISTEN:-127.0.0.1}"; port = ${C_PORT:?}; queue = ${C_QUEUE:-8};
         max_tokens_default = 64; max_tokens_limit = 2048; ${C_HTTP_EXTRA:-} };
log = { level = "${C_LOG:-info}"; };
${C_TOP_EXTRA:-}
EOF
  "$MS_BUILD_DIR/tools/microspec-config" "$1" --check >/dev/null || it_die "config $1 does not validate"
}

# ---- processes ---------------------------------------------------------------------

# it_start_target CFG LOG → $TARGET_PID; it_start_draft CFG LOG → $DRAFT_PID
it_start_target() {
  "$TARGET_BIN" --config "$1" >>"$2" 2>&1 </dev/null &
  TARGET_PID=$!
  IT_PIDS+=("$TARGET_PID")
  echo "$TARGET_PID" >>"$WORK/.pids"
}
it_start_draft() {
  "$DRAFT_BIN" --config "$1" >>"$2" 2>&1 </dev/null &
  DRAFT_PID=$!
  IT_PIDS+=("$DRAFT_PID")
  echo "$DRAFT_PID" >>"$WORK/.pids"
}

# it_stop PID — SIGTERM, bounded wait, SIGKILL.
it_stop() {
  local i
  kill -TERM "$1" 2>/dev/null || return 0
  for i in $(seq 1 50); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$1" 2>/dev/null
  wait "$1" 2>/dev/null
  return 0
}

# it_wait_health URL PATTERN SECONDS [curl args...] — poll /health until its
# body matches PATTERN (grep -E); fails if the target died. Body in $HEALTH.
it_wait_health() {
  local url=$1 pat=$2 secs=$3
  shift 3
  local deadline=$((SECONDS + secs))
  HEALTH=""
  while [ $SECONDS -lt $deadline ]; do
    HEALTH=$(curl -s -m 2 "$@" "$url/health" 2>/dev/null) || HEALTH=""
    if [ -n "$HEALTH" ] && grep -Eq "$pat" <<<"$HEALTH"; then return 0; fi
    if [ -n "${TARGET_PID:-}" ] && ! kill -0 "$TARGET_PID" 2>/dev/null; then
      echo "the target (pid $TARGET_PID) died"
      return 1
    fi
    sleep 0.05
  done
  echo "no /health matching '$pat' within ${secs}s (last: ${HEALTH:-no answer})"
  return 1
}

# it_up CFG NAME — start target + draft from CFG, wait for "draft":"up".
# The draft starts once the target answers /health (its link is bound): a draft
# started first queues a hello every reconnect_ms, and the target admits each
# queued copy when it binds (several "draft joined" lines for one pid), so a
# late copy can land inside the first request and fail its draft (reported).
# Sets URL, TARGET_PID, DRAFT_PID; logs $WORK/NAME-target.log, NAME-draft.log.
it_up() {
  local cfg=$1 name=$2
  local port
  port=$("$MS_BUILD_DIR/tools/microspec-config" "$cfg" --get http.port)
  URL=http://127.0.0.1:$port
  it_start_target "$cfg" "$WORK/$name-target.log"
  it_wait_health "$URL" "\"status\":\"ok\"" 60 || it_die "$name: the target did not come up"
  it_start_draft "$cfg" "$WORK/$name-draft.log"
  it_wait_health "$URL" '"draft":"up"' 60 || it_die "$name: the cluster did not come up"
}

# ---- requests ------------------------------------------------------------------------

# it_post URL PATH BODY_FILE OUT [curl args...] — prints the HTTP status.
it_post() {
  local url=$1 path=$2 body=$3 out=$4
  shift 4
  curl -s -m 120 -o "$out" -w '%{http_code}' -H 'Content-Type: application/json' "$@" \
    --data-binary @"$body" "$url$path" || echo " curl-exit-$?"
}

# it_ar MODEL PROMPT_FILE N OUT — microspec-generate's greedy continuation
# (its trailing newline removed): the independent reference.
it_ar() {
  "$GEN" --model "$1" --prompt-file "$2" -n "$3" >"$4" 2>"$4.err" || { cat "$4.err"; it_die "microspec-generate failed"; }
  [ -z "$(tail -c 1 "$4")" ] || it_die "microspec-generate output does not end with a newline"
  truncate -s -1 "$4"
}

# it_same WHAT EXPECTED ACTUAL — byte comparison, with a short diff on failure.
it_same() {
  if cmp -s "$2" "$3"; then return 0; fi
  it_fail "$1: text differs from the autoregressive reference"
  echo "  expected: $(head -c 300 "$2" | tr '\n' '|')"
  echo "  actual:   $(head -c 300 "$3" | tr '\n' '|')"
  return 1
}

# it_text_same LABEL WANT RESPONSE_JSON OUT — the response's text (choices[0])
# into OUT, then it_same against WANT. A response without a text is a failure
# too (`"$TOOL" text … && it_same …` recorded none); status 1 on either.
it_text_same() {
  "$TOOL" text "$3" "$4" || { it_fail "$1: the response has no text"; return 1; }
  it_same "$1" "$2" "$4"
}

# it_ar_all MODEL N OUT_DIR PROMPT_FILE... — it_ar for each prompt, two at a
# time (microspec-generate is single-threaded; loading the Qwen3 tokenizer
# dominates a short run). OUT_DIR/<prompt basename>.
it_ar_all() {
  local model=$1 n=$2 out=$3 p
  shift 3
  local jobs=()
  for p in "$@"; do
    (it_ar "$model" "$p" "$n" "$out/$(basename "$p")") &
    jobs+=($!)
    if [ ${#jobs[@]} -ge 2 ]; then
      wait "${jobs[0]}" || it_die "autoregressive reference failed"
      jobs=("${jobs[@]:1}")
    fi
  done
  for p in "${jobs[@]}"; do wait "$p" || it_die "autoregressive reference failed"; done
}

# it_need_cmds CMD... — commands from Debian packages this test needs: any
# missing runs tools/install-deps.sh once (which installs them); a skip (77)
# only when they still cannot be had (not root, no network, no apt).
it_need_cmds() {
  local c missing=()
  for c in "$@"; do command -v "$c" >/dev/null || [ -x "/usr/sbin/$c" ] || missing+=("$c"); done
  [ ${#missing[@]} -gt 0 ] || return 0
  it_log "missing ${missing[*]}: running tools/install-deps.sh"
  bash "$MS_SOURCE_DIR/tools/install-deps.sh" >"$WORK/install-deps.log" 2>&1 || true
  for c in "${missing[@]}"; do
    command -v "$c" >/dev/null || [ -x "/usr/sbin/$c" ] ||
      it_skip "$c is not installed and tools/install-deps.sh could not install it: $(tail -n 1 "$WORK/install-deps.log")"
  done
}
