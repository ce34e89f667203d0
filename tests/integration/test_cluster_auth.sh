#!/usr/bin/env bash
# Acceptance 5: (a) the link with ZeroMQ CURVE: with fresh key pairs
# (zmq_curve_keypair via itest-tool), the draft holding the admitted client key
# joins ("draft":"up") and speculates over the encrypted link; a draft with a
# valid but not admitted client key cannot join within a bounded wait, and the
# target logs the refusal. (b) http.bearer_token: no header → 401, a wrong token
# → 401, the right one → 200 with the correct text; /health stays open.
source "$(dirname "$0")/lib.sh"
it_init auth
it_need_shared models/stories260k/stories260K.bin models/stories260k/tok512.bin
it_stories
printf 'Once upon a time' >"$WORK/prompt.txt"
it_ar "$STORIES" "$WORK/prompt.txt" 48 "$WORK/ar.txt"
"$TOOL" body completions "$WORK/prompt.txt" 48 0 >"$WORK/req.body"

mapfile -t server < <("$TOOL" keypair)
mapfile -t client < <("$TOOL" keypair)
mapfile -t wrong < <("$TOOL" keypair)
[ "${#server[0]}" = 40 ] && [ "${#client[1]}" = 40 ] && [ "${#wrong[0]}" = 40 ] || it_die "key generation failed"
token=tok-$RANDOM-$RANDOM
curve() { # curve CLIENT_PUBLIC CLIENT_SECRET
  echo "curve = { enabled = true; server_public = \"${server[0]}\"; server_secret = \"${server[1]}\";
           client_public = \"$1\"; client_secret = \"$2\"; };"
}
link_port=$(it_port)
C_MODEL=$STORIES C_PORT=$(it_port) C_ENDPOINT=tcp://127.0.0.1:$link_port C_HTTP_EXTRA="bearer_token = \"$token\";"
C_LINK_EXTRA=$(curve "${client[0]}" "${client[1]}")
it_config "$WORK/right.cfg"
C_LINK_EXTRA=$(curve "${wrong[0]}" "${wrong[1]}")
it_config "$WORK/wrong.cfg"

# ---- (a) CURVE --------------------------------------------------------------------
it_up "$WORK/right.cfg" right
it_log "the admitted draft joined over CURVE: $HEALTH"
grep -q 'listening on tcp://127.0.0.1:[0-9]* (CURVE)' "$WORK/right-target.log" || it_fail "the target's link is not CURVE"

# ---- (b) bearer token (on the same cluster) -----------------------------------------
code=$(it_post "$URL" /v1/completions "$WORK/req.body" "$WORK/noauth.json")
[ "$code" = 401 ] || it_fail "no Authorization header: HTTP $code, expected 401"
code=$(it_post "$URL" /v1/completions "$WORK/req.body" "$WORK/badauth.json" -H "Authorization: Bearer x$token")
[ "$code" = 401 ] || it_fail "wrong token: HTTP $code, expected 401"
code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "$URL/metrics")
[ "$code" = 401 ] || it_fail "/metrics without a token: HTTP $code, expected 401"
code=$(it_post "$URL" /v1/completions "$WORK/req.body" "$WORK/auth.json" -H "Authorization: Bearer $token")
[ "$code" = 200 ] || it_fail "right token: HTTP $code, expected 200"
if [ "$code" = 200 ]; then
  it_text_same "authorised request" "$WORK/ar.txt" "$WORK/auth.json" "$WORK/auth.txt"
  sr=$("$TOOL" get "$WORK/auth.json" microspec.spec_rounds)
  [ "$sr" -gt 0 ] || it_fail "no speculation over the CURVE link (spec_rounds $sr)"
  it_log "bearer token: 401 without, 401 wrong, 200 right; $sr speculative rounds over CURVE"
fi

# ---- (a) a draft whose client key is not admitted --------------------------------------
it_stop "$DRAFT_PID"
it_wait_health "$URL" '"draft":"down"' 10 || it_fail "the stopped draft is not reported down"
it_start_draft "$WORK/wrong.cfg" "$WORK/wrong-draft.log"
deadline=$((SECONDS + 15))
until grep -q 'refused a CURVE client' "$WORK/right-target.log" || [ $SECONDS -ge $deadline ]; do sleep 0.05; done
grep -q 'refused a CURVE client' "$WORK/right-target.log" || it_fail "the target did not log refusing the unknown key"
# Give the refused draft a few of its reconnect periods (100 ms) to try.
for _ in $(seq 1 30); do
  grep -q '"draft":"up"' <<<"$(curl -s -m 2 "$URL/health")" && { it_fail "a draft with a wrong key joined"; break; }
  sleep 0.1
done
grep -q 'joined the target' "$WORK/wrong-draft.log" && it_fail "the wrong-key draft believes it joined"
kill -0 "$TARGET_PID" 2>/dev/null || it_fail "the target died"
it_log "wrong client key: refused ($(grep -c 'refused a CURVE client' "$WORK/right-target.log") ZAP refusals), health: $(curl -s -m 2 "$URL/health" | grep -o '"draft":"[a-z]*"')"
it_finish
