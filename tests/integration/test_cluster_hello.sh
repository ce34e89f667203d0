#!/usr/bin/env bash
# Issue 15: a stranger's hello. (a) A cluster started by cluster/launch.sh is
# authenticated by default: its run folder holds a fresh link secret (mode
# 0600) both nodes were given; a stranger's hello with the public tokenizer
# fingerprint but no proof is refused with a challenge, one with another
# secret is refused, and even one with the cluster's own secret does not evict
# the healthy draft (error reply); the real draft stays joined (one join in
# the target's log) and a request still speculates with the autoregressive
# text. (b) Without the default authentication (nodes started directly, no
# secret): the stranger's matching hello gets an error reply and the draft
# stays; once the draft is killed and the target marks it down, a newcomer
# with another tokenizer is refused and one with the same is admitted. (c) launch.sh --no-link-secret makes no secret.
source "$(dirname "$0")/lib.sh"
it_init hello
it_need_shared models/stories260k/stories260K.bin models/stories260k/tok512.bin
it_stories
printf 'Once upon a time, there was a' >"$WORK/prompt.txt"
it_ar "$STORIES" "$WORK/prompt.txt" 48 "$WORK/ar.txt"
"$TOOL" body completions "$WORK/prompt.txt" 48 0 >"$WORK/req.body"
ep=ipc://$WORK/link.sock

# speculates NAME — a request on $URL answers the reference text with speculation.
speculates() {
  local code
  code=$(it_post "$URL" /v1/completions "$WORK/req.body" "$WORK/$1.json")
  [ "$code" = 200 ] || { it_fail "$1: HTTP $code: $(head -c 300 "$WORK/$1.json")"; return; }
  "$TOOL" text "$WORK/$1.json" "$WORK/$1.txt"
  it_same "$1" "$WORK/ar.txt" "$WORK/$1.txt"
  mapfile -t st < <("$TOOL" get "$WORK/$1.json" microspec.spec_rounds microspec.draft_failed)
  it_log "$1: spec_rounds ${st[0]}, draft_failed ${st[1]}"
  [ "${st[0]}" -gt 0 ] && [ "${st[1]}" = false ] || it_fail "$1: the draft did not serve the request"
}
stranger() { # stranger EXPECT [SECRET_FILE]
  timeout 30 "$TOOL" hello "$ep" "$STORIES" 512 "$@" || it_fail "stranger's hello: expected $1"
}

# ---- (a) launch.sh: authenticated by default ---------------------------------------------
C_MODEL=$STORIES C_PORT=$(it_port)
it_config "$WORK/hello.cfg"
URL=http://127.0.0.1:$(grep -o 'port = [0-9]*' "$WORK/hello.cfg" | grep -o '[0-9]*')
run=$WORK/run
IT_CLEANUP="RUN_DIR=$run bash $MS_SOURCE_DIR/cluster/stop.sh >/dev/null 2>&1"
echo "RUN_DIR=$run bash $MS_SOURCE_DIR/cluster/stop.sh" >"$WORK/.cleanup"
RUN_DIR=$run timeout 120 bash "$MS_SOURCE_DIR/cluster/launch.sh" "$WORK/hello.cfg" --build "$MS_BUILD_DIR" \
  --timeout 60 --logs "$WORK" >"$WORK/launch.out" 2>&1 || it_die "launch.sh failed: $(cat "$WORK/launch.out")"
while read -r _ _ pid _; do IT_PIDS+=("$pid"); echo "$pid" >>"$WORK/.pids"; done <"$run/pids"
draft_pid=$(awk '$1 == "draft" { print $3 }' "$run/pids")
tlog=$WORK/target.log
[ -f "$run/link.secret" ] || it_die "launch.sh wrote no link secret in $run"
mode=$(stat -c %a "$run/link.secret")
[ "$mode" = 600 ] || it_fail "link secret mode $mode, expected 600"
[ "$(wc -c <"$run/link.secret")" -ge 32 ] || it_fail "link secret shorter than 32 bytes"
grep -q 'listening on .* (link secret)' "$tlog" || it_fail "the target's link does not use the secret"
grep -q 'link:   authenticated with' "$WORK/launch.out" || it_fail "launch.sh does not say the link is authenticated"

stranger auth-required
printf 'not-the-cluster-secret-0123456789\n' >"$WORK/wrong.secret"
chmod 600 "$WORK/wrong.secret"
stranger auth-failed "$WORK/wrong.secret"
stranger busy "$run/link.secret"
grep -q 'link: refused a hello (pid [0-9]*): wrong proof of the link secret' "$tlog" ||
  it_fail "target log: no line for the wrong proof"
grep -q 'link: refused a second draft' "$tlog" || it_fail "target log: no line for the second draft"
joins=$(grep -c 'draft joined' "$tlog")
[ "$joins" = 1 ] && grep -q "draft joined: .*pid $draft_pid," "$tlog" ||
  it_fail "target log: $joins draft joins, expected only the real draft's (pid $draft_pid)"
grep -q 'link: the draft runs build [^ ]* (ping ' "$tlog" || it_fail "target log: no line with the draft's build (ping)"
it_wait_health "$URL" '"draft":"up"' 10 || it_fail "the draft is not up after the strangers"
kill -0 "$draft_pid" 2>/dev/null || it_fail "the draft node died"
speculates authenticated
RUN_DIR=$run bash "$MS_SOURCE_DIR/cluster/stop.sh" >/dev/null 2>&1 || it_fail "stop.sh failed"
[ ! -f "$run/link.secret" ] || it_fail "stop.sh left the link secret"

# ---- (b) no secret: nodes started directly --------------------------------------------------
C_PORT=$(it_port)
it_config "$WORK/open.cfg"
it_up "$WORK/open.cfg" open
tlog=$WORK/open-target.log
grep -q '(link secret)' "$tlog" && it_fail "a node started without a secret uses one"
stranger busy
grep -q 'link: refused a second draft' "$tlog" || it_fail "open link: no line for the second draft"
it_wait_health "$URL" '"draft":"up"' 10 || it_fail "open link: the draft is not up after the stranger"
speculates open
kill -KILL "$DRAFT_PID"
wait "$DRAFT_PID" 2>/dev/null
it_wait_health "$URL" '"draft":"down"' 30 || it_fail "open link: the killed draft is not marked down"
stranger wrong-tokenizer
grep -q 'refused a draft .*tokenizer fingerprint' "$tlog" || it_fail "open link: no line for the wrong tokenizer"
stranger accepted
[ "$(grep -c 'draft joined' "$tlog")" = 2 ] || it_fail "open link: the newcomer did not join once the draft was down"
it_stop "$TARGET_PID"

# ---- (c) --no-link-secret -----------------------------------------------------------------------
C_PORT=$(it_port)
it_config "$WORK/nosecret.cfg"
RUN_DIR=$WORK/run2 timeout 120 bash "$MS_SOURCE_DIR/cluster/launch.sh" "$WORK/nosecret.cfg" --build "$MS_BUILD_DIR" \
  --timeout 60 --logs "$WORK/nosecret" --no-link-secret >"$WORK/launch2.out" 2>&1 ||
  it_fail "launch.sh --no-link-secret failed: $(cat "$WORK/launch2.out")"
[ -f "$WORK/run2/pids" ] && while read -r _ _ pid _; do IT_PIDS+=("$pid"); echo "$pid" >>"$WORK/.pids"; done <"$WORK/run2/pids"
[ ! -f "$WORK/run2/link.secret" ] || it_fail "launch.sh --no-link-secret wrote a secret"
grep -q '(link secret)' "$WORK/nosecret/target.log" && it_fail "--no-link-secret: the target uses a secret"
RUN_DIR=$WORK/run2 bash "$MS_SOURCE_DIR/cluster/stop.sh" >/dev/null 2>&1
it_finish
