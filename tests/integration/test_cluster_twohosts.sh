#!/usr/bin/env bash
# Acceptance 6: two "hosts" — two network namespaces joined by a veth pair
# (10.200.0.1/24 and 10.200.0.2/24) — running cluster/configs/two-hosts.cfg
# (adapted: absolute model path, hosts "netns:NS", a free port, small
# deadlines), started by cluster/launch.sh and stopped by cluster/stop.sh. The
# draft reaches the target over the veth with CURVE; a request made inside the
# target's namespace gives the autoregressive text with speculation.
# launch.sh itself runs inside the target's namespace: it probes /health at
# http.listen (10.200.0.1), which the root namespace cannot reach.
# Skipped (77) where namespaces cannot be created (not root, no `ip`).
source "$(dirname "$0")/lib.sh"
it_init twohosts
it_need_shared models/stories260k/stories260K.bin models/stories260k/tok512.bin
it_netns_pair mst

it_stories
printf 'Once upon a time' >"$WORK/prompt.txt"
it_ar "$STORIES" "$WORK/prompt.txt" 64 "$WORK/ar.txt"
port=$(it_port) link_port=$(it_port)
# The shipped example, adapted (the sed patterns must all apply: a changed
# example fails here rather than silently testing something else).
src=$MS_SOURCE_DIR/cluster/configs/two-hosts.cfg
cfg=$WORK/two-hosts.cfg
sed -e "s|model = \"[^\"]*\"|model = \"$STORIES\"|" \
    -e "s|tcp://10.200.0.1:5757|tcp://10.200.0.1:$link_port|" \
    -e "s|port = 8080;|port = $port;|" \
    -e "s|deadline_ms = [0-9]*;|deadline_ms = 800;|" \
    -e "s|heartbeat_ms = [0-9]*;|heartbeat_ms = 500;|" \
    -e "s|target = \"10.200.0.1\";|target = \"netns:$ns1\";|" \
    -e "s|draft = \"10.200.0.2\";|draft = \"netns:$ns2\";|" "$src" >"$cfg"
for want in "model = \"$STORIES\"" "tcp://10.200.0.1:$link_port" "port = $port;" "target = \"netns:$ns1\";" \
            "draft = \"netns:$ns2\";" 'listen = "10.200.0.1";' 'enabled = true;'; do
  grep -qF "$want" "$cfg" || it_die "adapting $src: no '$want' in the result"
done
"$MS_BUILD_DIR/tools/microspec-config" "$cfg" --check >/dev/null || it_die "the adapted two-hosts config does not validate"

it_log "cluster/launch.sh (inside $ns1)"
RUN_DIR=$WORK/run ip netns exec "$ns1" "$MS_SOURCE_DIR/cluster/launch.sh" "$cfg" --build "$MS_BUILD_DIR" --timeout 60 \
  --logs "$WORK" >"$WORK/launch.out" 2>&1
rc=$?
cat "$WORK/launch.out"
[ "$rc" = 0 ] || it_die "launch.sh failed (exit $rc)"
read -r _ where_t pid_t _ < <(grep '^target ' "$WORK/run/pids")
read -r _ where_d pid_d _ < <(grep '^draft ' "$WORK/run/pids")
[ "$where_t" = "netns:$ns1" ] && [ "$where_d" = "netns:$ns2" ] || it_fail "pids file: target $where_t, draft $where_d"
[ "$(ip netns identify "$pid_t")" = "$ns1" ] || it_fail "the target (pid $pid_t) is not in $ns1"
[ "$(ip netns identify "$pid_d")" = "$ns2" ] || it_fail "the draft (pid $pid_d) is not in $ns2"
grep -q '(CURVE)' "$WORK/target.log" || it_fail "the link is not CURVE"

"$TOOL" body completions "$WORK/prompt.txt" 64 0 >"$WORK/req.body"
code=$(ip netns exec "$ns1" curl -s -m 60 -o "$WORK/resp.json" -w '%{http_code}' -H 'Content-Type: application/json' \
       --data-binary @"$WORK/req.body" "http://10.200.0.1:$port/v1/completions")
[ "$code" = 200 ] || it_die "request: HTTP $code"
"$TOOL" text "$WORK/resp.json" "$WORK/resp.txt"
it_same "request across the namespaces" "$WORK/ar.txt" "$WORK/resp.txt"
mapfile -t st < <("$TOOL" get "$WORK/resp.json" microspec.spec_rounds microspec.draft_failed)
it_log "request: spec_rounds ${st[0]}, draft_failed ${st[1]}"
[ "${st[0]}" -gt 0 ] || it_fail "no speculation across the namespaces"
[ "${st[1]}" = false ] || it_fail "the draft failed"

RUN_DIR=$WORK/run "$MS_SOURCE_DIR/cluster/stop.sh" || it_fail "stop.sh failed"
for p in "$pid_t" "$pid_d"; do kill -0 "$p" 2>/dev/null && it_fail "pid $p still runs after stop.sh"; done
[ ! -f "$WORK/run/pids" ] || it_fail "stop.sh left its pids file"
it_finish
